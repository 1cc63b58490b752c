"""Write a compare plan of `splitk_dsmem` configs whose tile spans the small side of a skinny deep-K shape.

Why: 35 of the 60 K >= 2048 class shapes have one side of 64-256 and the other >= 1024 (deepk-60-seed3301.txt); on
the H200 the best baseline reads them at 0.59-0.93 of the HBM floor (run 88), so they are bandwidth problems. The
presets measured so far tile the small side in 64s (bm 64), so the large operand is read from L2 once per 64 rows
of the small side and a CTA streams at most 24 KB a stage. Here the small side fits one tile (bn = the small side,
swapped when it is M) and the large side gets 128 or 256 rows a CTA: the large operand leaves L2 once, and a stage
carries 24-40 KB.

    python3 -m lab.fewtile.skinny_plan lab/fewtile/deepk-60-seed3301.txt > lab/fewtile/skinny-plan.txt
"""

from __future__ import annotations

import sys

REFERENCE = ("splitk_dsmem:mma_pipe=1:stages=8:sum=1", "splitk_dsmem:bn=128:mma_pipe=1:stages=6:sum=1")


def configs(m: int, n: int) -> list[str]:
    """The wide configs for one shape: bn the small side (64 or 128), the large side 64-256 rows a CTA."""
    small, swap = (m, 1) if m < n else (n, 0)
    base = f"splitk_dsmem:swap={swap}:mma_pipe=1:sum=1"
    if small <= 64:
        return [f"{base}:bm=128:bn=64:stages=6", f"{base}:bm=256:bn=64:stages=4"] + (
            [f"{base}:bm=64:bn=64:stages=8"] if swap else [])
    # 128 (and 256: two tiles along it)
    return [f"{base}:bm=128:bn=128:stages=4"] + ([f"{base}:bm=64:bn=128:stages=6"] if swap else [])


def skinny(shape: str) -> bool:
    m, n, _ = map(int, shape.split("_"))
    return min(m, n) <= 256 and max(m, n) >= 1024


def main(argv: list[str]) -> None:
    shapes = [s for f in argv for line in open(f) if not line.startswith("#")
              for s in line.replace(",", " ").split()]
    for s in shapes:
        if skinny(s):
            m, n, _ = map(int, s.split("_"))
            print(s, ",".join(list(REFERENCE) + configs(m, n)))


if __name__ == "__main__":
    main(sys.argv[1:])
