"""Write the cuda-l2 grid shapes this project has measured or looked at, one per line.

A search's held-out first pick is a test of generalization only on shapes nobody tuned for. Every
grid shape named in BENCHMARKS.md (each sweep, search, holdout and pick table reported there) is
one somebody looked at; ``hgemm-bench search --holdout-exclude`` keeps them out of the holdout.

    python -m lab.seen_shapes BENCHMARKS.md > lab/seen_shapes.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def seen_grid_shapes(texts: list[str]) -> list[str]:
    """Grid shapes (``M_N_K`` of the cuda-l2 set) named anywhere in ``texts``, sorted by size."""
    from harness.shapes import parse_shapes

    grid = {s.name: s for s in parse_shapes("cuda-l2")}
    named = {t for text in texts for t in re.findall(r"\b\d+_\d+_\d+\b", text)}
    return sorted((n for n in named if n in grid), key=lambda n: (grid[n].m * grid[n].n * grid[n].k, n))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    names = seen_grid_shapes([Path(p).read_text() for p in argv])
    print(f"# {len(names)} cuda-l2 grid shapes named in {', '.join(argv)} (lab/seen_shapes.py)")
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
