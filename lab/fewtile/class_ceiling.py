"""The few-tile classes' room under three bounds at once, from `fetch-floor-h200.txt` (lab/fewtile/fetch_floor.py).

Why: the fetch floor alone (operands onto the SMs, from the H200 fetch probe) leaves 1.52x (K >= 2048) and 1.81x
(K < 2048) over the best baseline, but it counts no MMA and no sum of the slices. Two more bounds were measured:
- the tensor rate: cuBLAS holds 750 TFLOP/s on 4096^3 on the H200 (183 us), and on the compute-sized class shapes
  it and a CUTLASS kernel both keep the tensor pipe 84 % active (Nsight Compute, `cluster22-h100.md`): FLOPs / 750
  TFLOP/s is a floor no kernel of the families beats;
- the split sum: every in-launch form measured (semaphore fix-up, atomics, the cluster's DSMEM sum) costs 0.66-1.4 us
  after the last k step (`sum-h100.md`, `triton-atomic.md`, `fetch-probe-cluster-h200.txt`); a shape's floor is then
  the lesser of its split floor (slices <= 8) plus 0.7 us and its unsplit floor (`fetch-floor-unsplit-h200.txt`,
  `fetch_floor.py --max-slices 1`).
The geomean of best baseline / max(fetch floor, FLOP floor) (+ the sum) is what an ideal kernel of this design could
reach; the issue's bars (1.25x, 1.20x) are set against it.

    python3 -m lab.fewtile.class_ceiling [SPLIT_FLOORS UNSPLIT_FLOORS]
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from harness.timing.stats import geomean

TENSOR_TFLOPS = 750.0
SUM_US = 0.7
BARS = {"K >= 2048": 1.25, "K < 2048": 1.20}


def floors(path: str) -> dict[str, tuple[str, float, float, int]]:
    """{shape: (class, best baseline us, fetch floor us, slices of the floor's tiling)} of a fetch_floor.py table."""
    out = {}
    for line in Path(path).read_text().splitlines():
        r = line.split()
        if r and re.fullmatch(r"\d+_\d+_\d+", r[0]):
            out[r[0]] = (" ".join(r[1:4]), float(r[4]), float(r[5]), int(r[6].split("x")[2]))
    return out


def main(split_path: str, unsplit_path: str) -> None:
    split, unsplit = floors(split_path), floors(unsplit_path)
    by_class: dict[str, list[tuple[float, float, float]]] = {}
    for shape, (cls, base, fetch, slices) in split.items():
        m, n, k = map(int, shape.split("_"))
        flop = 2 * m * n * k / (TENSOR_TFLOPS * 1e6)
        summed = max(fetch, flop) + (SUM_US if slices > 1 else 0.0)
        whole = max(unsplit[shape][2], flop) if shape in unsplit else math.inf
        by_class.setdefault(cls, []).append((base, max(fetch, flop), min(summed, whole)))
    for cls, rows in by_class.items():
        fetch_only = geomean([b / f for b, f, _ in rows])
        with_sum = geomean([b / f for b, _, f in rows])
        bar = BARS.get(cls)
        share = f"; the bar {bar:.2f}x is {math.log(bar) / math.log(with_sum):.0%} of that room (log scale)" if bar else ""
        print(f"{cls}: {len(rows)} shapes, room over the best baseline: fetch and FLOP floors {fetch_only:.3f}x, "
              f"with the sum {with_sum:.3f}x{share}")


if __name__ == "__main__":
    here = Path(__file__).parent
    args = sys.argv[1:] or [str(here / "fetch-floor-h200.txt"), str(here / "fetch-floor-unsplit-h200.txt")]
    main(*args)
