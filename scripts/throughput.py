"""Harness throughput from a (possibly interrupted) compare run: seconds per shape, extrapolated.

    python3 scripts/throughput.py RESULTS.parquet WALL_SECONDS [TOTAL_SHAPES=1000]
"""

import sys

from harness.results import read_results

path, wall = sys.argv[1], float(sys.argv[2])
total = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
df = read_results(path).to_pandas()
shapes = df["shape"].nunique()
ok = df[df["status"] == "ok"]
setup = df.groupby(["shape", "method", "layout"])["setup_s"].first().sum()
print(f"shapes finished: {shapes}; rows ok: {len(ok)}/{len(df)}; status: {df['status'].value_counts().to_dict()}")
print(f"wall {wall:.0f} s (incl. process start) -> {wall / max(shapes, 1):.2f} s/shape; "
      f"x{total} shapes: {wall / max(shapes, 1) * total / 60:.1f} min; prepare/autotune seconds in total: {setup:.0f}")
auto = df[df["method"] == "cublaslt-autotune"]
if len(auto):
    import json

    info = auto["info"].map(lambda s: json.loads(s or "{}"))
    cand = info.map(lambda d: d.get("candidates"))
    print(f"cublaslt-autotune candidates per problem: min {cand.min()} median {cand.median()} max {cand.max()}; "
          f"setup_s median {auto['setup_s'].median():.2f} max {auto['setup_s'].max():.2f}")
