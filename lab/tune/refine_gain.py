"""What tune's refine phase found: per shape, the best paired speedup among the ranked candidates and
among the runtime-option neighbours measured after them, from one tune's kernel DB (both measured in
the same tune, each paired with its own call's fastest baseline).

    python -m lab.tune.refine_gain TUNE_OUT/db
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

from kernels_search.search.db import KernelDB
from kernels_search.search.library import paired_speedups
from kernels_search.search.tune import ORIGIN, REFINE_ORIGIN


def gains(db: KernelDB) -> pd.DataFrame:
    origin = db.df.drop_duplicates("method").set_index("method")["origin"].to_dict()
    rows = {}
    for (_, shape, _, spec), sp in paired_speedups(db).items():
        r = rows.setdefault(shape, {"shape": shape, "ranked": float("nan"), "refine": float("nan"), "refine_best": ""})
        col = {ORIGIN: "ranked", REFINE_ORIGIN: "refine"}.get(origin.get(spec))
        if col and not sp <= r[col]:
            r[col] = sp
            if col == "refine":
                r["refine_best"] = spec
    t = pd.DataFrame(rows.values())
    t["gain"] = t[["ranked", "refine"]].max(axis=1) / t["ranked"]
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    x = ap.parse_args()
    t = gains(KernelDB(x.db))
    pd.set_option("display.width", 240)
    pd.set_option("display.max_colwidth", 100)
    print(t.round(3).to_string(index=False))
    g = t["gain"].dropna()
    print(f"{len(t)} shapes: the best of ranked + refine over the best ranked, geomean "
          f"{math.exp(sum(math.log(v) for v in g) / len(g)):.4f}x; refine found the best on {(t['refine'] > t['ranked']).sum()}")


if __name__ == "__main__":
    main()
