"""What a study's ``compare --plan`` measured, per shape and pooled: every ratio is cuBLASLt autotune's
time over a config's, both in their faster layout, from the same run (rows whose status is ok:
measured and correct).

With the plan: its first config per shape (the rank-1 pick the plan was made from) and the best of the
shape's planned configs. With ``--new FILE`` (specs, one per line), or ``--new-knob KNOB=VALUE`` (every
planned config with that knob value, e.g. a variant study's ``l2_promo=256``): the best of those
against the best of the shape's other configs, and which new config won. Geomeans carry a 95 % bootstrap interval over
shapes, as first_pick_record.py computes it.

    python -m lab.study_table RESULTS.parquet --plan PLAN [--new SPECS | --new-knob KNOB=VALUE] [--per-shape]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


BASELINE = "cublaslt-autotune"


def ratios(df) -> dict[str, dict[str, float]]:
    """{shape: {method: baseline us / method us}}, each at its faster layout (first_picks.best_of_layouts,
    as its speedups take them), for the shapes where the baseline has a correct row."""
    from lab.first_picks import best_of_layouts

    best = best_of_layouts(df)
    out: dict[str, dict[str, float]] = {}
    for shape, per in best.groupby(level=0):
        per = per.droplevel(0)
        if BASELINE in per.index:
            out[shape] = {m: per[BASELINE] / us for m, us in per.items() if m != BASELINE}
    return out


def read_specs(path: Path) -> list[str]:
    """The specs of a specs file (one a line, ``#`` lines are comments), canonical
    (``registry.resolve``: an unknown family or knob raises), in file order."""
    from harness.registry import resolve

    return [m.name for m in resolve([ln.strip() for ln in path.read_text().splitlines()
                                     if ln.strip() and not ln.startswith("#")])]


def with_knob(planned: dict[str, list[str]], knob_value: str) -> set[str]:
    """The planned configs (canonical names) whose knobs include ``knob_value`` (``KNOB=VALUE``)."""
    return {n for names in planned.values() for n in names if knob_value in n.partition(":")[2].split(",")}


def geo(values) -> str:
    """Geomean with its 95 % bootstrap interval over shapes (first_pick_record.pooled, seeded)."""
    from lab.first_pick_record import pooled

    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return "-"
    n, g, lo, hi = pooled([[(str(i), v) for i, v in enumerate(vals)]])
    return f"{g:.3f}x ({lo:.3f}-{hi:.3f}) over {n}"


def summarize(df, planned: dict[str, list[str]], new: set[str] | None = None, per_shape: bool = False) -> list[str]:
    """The report's lines from one run's rows and its plan ({shape: method names in plan order});
    a config with no correct row on a shape is left out of that shape's best, not counted as 0."""
    nan = float("nan")
    r = ratios(df)
    rows = []
    for shape, names in planned.items():
        got = r.get(shape)
        if got is None:
            continue
        mine = [n for n in names if n in got]
        best_new = max(((got[n], n) for n in mine if new and n in new), default=(nan, ""))
        rows.append((shape, got.get(names[0], nan), max((got[n] for n in mine), default=nan),
                     best_new[0], max((got[n] for n in mine if not (new and n in new)), default=nan), best_new[1]))
    lines = [f"{len(rows)} of {len(planned)} planned shapes measured with {BASELINE}",
             f"- rank-1 (first planned config): {geo(x[1] for x in rows)}",
             f"- best planned config: {geo(x[2] for x in rows)}"]
    if new:
        both = [x for x in rows if math.isfinite(x[3]) and math.isfinite(x[4])]
        lines += [f"- best new config: {geo(x[3] for x in both)}",
                  f"- best other config: {geo(x[4] for x in both)}",
                  f"- best new over best other, per shape: {geo(x[3] / x[4] for x in both)}; "
                  f"new faster on {sum(x[3] > x[4] for x in both)} of {len(both)}"]
    if per_shape:
        lines += ["", "| shape | rank-1 | best | best new | best other | best new config |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {s} | {f:.3f} | {b:.3f} | {n:.3f} | {o:.3f} | {name} |"
                  for s, f, b, n, o, name in sorted(rows, key=lambda x: x[2])]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--plan", required=True, help="the compare --plan file the run measured")
    ap.add_argument("--new", help="a file of specs to set apart from the rest")
    ap.add_argument("--new-knob", metavar="KNOB=VALUE", help="set apart every planned config with this knob value")
    ap.add_argument("--per-shape", action="store_true")
    a = ap.parse_args(argv)
    if a.new and a.new_knob:
        ap.error("--new and --new-knob: give one")
    from harness.cli import _split_methods
    from harness.plan import read_plan
    from harness.registry import resolve
    from harness.results import read_results

    planned = {s.name: [m.name for m in resolve(_split_methods([t]))] for s, t in read_plan(Path(a.plan))}
    new = set(read_specs(Path(a.new))) if a.new else None
    if a.new_knob:
        new = with_knob(planned, a.new_knob)
    print("\n".join(summarize(read_results(a.results).to_pandas(), planned, new, a.per_shape)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
