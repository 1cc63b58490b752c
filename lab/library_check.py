"""The exported search library against cuBLASLt autotune, per shape, from one compare run.

Reads a results Parquet of ``compare --methods library:path=LIB.json,...,cublaslt-autotune`` and
prints a markdown table, one line per (shape, mode, cache): the baseline's best-of-layouts
device time, the library's best-of-layouts device time, the speedup (baseline / library, both
best of layouts, ``reports.derive`` rules: only clean rows, gate passed, not below the floor),
its 95% bootstrap CI over paired rounds where raw samples exist (``harness.summary``), and
which rule of the dispatcher served the library's best row (the row's info: ``library_match``
exact / nearest / other-gpu / fallback, ``library_kind`` kernel / baseline, ``library_spec``).
Then the geomean speedup, the minimum, how many shapes are below 0.98x, and how many were
served by a searched kernel vs a fallback (a baseline entry of the library or torch.matmul).
Last, the verdict on the issue's two targets (geomean >= ``--target``, none below ``--slow``),
decided on the unrounded figures: a geomean of 1.04953 prints as 1.050x at three digits and
misses 1.05x (the H200 library compare of 2026-12-01 did exactly that), so the geomean is
printed to four digits and the verdict says which way it went. A shape without a clean library
row misses both targets.

    python -m lab.library_check RESULTS.parquet [--baseline cublaslt-autotune] [--library METHOD]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from harness.results import read_results, read_samples
from harness.summary import compute_speedups
from reports.derive import BEST, PAIR_KEY, with_best_of_layouts
from reports.stats import geomean

SLOW = 0.98  # a shape below this speedup is counted as slower than the baseline
TARGET = 1.05  # the geomean target over cuBLASLt autotune


def library_methods(df: pd.DataFrame) -> list[str]:
    """The ``library`` / ``library:...`` method names in a results table."""
    return sorted(m for m in df["method"].dropna().unique() if m == "library" or m.startswith("library:"))


def served_by(info: str | None) -> tuple[str, str, str]:
    """(rule, searched|fallback, spec) from a library row's info JSON."""
    d = json.loads(info or "{}")
    match = d.get("library_match") or "?"
    spec = d.get("library_spec") or ""
    if match == "fallback":
        return f"fallback {d.get('fallback', 'torch')}", "fallback", spec
    if d.get("library_kind") == "baseline" or "fallback" in d:
        return f"{match} fallback={d.get('fallback', spec)}", "fallback", spec
    where = f" ({d['library_shape']})" if match != "exact" and d.get("library_shape") else ""
    return f"{match} kernel{where}", "searched", spec


def library_table(df: pd.DataFrame, samples: pd.DataFrame | None = None, baseline: str = "cublaslt-autotune",
                  library: str | None = None) -> pd.DataFrame:
    """One row per (run, GPU, shape, mode, cache) that has a library row: base_us, lib_us (best of
    layouts), speedup, ci_lo/ci_hi (NaN without samples), layout (the library's best), rule,
    served (searched | fallback), spec; failed library rows get NaN times and their status."""
    libs = library_methods(df)
    if library is None:
        if len(libs) != 1:
            raise ValueError(f"expected one library method in the results, found {libs or 'none'}: use --library")
        library = libs[0]
    df = df.copy()
    df[PAIR_KEY] = df[PAIR_KEY].fillna("")  # CPU rows have no gpu_uuid: keys stay comparable
    best = with_best_of_layouts(df, "device")
    best = best[best["layout"] == BEST]
    base = {tuple(r[PAIR_KEY]): float(r["device_us_median"]) for _, r in best[best["method"] == baseline].iterrows()}
    mine = {tuple(r[PAIR_KEY]): r for _, r in best[best["method"] == library].iterrows()}
    ci = {}
    if samples is not None and len(samples):
        for r in compute_speedups(df[df["method"].isin([baseline, library])], samples, baseline):
            if r.method == library and r.speedup is not None:
                ci[(r.shape, r.mode, r.cache, r.layout)] = (r.speedup.lo, r.speedup.hi)
    out = []
    for key, grp in df[df["method"] == library].groupby(PAIR_KEY, sort=False):
        key = tuple(key)
        row = dict(zip(PAIR_KEY, key))
        b_us = base.get(key, math.nan)
        row.update(m=int(grp["m"].iloc[0]), n=int(grp["n"].iloc[0]), k=int(grp["k"].iloc[0]), base_us=b_us)
        r = mine.get(key)
        if r is not None:
            rule, served, spec = served_by(r["info"])
            lo, hi = ci.get((row["shape"], row["mode"], row["cache"], r["best_of"]), (math.nan, math.nan))
            row.update(lib_us=float(r["device_us_median"]), layout=r["best_of"], rule=rule, served=served, spec=spec,
                       speedup=b_us / float(r["device_us_median"]), ci_lo=lo, ci_hi=hi, status="ok")
        else:  # no clean library row in any layout
            bad = grp.iloc[0]
            row.update(lib_us=math.nan, layout="-", rule="-", served="", spec="", speedup=math.nan, ci_lo=math.nan,
                       ci_hi=math.nan, status=f"{bad['status']}: {(bad['status_reason'] or '')[:80]}")
        out.append(row)
    cols = PAIR_KEY + ["m", "n", "k", "base_us", "lib_us", "speedup", "ci_lo", "ci_hi", "layout", "rule", "served",
                       "spec", "status"]
    return pd.DataFrame(out, columns=cols).sort_values(["m", "n", "k", "mode", "cache"], kind="stable",
                                                       ignore_index=True)


