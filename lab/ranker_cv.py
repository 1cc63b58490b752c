"""K-fold cross-validation by shape of first-pick rules on the grid shapes of a prior, no GPU.

The grid shapes (cuda-l2) of the prior list on which two or more configs were measured, less the
search's own, are dealt into ``--folds`` folds (seeded shuffle). For each fold, the search's policy
learns every prior row but the fold's shapes' (``search.prior.with_prior``), and each rule ranks the
configs measured on each of the fold's shapes that its constraints admit (``prior_cv.pick``); what
the top-ranked config measured there (best of layouts, against cuBLASLt autotune in that call) is
the pick. This is how a fresh grid shape looks to the policy (every other grid shape known), except
that the candidates are the configs some earlier call measured on the shape, not every config with
evidence: it compares rules' orderings, and the registered GPU test measures the picks themselves.

    python -m lab.ranker_cv kernels_search/library/search-h200-g \\
        [--rules paired/m10/n2/d/c,ranked/m10/n2/d/c] [--folds 10]

Prints per rule the geomean pick, per class of shape, and the first rule against each other, paired
per shape with a seeded bootstrap interval.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np


def shape_class(name: str) -> str:
    """The classes BENCHMARKS reads the first pick's losses by: long M with narrow N, the transpose, the rest."""
    m, n, _ = (int(x) for x in name.split("_"))
    if m >= 2048 and n <= 256:
        return "M>=2048, N<=256"
    if m <= 256 and n >= 2048:
        return "M<=256, N>=2048"
    return "other"


def main(argv=None) -> int:
    from lab.first_picks import parse_rule, policy_for
    from lab.first_pick_record import pooled
    from lab.prior_cv import measured_speedups, pick, rankable

    from harness.shapes import on_cuda_l2_grid
    from harness.timing.stats import geomean
    from kernels_search.search.prior import prior_paths, with_prior

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a search's --out folder (its DB is replayed; its shapes are not scored)")
    ap.add_argument("--prior", type=Path, default=Path("kernels_search/search/prior_h200.txt"))
    ap.add_argument("--rules", default="paired/m10/n2/d/c,ranked/m10/n2/d/c")
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rules = [(s, parse_rule(s)) for s in (r.strip() for r in a.rules.split(",")) if s]
    if len(rules) < 1 or a.folds < 2:
        ap.error("at least one rule and two folds")
    base, db = policy_for(a.folder)
    paths = prior_paths([a.prior])
    measured = rankable(measured_speedups(paths))
    searched = set(db.df["shape"]) if not db.df.empty else set()
    shapes = sorted(s for s in measured if s not in searched and on_cuda_l2_grid(s))
    random.Random(a.seed).shuffle(shapes)
    folds = [shapes[i::a.folds] for i in range(a.folds)]
    got: dict[str, dict[str, tuple[float, float]]] = {s: {} for s, _ in rules}
    for i, fold in enumerate(folds):
        pol, _ = with_prior(base, paths, exclude_shapes=fold)
        for spec, rule in rules:
            for nm in fold:
                res = pick(pol, nm, measured[nm], rule)
                if res is not None:
                    got[spec][nm] = res
        print(f"fold {i + 1}/{a.folds}: {len(fold)} shapes", file=sys.stderr, flush=True)
    common = sorted(set.intersection(*(set(g) for g in got.values())))
    classes = sorted({shape_class(s) for s in common})
    print(f"{len(common)} grid shapes ranked by every rule ({a.folds} folds, seed {a.seed}); geomean over cuBLASLt autotune")
    print("| rule | all | " + " | ".join(f"{c} ({sum(shape_class(s) == c for s in common)})" for c in classes) + " |")
    print("|---|---|" + "---|" * len(classes))
    first = rules[0][0]
    for spec, _ in rules + [("best candidate", None)]:
        col = {s: (got[first][s][1] if spec == "best candidate" else got[spec][s][0]) for s in common}
        print(f"| {spec} | {geomean(list(col.values())):.4f}x | "
              + " | ".join(f"{geomean([v for s, v in col.items() if shape_class(s) == c]):.4f}x" for c in classes) + " |")
    for spec, _ in rules[1:]:
        ratios = [(s, got[spec][s][0] / got[first][s][0]) for s in common]
        _, g, lo, hi = pooled([ratios])
        logs = [float(np.log(r)) for _, r in ratios]
        print(f"{spec} over {first}: paired {g:.4f}x ({lo:.4f}-{hi:.4f}), better on {sum(x > 0 for x in logs)}, "
              f"worse on {sum(x < 0 for x in logs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
