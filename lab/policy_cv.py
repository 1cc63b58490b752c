"""Leave-one-shape-out check of the held-out first pick's rules, on a recorded kernel DB (no GPU).

For each searched shape S: a Learner replays every other shape's candidate rows, then ranks the
configs the first pick could choose that were also measured on S (``FirstPick.candidates``:
measured correctly on >= ``min_shapes`` other shapes, and near it with ``min_near``), by each
rule's ``FirstPick.values``; what the top
config measured on S (best of layouts) is that rule's pick. Reported per rule, as geomeans over
shapes of the speedup over the strongest baseline of the same call (a failed row counts as
exp(-1) = 0.37x, its reward):

- ``top1``: the rule's pick; ``oracle``: the best of the ranked configs; ``random``: a uniformly
  random one of them (expected value); ``spearman``: rank correlation of values and rewards.

Rules: every registered one (``kernels_search.search.first_pick.RULES``, with the lab's from
``lab.first_pick_rules``), under the evidence settings ``--settings`` gives (default: evidence on 2
shapes, no other constraint).

    python -m lab.policy_cv results/search-h200-c/db [--search-id search-h200-c]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd

from dataclasses import replace

from harness.shapes import parse_shape
from kernels_search.families import ALL
from kernels_search.search.first_pick import RULES, FirstPick
from kernels_search.search.learner import Learner
from kernels_search.search.settings import FirstPickSettings
from lab import first_pick_rules  # noqa: F401  (registers the lab's rules)

EVIDENCE = FirstPickSettings(rule="paired", min_shapes=2, min_near=0, decline_one_slice=False,
                             decline_partial_cluster=False)


def cross_validate(df: pd.DataFrame, search_id: str | None = None, layouts=("nn", "tn"), families=None,
                   settings: FirstPickSettings = EVIDENCE) -> pd.DataFrame:
    """One row per (shape, rule): top1, oracle, random speedups and the Spearman correlation.
    ``families``: name -> Family (default: every built-in family; nothing is compiled here)."""
    df = df[~df["is_baseline"].astype(bool) & (df["origin"] != "policy:first-pick")]
    if search_id is not None:
        df = df[df["search_id"] == search_id]
    families = families or dict(ALL)
    df = df[df["family"].isin(list(families))]
    ok = df[(df["status"] == "ok") & df["reward"].notna()]
    best = ok.groupby(["shape", "method"])["reward"].max()  # a config's value on a shape: best layout
    rows = []
    for shape_name in sorted(ok["shape"].unique()):
        train = df[df["shape"] != shape_name]
        pol = Learner(families, layouts)
        pol.sync(SimpleNamespace(df=train))
        shape = parse_shape(shape_name)
        here = best.loc[shape_name]
        # DB methods as the policy names them today (rows from before a family gained a knob)
        named = {m: c for m in here.index if (c := pol.candidate_for(m)) is not None}
        # the configs the first pick would choose among (its evidence filter), as DB method names
        keep = {c.spec for c in FirstPick(pol, settings).candidates(shape, sorted({c.spec for c in named.values()}))}
        specs = [m for m, c in named.items() if c.spec in keep]
        if len(specs) < 2:
            continue
        cands = [named[m] for m in specs]
        r = here[specs].to_numpy(float)
        for rule in RULES:
            v = FirstPick(pol, replace(settings, rule=rule)).values(shape, cands)
            rho = pd.Series(v).rank().corr(pd.Series(r).rank())
            rows.append(dict(shape=shape_name, rule=rule, n=len(specs), top1=math.exp(r[int(np.argmax(v))]),
                             oracle=math.exp(r.max()), mean=float(np.exp(r).mean()),
                             spearman=None if math.isnan(rho) else rho))
    return pd.DataFrame(rows)


def summarize(cv: pd.DataFrame) -> pd.DataFrame:
    g = lambda x: float(np.exp(np.log(x).mean()))  # noqa: E731
    return cv.groupby("rule").agg(shapes=("shape", "size"), configs=("n", "mean"), top1=("top1", g),
                                  oracle=("oracle", g), random=("mean", g), spearman=("spearman", "mean")).round(3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", help="kernel DB folder (a search's OUT/db)")
    ap.add_argument("--search-id", default=None)
    ap.add_argument("--settings", default="{}", help='FirstPickSettings fields as JSON, e.g. \'{"min_shapes": 10}\'')
    args = ap.parse_args(argv)
    from kernels_search.search.db import KernelDB

    cv = cross_validate(KernelDB(args.db).df, args.search_id, settings=replace(EVIDENCE, **json.loads(args.settings)))
    if cv.empty:
        print("no shape with two or more rankable configs")
        return 1
    print(summarize(cv).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