def summarize(table: pd.DataFrame, slow: float = SLOW) -> dict:
    """Geomean and minimum speedup over shapes with both times, shapes below ``slow``, served counts."""
    sp = table["speedup"].dropna()
    return dict(shapes=len(table), scored=len(sp), geomean=geomean(sp) if len(sp) else math.nan,
                min=float(sp.min()) if len(sp) else math.nan, below=int((sp < slow).sum()),
                searched=int((table["served"] == "searched").sum()), fallback=int((table["served"] == "fallback").sum()),
                failed=int((table["status"] != "ok").sum()))


def _f(x: float, fmt: str = "{:.2f}") -> str:
    return "-" if x is None or x != x else fmt.format(x)


def render(table: pd.DataFrame, summ: dict, baseline: str, library: str, slow: float = SLOW,
           target: float = TARGET) -> str:
    modes = table[["mode", "cache"]].drop_duplicates()
    tag = len(modes) > 1
    lines = [f"library: `{library}` vs `{baseline}` (device time, best of layouts)", "",
             f"| M_N_K{' | mode/cache' if tag else ''} | {baseline} us | library us | speedup | 95% CI | "
             "library layout | served by | kernel |",
             f"|---{'|---' if tag else ''}|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        ci = f"[{r.ci_lo:.3f}, {r.ci_hi:.3f}]" if r.ci_lo == r.ci_lo else "-"
        served = r.rule if r.status == "ok" else r.status
        lines.append(f"| {r.shape}{f' | {r.mode}/{r.cache}' if tag else ''} | {_f(r.base_us)} | {_f(r.lib_us)} | "
                     f"{_f(r.speedup, '{:.3f}x')} | {ci} | {r.layout} | {served} | {r.spec or '-'} |")
    lines += ["", f"geomean speedup {_f(summ['geomean'], '{:.4f}x')} over {summ['scored']} of {summ['shapes']} "
                  f"shapes; min {_f(summ['min'], '{:.3f}x')}; {summ['below']} below {slow:.2f}x; served by searched "
                  f"kernels: {summ['searched']}, by a fallback: {summ['fallback']}"
                  + (f"; {summ['failed']} without a clean library row" if summ["failed"] else ""),
              verdict(summ, target, slow)]
    return "\n".join(lines)


def verdict(summ: dict, target: float = TARGET, slow: float = SLOW) -> str:
    """Both targets, met or missed, on the unrounded geomean and minimum."""
    if summ["failed"]:
        geo = low = "missed (shapes without a row)"
    else:
        geo = "met" if summ["geomean"] >= target else f"missed ({summ['geomean']:.5f}x)"
        low = "met" if not summ["below"] else f"missed ({summ['below']} below, min {summ['min']:.3f}x)"
    return f"targets: geomean >= {target:.2f}x {geo}; none below {slow:.2f}x {low}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--baseline", default="cublaslt-autotune")
    ap.add_argument("--library", default=None, help="the library method's name (default: the only one in the file)")
    ap.add_argument("--slow", type=float, default=SLOW, help="count shapes below this speedup (default 0.98)")
    ap.add_argument("--target", type=float, default=TARGET, help="the geomean target (default 1.05)")
    ap.add_argument("--versus", default=None, help="another library method in the file: both geomeans with 95 %% "
                    "bootstrap intervals and --library's paired ratio over it, on the shapes both served")
    args = ap.parse_args(argv)
    df = read_results(args.results).to_pandas()
    samples = read_samples(args.results).to_pandas()
    try:
        table = library_table(df, samples, args.baseline, args.library)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    library = args.library or library_methods(df)[0]
    print(render(table, summarize(table, args.slow), args.baseline, library, args.slow, args.target))
    if args.versus:
        try:
            other = library_table(df, samples, args.baseline, args.versus)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print("\n".join(["", f"`{library}` against `{args.versus}` (over {args.baseline}, best of layouts):",
                          *paired_lines(table, other, library, args.versus)]))
    return 0


def paired_lines(table: pd.DataFrame, other: pd.DataFrame, name: str, other_name: str) -> list[str]:
    """Both methods' geomean speedups with 95 % bootstrap intervals over the shapes both served
    cleanly, and the paired ratio of the first over the second (``first_picks.report_lines``: the
    same seeded bootstrap as the first-pick reports)."""
    from lab.first_picks import report_lines

    key = ["shape", "mode", "cache"]
    both = table.merge(other, on=key, suffixes=("", "_o")).dropna(subset=["speedup", "speedup_o"])
    if both.empty:
        return ["no shape served cleanly by both"]
    sp = {name: dict(zip(both["shape"], both["speedup"])), other_name: dict(zip(both["shape"], both["speedup_o"]))}
    return report_lines(sp)


if __name__ == "__main__":
    sys.exit(main())
