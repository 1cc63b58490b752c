"""The fetch floor of each few-tile shape: the least time a kernel could take just to bring its operands onto
the SMs, from the fetch probe's measured table (lab/fewtile/fetch_probe.py: G CTAs each copying X KB of an
L2-resident buffer into shared memory), against the best baseline of a run on the same shapes.

For every tiling (tile bm x bn in 16..256, S slices of K, at most one CTA a SM and S <= --max-slices) a CTA
fetches (bm + bn) x K / S x 2 bytes; the floor is the probe's time for that many CTAs and kilobytes (linear
between measured points), at least the physical floor (bytes / 4.8 TB/s, FLOPs / 989 TFLOP/s, 1 us), and the
least over tilings. It ignores the MMAs and the reduction of the slices (with S <= 8 the slices of a tile fit
one cluster and can be summed on chip), so it bounds the room from above: best baseline / floor.

    python3 -m lab.fewtile.fetch_floor RUN.parquet [--probe lab/fewtile/fetch-probe-h200.csv] [--max-slices 8]
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

from harness.problem import Problem, Shape
from harness.results import read_results
from harness.summary import rankable

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")
TILES = (16, 32, 64, 128, 256)


def probe_table(path: str) -> dict[int, list[tuple[float, float]]]:
    """{CTAs: [(KB, us), ...]} of the cp.async fetch, the empty kernel as 0 KB."""
    p = pd.read_csv(path)
    empty = p[p.kind == "empty"].set_index("ctas").us
    return {c: sorted([(0.0, float(empty[c]))] + list(zip(g.kb.astype(float), g.us)))
            for c, g in p[p.kind == "cpasync"].groupby("ctas")}


def fetch_us(tab, ctas: int, kb: float) -> float:
    c = min((x for x in tab if x >= ctas), default=max(tab))
    pts = tab[c]
    for (k0, u0), (k1, u1) in zip(pts, pts[1:]):
        if kb <= k1:
            return u0 + (u1 - u0) * (kb - k0) / (k1 - k0)
    (k0, u0), (k1, u1) = pts[-2], pts[-1]
    return u1 + (u1 - u0) * (kb - k1) / (k1 - k0)


def floor(tab, m: int, n: int, k: int, max_slices: int, sms: int = 132):
    best = None
    for bm in TILES:
        for bn in TILES:
            tiles = math.ceil(m / bm) * math.ceil(n / bn)
            if tiles > sms:
                continue
            for s in range(1, min(max_slices, sms // tiles) + 1):
                kb = (min(bm, m) + min(bn, n)) * math.ceil(k / s) * 2 / 1024
                t = fetch_us(tab, tiles * s, kb)
                if best is None or t < best[0]:
                    best = (t, f"{bm}x{bn}x{s}", kb)
    phys = Problem(Shape(m, n, k), "tn").floor_us("NVIDIA H200")
    return max(best[0], phys), best[1], best[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--probe", default="lab/fewtile/fetch-probe-h200.csv")
    ap.add_argument("--max-slices", type=int, default=8)
    args = ap.parse_args()
    tab = probe_table(args.probe)
    df = pd.concat([read_results(p).to_pandas() for p in args.results], ignore_index=True)
    df = df[(df["mode"] == "offline") & (df["cache"] == "warm")]
    ok = df[rankable(df)]
    rows = []
    for shape, g in ok.groupby("shape"):
        m, n, k = map(int, shape.split("_"))
        base = g[g.method.isin(BASELINES)].device_us_median.min()
        us, tiling, kb = floor(tab, m, n, k, args.max_slices)
        rows.append(dict(shape=shape, cls="K >= 2048" if k >= 2048 else "K < 2048", base_us=base, floor_us=us,
                         tiling=tiling, kb_a_cta=round(kb), room=base / us))
    t = pd.DataFrame(rows).sort_values(["cls", "room"])
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    print(t.round(2).to_string(index=False))
    for cls, g in t.groupby("cls"):
        print(f"{cls}: {len(g)} shapes, best baseline / fetch floor (slices <= {args.max_slices}) geomean "
              f"{math.exp(g.room.map(math.log).mean()):.3f}x (min {g.room.min():.2f}, max {g.room.max():.2f})")


if __name__ == "__main__":
    main()
