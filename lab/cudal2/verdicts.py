"""The verdict on each per-shape external kernel of a compare run, on its own shape (the ``cudal2``
stage of scripts/gpu_check.sh: CUDA-L2's H100 kernels through ``--kernels-dir``).

    python3 -m lab.cudal2.verdicts RESULTS.parquet --plan PLAN [--claims CLAIMS.csv]

PLAN is the compare's ``--plan`` file (``M_N_K ext:<stem>`` lines): which kernel was to be judged
on which shape. A kernel the run never reached (a time limit) is listed as ``not measured``, never
dropped. For each kernel and layout (offline, warm rows):

* status: ok, gate_failed (the correctness gate or an anti-cheat check failed), error (prepare,
  build, a crash or a timeout), unsupported;
* the check that failed and by how much: the gate's error against its tolerance (or what it saw:
  writes outside C, NaN left, cached results), or each failed anti-cheat check with its figures
  (``info.anticheat``); for a kernel that passed, whether the precision check could decide at this K;
* the kernel's device time, the best baseline's (the fastest of torch, cublas, cublaslt,
  cublaslt-autotune that passed, same shape and layout, timed in the same rounds), and the speedup
  (baseline time / kernel time, >1: the kernel is faster) with its paired bootstrap 95% CI from the
  run's samples.

A per-kernel line follows with the best layout against the best baseline of either layout (what
CUDA-L2's "max" columns compare), beside their H100 claim (``--claims``: their offline result rows;
the claim against the best of their four baselines is the smallest of their four "-max" speedups).
Full reasons of every row that is not ok close the output.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.results import rankable, read_results, read_samples
from harness.timing.stats import paired_speedup

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")
CLAIM_COLUMNS = ("torch.matmul", "cuBLAS-max", "cuBLASLt-heuristic-max", "cuBLASLt-auto-tuning-max")
LAYOUTS = ("nn", "tn")


def read_plan(path: Path) -> list[tuple[str, str]]:
    """[(shape, kernel method)] from ``M_N_K METHOD[,METHOD...]`` lines (non-baseline methods only)."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        shape, methods = line.split(None, 1)
        out += [(shape, m.strip()) for m in methods.split(",") if m.strip() and m.strip() not in BASELINES]
    return out


def _g(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.3g}"


