"""Leave-one-shape-out check of how well a scorer ranks kernels on a shape it has not seen,
on a recorded kernel DB (no GPU needed).

For each searched shape S: fit the scorer on every other shape's candidate rows, rank the
candidates that were measured on S (each (config, layout) row), and read what the top-ranked
one actually measured. Reported per scorer, as geomeans over shapes of the speedup over the
strongest baseline of the same call (a failed row counts as exp(-1) = 0.37x, its reward):

- ``top1``: the top-ranked measured row (a proxy for the policy's first pick, which picks from
  a larger pool that was mostly never measured);
- ``oracle``: the best measured row; ``mean``: a uniformly random measured row (expected value);
- ``spearman``: the rank correlation between scores and rewards, mean over shapes.

Scorers: ``policy`` (the search's Policy, replaying the other shapes' rows), ``knn`` (a config's
reward on the nearest shapes that measured it, else its family's mean reward there).

    python3 scripts/policy_cv.py results/search-h200/db [--search-id search-h200]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd

from harness.shapes import parse_shape
from kernels_search.search.features import shape_distance
from kernels_search.search.policy import Candidate, Policy, default_families


def policy_scores(train: pd.DataFrame, test: pd.DataFrame, families, layouts) -> np.ndarray:
    pol = Policy(families, layouts, seed=0)
    pol.sync(SimpleNamespace(df=train))
    shape = parse_shape(test["shape"].iloc[0])
    cands = [Candidate(r.family, families[r.family].complete(json.loads(r.knobs or "{}")), r.method)
             for r in test.itertuples(index=False)]
    mean, _ = pol.predict(shape, cands)  # (rows, layouts): each row is scored in its own layout
    return mean[np.arange(len(cands)), [pol.layouts.index(lay) for lay in test["layout"]]]


def knn_scores(train: pd.DataFrame, test: pd.DataFrame, k: int = 4) -> np.ndarray:
    shape = parse_shape(test["shape"].iloc[0])
    dist = {s: shape_distance(shape, parse_shape(s)) for s in train["shape"].unique()}
    near = sorted(dist, key=dist.get)[:k]
    out = []
    for r in test.itertuples(index=False):
        same = train[(train["method"] == r.method) & (train["layout"] == r.layout)]
        if not same.empty:
            d = same["shape"].map(dist)
            w = 1.0 / (1.0 + d)
            out.append(float((same["reward"] * w).sum() / w.sum()))
            continue
        fam = train[(train["family"] == r.family) & train["shape"].isin(near)]
        out.append(float(fam["reward"].mean()) if not fam.empty else -1.0)
    return np.array(out)


def cross_validate(df: pd.DataFrame, search_id: str | None = None, layouts=("nn", "tn"),
                   families=None) -> pd.DataFrame:
    """One row per (shape, scorer): top1, oracle, mean speedups and the Spearman correlation.
    ``families``: name -> Family the policy knows (default: the CUDA search families)."""
    df = df[(df["kind"] == "candidate") & df["reward"].notna() & (df["origin"] != "policy:first-pick")]
    if search_id is not None:
        df = df[df["search_id"] == search_id]
    families = families or default_families("cuda")
    df = df[df["family"].isin(list(families))]
    rows = []
    for shape in sorted(df["shape"].unique()):
        test, train = df[df["shape"] == shape], df[df["shape"] != shape]
        if len(test) < 2 or train.empty:
            continue
        r = test["reward"].to_numpy(float)
        for name, fn in (("policy", lambda: policy_scores(train, test, families, layouts)),
                         ("knn", lambda: knn_scores(train, test))):
            s = fn()
            rho = pd.Series(s).rank().corr(pd.Series(r).rank())
            rows.append(dict(shape=shape, scorer=name, n=len(test), top1=math.exp(r[int(np.argmax(s))]),
                             oracle=math.exp(r.max()), mean=float(np.exp(r).mean()),
                             spearman=None if math.isnan(rho) else rho))
    return pd.DataFrame(rows)


def summarize(cv: pd.DataFrame) -> pd.DataFrame:
    g = lambda x: float(np.exp(np.log(x).mean()))  # noqa: E731
    return cv.groupby("scorer").agg(shapes=("shape", "size"), top1=("top1", g), oracle=("oracle", g),
                                    random=("mean", g), spearman=("spearman", "mean")).round(3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", help="kernel DB folder (a search's OUT/db)")
    ap.add_argument("--search-id", default=None)
    args = ap.parse_args(argv)
    from kernels_search.search.db import KernelDB

    cv = cross_validate(KernelDB(args.db).df, args.search_id)
    if cv.empty:
        print("no shape with two or more measured candidates")
        return 1
    print(summarize(cv).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
