"""How soon `tune`'s order reaches a shape's best config, left out shape by shape (CPU, no GPU).

For a seeded sample of the packaged evidence's shapes on which many pool configs were measured,
each shape is ranked as `tune` would rank a shape never measured (`tune.rank_pool` on a learner
whose evidence lacks that shape's rows, so the ranker is refitted without them and nothing is
lifted by a measurement on the shape). The shape's own measurements (speedup over the strongest
baseline, best layout) then score each order: the best config among the first n positions of the
order, as a share of the best of every pool config measured there. Configs the evidence never
measured on the shape keep their place (they would cost a slot of the budget) and score nothing;
where none of the first n was measured there, the order scores the shape's worst measured config.

Orders compared:
- ``tune``: what `tune.rank_pool` returns (the evidence rule's admitted configs by score, then the
  rest of the pool with evidence elsewhere by score, then configs without evidence; the first config
  of a family no evidence holds moved to slot ``NEW_FAMILY_SLOT``).
- ``merged``: the admitted and the other evidenced configs in one list by score (same slot rule).

    python -m lab.tune.order_cv [--shapes 40] [--min-measured 30] [--seed 1]
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import sys

import numpy as np

NS = (1, 4, 8, 16, 32)


def merged(ranked):
    """``ranked`` (tune's order) with its admitted and other evidenced configs merged by score; the
    configs without evidence and the moved new-family configs keep their places."""
    fixed = {i for i, t in enumerate(ranked) if t.new_family or not t.evidence.get("shapes")}
    movable = sorted((t for i, t in enumerate(ranked) if i not in fixed), key=lambda t: -t.score)
    it = iter(movable)
    return [ranked[i] if i in fixed else next(it) for i in range(len(ranked))]


def main(argv=None) -> int:
    from harness.shapes import parse_shape
    from harness.timing.stats import geomean
    from kernels_search.search import picks, pool
    from kernels_search.search.first_pick import FirstPick
    from kernels_search.search.settings import TuneSettings
    from kernels_search.search.tune import rank_pool

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", type=int, default=40, help="shapes sampled (seeded)")
    ap.add_argument("--min-measured", type=int, default=30, help="pool configs measured on a shape to be sampled")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)

    st = TuneSettings()
    specs = pool.specs(st.pool, families=picks.search_families(st.device, st.plugins))
    picker, _, gpu, what = picks.picker_for([], st.first_pick, st.ranker, st.device, st.plugins, keep_own=True)
    lr = picker.learner
    in_pool = set(specs)
    by_shape: dict[str, dict[str, float]] = {}
    for spec, d in lr.measured_on.items():
        if spec in in_pool:
            for nm, r in d.items():
                by_shape.setdefault(nm, {})[spec] = r
    eligible = sorted(nm for nm, d in by_shape.items() if len(d) >= a.min_measured)
    sample = sorted(random.Random(a.seed).sample(eligible, min(a.shapes, len(eligible))))
    print(f"{gpu}: {len(specs)} pool configs, {what}; {len(eligible)} shapes with >= {a.min_measured} pool configs "
          f"measured, {len(sample)} sampled (seed {a.seed})")
    orders = ("tune", "merged")
    share: dict[str, dict[int, list[float]]] = {o: {n: [] for n in NS} for o in orders}
    first_near: dict[str, list[int]] = {o: [] for o in orders}
    for j, nm in enumerate(sample):
        shape = parse_shape(nm)
        held = copy.copy(lr)  # the evidence without this shape's rows: the ranker refits without them
        held.measured_on = {s: {k: v for k, v in d.items() if k != nm} for s, d in lr.measured_on.items()}
        held.revision = (getattr(lr, "revision", 0), "without", nm)
        ranked = rank_pool(FirstPick(held, picker.settings), shape, specs, None)
        own = by_shape[nm]
        best = max(own.values())
        line = [nm, f"{len(ranked)} ranked, {len(own)} measured, best {math.exp(best):.3f}x"]
        for o, order in (("tune", ranked), ("merged", merged(ranked))):
            got = [own.get(t.spec) for t in order]
            for n in NS:
                vals = [g for g in got[:n] if g is not None]
                share[o][n].append(math.exp((max(vals) if vals else min(own.values())) - best))
            near = next(i + 1 for i, g in enumerate(got) if g is not None and g >= best - math.log(1.02))
            first_near[o].append(near)
            line.append(f"{o}: within 2 % at #{near}")
        print(f"[{j + 1}/{len(sample)}] " + "; ".join(line), flush=True)
    print()
    print("| order | " + " | ".join(f"first {n}" for n in NS) + " | median position within 2 % of the best |")
    print("|---|" + "---|" * (len(NS) + 1))
    for o in orders:
        print(f"| {o} | " + " | ".join(f"{geomean(share[o][n]):.4f}" for n in NS)
              + f" | {float(np.median(first_near[o])):.0f} |")
    print("(share of the best measured config reached in the first n positions, geomean over shapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
