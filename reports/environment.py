"""Environment facts and a methodology paragraph, generated from a run's own rows.

Nothing here is boilerplate: every sentence states a setting the run recorded (modes, timing
method, stopping rule, cache variant, input sets, gate tolerances), so a reader can check how
the numbers were measured without reading the code.
"""

from __future__ import annotations

import pandas as pd

ENV_FIELDS = [
    ("device", "Device"),
    ("gpu_name", "GPU"),
    ("gpu_uuid", "GPU UUID"),
    ("driver", "Driver"),
    ("cuda_version", "CUDA"),
    ("torch_version", "torch"),
    ("cublas_version", "cuBLAS"),
    ("cublaslt_version", "cuBLASLt"),
    ("nvmath_version", "nvmath-python"),
    ("hgemm_bench_version", "hgemm-bench"),
    ("hostname", "Host"),
]


def _values(s: pd.Series) -> str:
    vals = [str(v) for v in pd.unique(s.dropna()) if str(v) != ""]
    return ", ".join(sorted(vals)) if vals else "not recorded"


def _range(s: pd.Series, unit: str = "") -> str:
    """'v unit' or 'lo - hi unit' with 4 significant digits."""
    s = s.dropna()
    if s.empty:
        return "not recorded"
    lo, hi = f"{s.min():.4g}", f"{s.max():.4g}"
    text = lo if lo == hi else f"{lo} - {hi}"
    return f"{text} {unit}".strip()


def is_cpu(raw: pd.DataFrame) -> bool:
    return bool((raw["device"].fillna("") == "cpu").all())


def environment(raw: pd.DataFrame) -> list[tuple[str, str]]:
    """(name, value) pairs for the environment table of one run on one GPU."""
    out = [(name, _values(raw[col])) for col, name in ENV_FIELDS]
    out.append(("Measured", f"{raw['measured_at'].min()} to {raw['measured_at'].max()} (UTC)"))
    out.append(("SM clock (mean per row)", _range(raw["sm_clock_mhz_mean"], "MHz")))
    out.append(("Memory clock (mean per row)", _range(raw["mem_clock_mhz_mean"], "MHz")))
    out.append(("Power (mean per row)", _range(raw["power_w_mean"], "W")))
    out.append(("Temperature (max)", _range(raw["temp_c_max"], "°C")))
    thr = raw["throttled"].fillna(False).astype(bool)
    reasons = _values(raw.loc[thr, "throttle_reasons"]) if thr.any() else ""
    out.append(("Rows measured while throttled",
                f"{int(thr.sum())} of {len(raw)}" + (f" ({reasons})" if reasons else "")))
    return out


TIMING_METHODS = {
    "graph": "CUDA-graph replay of a batch of calls (batch GPU time / calls)",
    "graph+prime": "CUDA-graph replay of a batch of 20 or more calls after one eager call of the same method, "
                   "outside the timed span (batch GPU time / calls)",
    "spin-events": "CUDA events around a batch held behind a spin kernel until fully queued (batch GPU time / calls)",
    "events": "CUDA events around each call",
    "cupti": "the GPU's own timestamps on each call's kernels (CUPTI activity records: first start to last end)",
    "host-clock": "the host clock around each call (CPU path: no device timer)",
}


def _timing_phrase(s: pd.Series) -> str:
    c = s.dropna().value_counts()
    if c.empty:
        return "not recorded"
    return "; ".join(f"{TIMING_METHODS.get(k, k)} [{k}, {v} rows]" for k, v in c.items())


def _count_phrase(s: pd.Series) -> str:
    c = s.fillna("not recorded").value_counts()
    return ", ".join(f"{k} ({v} rows)" for k, v in c.items())


def methodology(raw: pd.DataFrame) -> list[str]:
    """Paragraphs describing how this run measured, from its recorded settings."""
    paras = []
    methods = sorted(raw["method"].unique())
    shapes = raw["shape"].nunique()
    layouts = ", ".join(sorted(raw["layout"].unique()))
    where = "on the CPU (device = cpu: these are CPU results, not GPU results)" if is_cpu(raw) else \
        f"on {_values(raw['gpu_name'])}"
    paras.append(
        f"{len(methods)} methods ({', '.join(methods)}) were run on {shapes} shapes in layouts {layouts} "
        f"{where}, dtype {_values(raw['dtype'])}. Every method went through the correctness gate "
        "on every shape before timing "
        f"(relative Frobenius error tolerance {_range(raw['gate_tol_rel_fro'])}, "
        f"max normalized error tolerance {_range(raw['gate_tol_max_norm'])}); "
        f"rows that failed it, did not run, or were faster than the physical floor are listed separately "
        "and never ranked."
    )
    ran = raw[~raw["status"].eq("unsupported").fillna(False)]  # unsupported rows measured nothing
    for mode, g in ran.groupby("mode"):
        if mode == "offline":
            s = ("Offline mode: calls run back to back; rounds interleave methods in a fresh random order. "
                 f"Device time per call was measured by {_timing_phrase(g['timing_method'])}. ")
        elif mode == "server":
            s = (f"Server mode: calls arrive as a Poisson process at {_range(g['qps'], 'calls/s')}, "
                 "so the device idles "
                 f"between calls as in a real service; device time per call by {_timing_phrase(g['timing_method'])}. ")
        else:
            s = f"Mode {mode}: device time by {_timing_phrase(g['timing_method'])}. "
        if g["ci_target"].notna().any():
            s += (f"Measurement stopped when the relative 95% CI half-width of each median fell under "
                  f"{_pct(g['ci_target'])}, or at the time budget or round cap; ")
        else:
            s += "Each row measured a fixed number of calls; "
        s += (f"stop reasons: {_count_phrase(g['stop_reason'])}. "
              f"Rounds per row: {_range(g['rounds'])}; calls measured per row: {_range(g['calls_measured'])}.")
        paras.append(s)
    for cache, g in ran.groupby("cache"):
        if cache == "cold":
            paras.append(f"Cold cache: inputs rotate through {_range(g['input_sets'], 'buffer sets')} "
                         "so the working set "
                         "is at least twice the L2 cache (or L2 is flushed between calls).")
        elif cache == "warm":
            paras.append(f"Warm cache: the same buffers every call ({_range(g['input_sets'], 'input set(s)')}).")
    paras.append(
        "Device time is GPU time per call. Host time is the wall clock of one synchronous call as a Python "
        "user sees it: launch overhead, synchronization and Python included (CUDA-L2's method, kept for "
        "comparability). The two are ranked separately. Speedups are ratios of medians paired within this "
        "run on this GPU, never across runs or machines; a method's score is the geometric mean over shapes, "
        "with a 95% bootstrap CI that resamples shapes."
    )
    return paras


def _pct(s: pd.Series) -> str:
    s = s.dropna()
    if s.empty:
        return "a target (not recorded)"
    vals = sorted({f"{v:.3g}%" if v > 1 else f"{v * 100:.3g}%" for v in s})
    return " / ".join(vals)