def _times(x: float, tol: float) -> str:
    return f" = {x / tol:.3g}x tol" if tol and math.isfinite(x) and math.isfinite(tol) and tol > 0 else ""


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _check_figures(check: str, figs: dict) -> str:
    """One failed anti-cheat check's figures, the ones that say by how much."""
    if check == "precision":
        err, tol = _num(figs.get("rel_fro_err")), _num(figs.get("tol_rel_fro"))
        s = f"rel err {_g(err)} vs tol {_g(tol)}{_times(err, tol)} at K={figs.get('k')}"
        if "probe" in figs:
            p = figs["probe"]
            perr, ptol = _num(p.get("rel_fro_err")), _num(p.get("tol_rel_fro"))
            s += f"; probe {p.get('shape')}: {_g(perr)} vs {_g(ptol)}{_times(perr, ptol)}"
        return s
    if check == "skipped_work":
        same, rot = _num(figs.get("same_inputs_us")), _num(figs.get("distinct_inputs_us"))
        s = f"same inputs {_g(same)} us vs distinct {_g(rot)} us per call"
        if "same_inputs_flushed_us" in figs:
            s += (f" (L2 flushed: {_g(_num(figs['same_inputs_flushed_us']))} vs "
                  f"{_g(_num(figs.get('distinct_inputs_flushed_us')))} us)")
        return s
    if check == "side_stream":
        return f"events {_g(_num(figs.get('event_ms')))} ms vs wall {_g(_num(figs.get('wall_ms')))} ms for {figs.get('calls')} calls"
    if check == "timed_path_output":
        return f"{figs.get('nan')} NaN, rel err {_g(_num(figs.get('rel_fro_err')))} after a graph replay"
    nums = {k: v for k, v in figs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ", ".join(f"{k} {_g(float(v))}" for k, v in nums.items())


_GATE_CHECKS = (  # (what the gate's reason says, the check's name)
    ("wrote outside C", "gate: writes outside C"),
    ("modified its inputs", "gate: modified A or B"),
    ("unwritten (NaN)", "gate: output left unwritten"),
    ("cached results", "gate: cached results"),
    ("wrong values", "gate: wrong values"),
    ("raised ", "gate: raised"),
)


def failed_check(row: pd.Series) -> tuple[str, str]:
    """(the check that failed, by how much) for a row that is not ok; for an ok row ('', a note on
    the precision check when it could not decide at this K)."""
    status = row.get("status")
    reason = str(row.get("status_reason") or "")
    info = json.loads(row.get("info") or "{}")
    cheat = info.get("anticheat", {})
    if status == "ok":
        prec = cheat.get("precision", {})
        if prec.get("skipped"):  # its own shape's K cannot tell fp16 from fp32 accumulation, and it serves no other
            return "", (f"precision undecided at K={prec.get('k', row.get('k'))}: rel err "
                        f"{_g(_num(prec.get('rel_fro_err')))}, tol {_g(_num(prec.get('tol_rel_fro')))}, fp16 "
                        f"accumulation would err {_g(_num(prec.get('fp16_acc_expected')))}")
        return "", ""
    if status == "gate_failed" and reason.startswith("anti-cheat:"):
        names = [part.split(":", 1)[0].strip() for part in reason[len("anti-cheat:"):].split("; ")]
        names = [n for n in names if n in cheat] or names[:1]
        return ("anti-cheat: " + ", ".join(names),
                "; ".join(f"{n}: {_check_figures(n, cheat.get(n, {}))}" for n in names))
    if status == "gate_failed":
        check = next((name for needle, name in _GATE_CHECKS if needle in reason), "gate")
        err, tol = _num(row.get("gate_rel_fro_err")), _num(row.get("gate_tol_rel_fro"))
        mx, mtol = _num(row.get("gate_max_norm_err")), _num(row.get("gate_tol_max_norm"))
        if check == "gate: wrong values":
            return check, (f"rel err {_g(err)} vs tol {_g(tol)}{_times(err, tol)}; max norm err {_g(mx)} "
                           f"vs tol {_g(mtol)}{_times(mx, mtol)}")
        m = re.search(r"left (\d+) of (\d+)", reason)
        return check, (f"{m.group(1)} of {m.group(2)} elements" if m else reason.splitlines()[0][:120])
    first = reason.splitlines()[0] if reason else ""
    stage = re.search(r"\b(prepare|gate|anti-?cheat|timing)\b", first)
    return f"{status}: {stage.group(1)}" if stage else str(status), first[:160]


@dataclass
class Verdict:
    kernel: str
    shape: str
    layout: str
    status: str
    check: str
    how_much: str
    kernel_us: float
    baseline: str
    baseline_us: float
    speedup: float  # baseline us / kernel us
    lo: float
    hi: float
    reason: str


def _samples(samples: pd.DataFrame, shape: str, layout: str, method: str):
    s = samples[(samples["shape"] == shape) & (samples["layout"] == layout) & (samples["method"] == method)]
    return s.sort_values("round")["value"].to_numpy()


def verdicts(df: pd.DataFrame, samples: pd.DataFrame, plan: list[tuple[str, str]]) -> list[Verdict]:
    """One verdict per planned (kernel, shape) and layout the run measured (or one ``not measured``)."""
    df = df[(df["mode"] == "offline") & (df["cache"] == "warm")]
    if len(samples):
        samples = samples[(samples["mode"] == "offline") & (samples["cache"] == "warm")
                          & (samples["metric"] == "device_us")]
    ok = rankable(df, "device_us_median")
    out: list[Verdict] = []
    for shape, kernel in plan:
        rows = df[(df["shape"] == shape) & (df["method"] == kernel)]
        if rows.empty:
            out.append(Verdict(kernel, shape, "-", "not measured", "", "the run ended before this shape", math.nan,
                               "", math.nan, math.nan, math.nan, math.nan, ""))
            continue
        for layout in LAYOUTS:
            r = rows[rows["layout"] == layout]
            if r.empty:
                continue
            r = r.iloc[0]
            check, how = failed_check(r)
            base = df[(df["shape"] == shape) & (df["layout"] == layout) & df["method"].isin(BASELINES) & ok]
            v = Verdict(kernel, shape, layout, str(r["status"]), check, how, _num(r.get("device_us_median")),
                        "", math.nan, math.nan, math.nan, math.nan, str(r.get("status_reason") or ""))
            if not base.empty:
                b = base.loc[base["device_us_median"].idxmin()]
                v.baseline, v.baseline_us = b["method"], float(b["device_us_median"])
                if ok.loc[r.name]:
                    bs, ks = _samples(samples, shape, layout, b["method"]), _samples(samples, shape, layout, kernel)
                    if len(bs) and len(ks):
                        sp = paired_speedup(bs, ks)
                        v.speedup, v.lo, v.hi = sp.ratio, sp.lo, sp.hi
                    else:  # no samples beside the file: the ratio of the medians, without a CI
                        v.speedup = v.baseline_us / v.kernel_us
            out.append(v)
    return out


def best_of_layouts(df: pd.DataFrame, vs: list[Verdict]) -> dict[str, tuple[float, str, str, float]]:
    """Per kernel: (speedup, its layout, best baseline [layout], baseline us) of its fastest passing
    layout against the fastest passing baseline of either layout (CUDA-L2's "max" comparison)."""
    df = df[(df["mode"] == "offline") & (df["cache"] == "warm")]
    ok = rankable(df, "device_us_median")
    out = {}
    for kernel in dict.fromkeys(v.kernel for v in vs):
        mine = [v for v in vs if v.kernel == kernel and v.status == "ok" and math.isfinite(v.kernel_us)]
        if not mine:
            continue
        best = min(mine, key=lambda v: v.kernel_us)
        base = df[(df["shape"] == best.shape) & df["method"].isin(BASELINES) & ok]
        if base.empty:
            continue
        b = base.loc[base["device_us_median"].idxmin()]
        out[kernel] = (float(b["device_us_median"]) / best.kernel_us, best.layout, f"{b['method']} {b['layout']}",
                       float(b["device_us_median"]))
    return out


def claims_by_shape(path: Path | None) -> dict[str, tuple[float, float]]:
    """shape -> (their claim vs the best of their four baselines, vs cuBLASLt auto-tuning), from
    their offline result rows."""
    if path is None:
        return {}
    c = pd.read_csv(path)
    cols = [col for col in CLAIM_COLUMNS if col in c.columns]
    return {r["mnk"]: (min(float(r[col]) for col in cols) if cols else math.nan,
                       float(r.get("cuBLASLt-auto-tuning-max", math.nan)))
            for _, r in c.iterrows()}


def _baseline_warnings(df: pd.DataFrame, vs: list[Verdict]) -> list[str]:
    """A line per baseline that did not pass on some judged shape (a missing baseline makes the best
    baseline a weaker one: the speedups above are then against fewer baselines than the four)."""
    shapes = {v.shape for v in vs}
    rows = df[(df["mode"] == "offline") & (df["cache"] == "warm") & df["shape"].isin(shapes)
              & df["method"].isin(BASELINES)]
    bad = rows[~rankable(rows, "device_us_median")]
    out = []
    for method, g in bad.groupby("method", sort=True):
        why = str(g["status_reason"].dropna().iloc[0] if g["status_reason"].notna().any() else g["status"].iloc[0])
        out.append(f"warning: baseline {method} did not pass on {g['shape'].nunique()} of {len(shapes)} shapes "
                   f"({len(g)} rows; {why.splitlines()[0][:160] if why else 'no reason'})")
    missing = [b for b in BASELINES if b not in set(rows["method"])]
    if missing:
        out.append(f"warning: baselines not in the run: {', '.join(missing)}")
    return [""] + out if out else []


def _sp(v: Verdict) -> str:
    if not math.isfinite(v.speedup):
        return "-"
    ci = f" [{v.lo:.3f}, {v.hi:.3f}]" if math.isfinite(v.lo) and math.isfinite(v.hi) else ""
    return f"{v.speedup:.3f}{ci}"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def render(df: pd.DataFrame, vs: list[Verdict], claims: dict[str, tuple[float, float]]) -> str:
    run = ", ".join(sorted(map(str, df["run_id"].dropna().unique()))) if "run_id" in df else "?"
    gpu = ", ".join(sorted(map(str, df["gpu_name"].dropna().unique()))) if "gpu_name" in df else "?"
    lines = [f"## Verdicts: each kernel on its own shape ({gpu}, run {run}, offline, warm)", "",
             "speedup = best baseline's device time / the kernel's, same shape and layout, paired rounds "
             "(>1: the kernel is faster); [95% CI] from the run's samples", "",
             "| kernel | shape | layout | status | failed check | by how much | kernel us | best baseline | "
             "baseline us | speedup [95% CI] |",
             "|---|---|---|---|---|---|---:|---|---:|---|"]
    for v in vs:
        lines.append(f"| {v.kernel} | {v.shape} | {v.layout} | {v.status} | {_cell(v.check)} | {_cell(v.how_much)} | "
                     f"{_g(v.kernel_us)} | {v.baseline or '-'} | {_g(v.baseline_us)} | {_sp(v)} |")
    best = best_of_layouts(df, vs)
    lines += ["", "| kernel | shape | verdict | best layout vs best baseline (either layout) | "
              "H100 claim vs best of 4 (vs cuBLASLt autotune) |", "|---|---|---|---|---|"]
    for kernel, shape in dict.fromkeys((v.kernel, v.shape) for v in vs):
        mine = [v for v in vs if v.kernel == kernel]
        statuses = sorted({v.status for v in mine})
        verdict = (statuses[0] if len(statuses) == 1 and statuses[0] in ("ok", "not measured")
                   else " / ".join(f"{v.layout}: {v.status}" for v in mine))
        b = best.get(kernel)
        mine_best = f"{b[0]:.3f}x ({b[1]}; vs {b[2]} {b[3]:.3g} us)" if b else "-"
        c = claims.get(shape)
        claim = f"{c[0]:.3f}x ({c[1]:.3f}x)" if c else "-"
        lines.append(f"| {kernel} | {shape} | {verdict} | {mine_best} | {claim} |")
    lines += _baseline_warnings(df, vs)
    counts = Counter(v.status for v in vs)
    order = ["ok", "gate_failed", "error", "unsupported", "not measured"]
    lines += ["", "rows: " + ", ".join(f"{counts[s]} {s}" for s in sorted(counts, key=lambda s: (s not in order,
                                                                                          order.index(s) if s in order else 0, s)))]
    bad = [v for v in vs if v.status not in ("ok", "not measured") and v.reason]
    if bad:
        lines += ["", "### Reasons", ""]
        lines += [f"- {v.kernel} {v.layout}: {_cell(v.reason)}" for v in bad]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--plan", type=Path, required=True, help="the compare's --plan file")
    ap.add_argument("--claims", type=Path, help="their offline result rows (lab/cudal2/prepare.py's claims.csv)")
    args = ap.parse_args(argv)
    if not args.results.exists():
        print(f"no results at {args.results}: the compare finished no shape")
        for shape, kernel in read_plan(args.plan):
            print(f"| {kernel} | {shape} | not measured |")
        return 1
    df = read_results(args.results).to_pandas()
    samples = read_samples(args.results).to_pandas()
    print(render(df, verdicts(df, samples, read_plan(args.plan)), claims_by_shape(args.claims)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
