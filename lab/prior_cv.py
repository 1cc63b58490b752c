"""Leave-one-draw-out check of the prior (kernels_search/search/prior.py) on the held-out Parquets, no GPU.

The files of a prior list (default ``kernels_search/search/prior_h200.txt``) fall into draws:
files that share a shape are one draw. A file whose every shape an earlier file has (seed 10's
preset sweep, a study on shapes seen before: ``remeasurements``) joins no draw. For each draw D,
two policies rank the configs measured on each of D's shapes in D's own call and in those later
calls: the search's policy (its DB replayed) and the same policy after folding in every other
draw and the later calls' rows of other shapes. What the top-ranked
config measured there (best of layouts, against cuBLASLt autotune in that call) is the pick.
Both policies rank only configs with >= N other measured shapes (``RULE/mN``) and the same
candidate sets, except that the prior can give a config that evidence.

This ranks configs that earlier calls measured, which is not the choice a fresh shape offers
(every config with the evidence): it says whether the prior helps, not by how much on a fresh
draw. That test is a registered call (BENCHMARKS.md).

    python -m lab.prior_cv kernels_search/library/search-h200-g [--rules cautious/m10,model/m10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def draws_of(paths: list[Path]) -> list[list[Path]]:
    """Files grouped so that files sharing a shape are one draw (in list order)."""
    from kernels_search.search.prior import prior_shapes

    groups: list[tuple[set, list[Path]]] = []
    for p in paths:
        shapes = prior_shapes([p])
        hit = [g for g in groups if g[0] & shapes]
        merged = (set(shapes), [])
        for g in hit:
            merged[0].update(g[0])
            merged[1].extend(g[1])
            groups.remove(g)
        merged[1].append(p)
        groups.append(merged)
    return [files for _, files in groups]


def remeasurements(paths: list[Path]) -> list[Path]:
    """The files every shape of which an earlier file of the list already has: a later call measuring
    other configs on shapes seen before (seed 10's presets, the mid-tile deep-K study). They do not
    join draws (one such study would merge most draws into one); each left-out draw takes their rows
    of its own shapes as measured configs, and its policy learns their other rows."""
    from kernels_search.search.prior import prior_shapes

    out, seen = [], set()
    for p in paths:
        shapes = prior_shapes([p])
        if shapes and shapes <= seen:
            out.append(p)
        seen |= shapes
    return out


def measured_speedups(paths: list[Path], reference: str = "cublaslt-autotune"):
    """{shape: {method: reference's best-of-layouts time / the method's}} over the files' correct
    offline rows (each file against its own reference rows)."""
    from kernels_search.search.prior import read_prior

    out: dict[str, dict[str, float]] = {}
    for p in paths:
        df = read_prior(p)
        if "mode" in df.columns:
            df = df[df["mode"] == "offline"]
        ok = df[(df["status"] == "ok") & df["device_us_median"].notna()]
        best = ok.groupby(["shape", "method"])["device_us_median"].min()
        baselines = set(ok[ok["is_baseline"]]["method"])
        for shape in ok["shape"].unique():
            ref = best.get((shape, reference))
            if ref is None:
                continue
            for method, us in best[shape].items():
                if method not in baselines:
                    out.setdefault(shape, {})[method] = ref / us
    return out


def rankable(measured: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The shapes on which more than one config was measured. A held-out check that measured each
    shape's own pick only (``compare --plan``, twentieth session) leaves one config a shape: any
    rule "picks" it, so scoring it would only add that check's level to every rule's figure. Such a
    file still teaches the other draws' policies through the prior."""
    return {s: m for s, m in measured.items() if len(m) > 1}


def pick(pol, shape_name: str, measured: dict[str, float], rule) -> tuple[float, float] | None:
    """(the rule's pick's speedup, the best candidate's) among the measured configs with the
    evidence ``rule`` (``first_picks.RuleSpec``: ``RULE/mN/nK``) asks for."""
    from harness.shapes import parse_shape

    fp = rule.picker(pol)
    shape = parse_shape(shape_name)
    canonical = {c.spec: sp for c, sp in ((pol.candidate_for(m), sp) for m, sp in measured.items()) if c is not None}
    cands = [(c, canonical[c.spec]) for c in fp.candidates(shape, canonical)]
    if not cands:
        return None
    values = fp.values(shape, [c for c, _ in cands])
    return cands[int(np.argmax(values))][1], max(sp for _, sp in cands)


def main(argv=None) -> int:
    from lab.first_picks import parse_rule, policy_for

    from kernels_search.search.prior import prior_paths, prior_shapes, with_prior

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a search's --out folder (its DB is replayed)")
    ap.add_argument("--prior", type=Path, default=Path("kernels_search/search/prior_h200.txt"))
    ap.add_argument("--rules", default="cautious/m10,cautious,model/m10")
    a = ap.parse_args(argv)
    specs = [r.strip() for r in a.rules.split(",") if r.strip()]
    rules = [(s, parse_rule(s)) for s in specs]
    base, _ = policy_for(a.folder)
    paths = prior_paths([a.prior])
    extra = remeasurements(paths)
    draws = draws_of([p for p in paths if p not in extra])
    print("| draw | policy | " + " | ".join(s for s, _ in rules) + " | best ranked |")
    print("|---|---|" + "---|" * (len(rules) + 1))
    totals: dict[tuple, list] = {}
    for files in draws:
        shapes = prior_shapes(files)
        others = [p for d in draws if d is not files for p in d] + extra
        folded, _ = with_prior(base, others, exclude_shapes=shapes)  # no row of the draw's shapes
        measured = rankable({s: m for s, m in measured_speedups(files + extra).items() if s in shapes})
        label = "+".join(p.parent.name for p in files)
        if not measured:
            print(f"| {label} | - | one config measured per shape: nothing to rank |", flush=True)
            continue
        for name, pol in (("search", base), ("search+prior", folded)):
            cells, best = [], []
            for spec, r in rules:
                got = [pick(pol, s, m, r) for s, m in measured.items()]
                got = [g for g in got if g is not None]
                totals.setdefault((name, spec), []).extend(g[0] for g in got)
                cells.append(f"{np.exp(np.mean(np.log([g[0] for g in got]))):.3f}x ({len(got)})" if got else "-")
                best.append(np.exp(np.mean(np.log([g[1] for g in got]))) if got else float("nan"))
            print(f"| {label} | {name} | " + " | ".join(cells) + f" | {best[0]:.3f}x |", flush=True)
    for name in ("search", "search+prior"):
        print(f"| all | {name} | " + " | ".join(
            f"{np.exp(np.mean(np.log(totals[(name, s)]))):.3f}x ({len(totals[(name, s)])})" for s, _ in rules) + " | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
