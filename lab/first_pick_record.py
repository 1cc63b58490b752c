"""The first pick of record: the default rule's held-out ratios pooled from BENCHMARKS.md's tables.

Each held-out call's per-shape table in BENCHMARKS.md has one row per fresh shape and one column
per rule it measured, each cell the pick's speedup over cuBLASLt autotune in that call (best of
layouts). The figure of record pools the default's column of every such table from a section on,
each ratio as measured within its own call with the default as it stood then. A shape measured in
two tables would count twice, so that is an error, as is a table with no column named as the
default. The off-grid check's table (twenty-first session) heads its first column "off-grid shape":
it is no grid figure and is not read.

    python -m lab.first_pick_record BENCHMARKS.md --since "## 2026-12-02 (nineteenth session)"
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

# the default's column header, as each session's tables name it
DEFAULT_COLUMNS = ("paired/m10/n2/d/c/prior", "paired/m10/n2/d/prior", "paired/m10/n2/prior", "with the study (default)")  # newest default first
ROW = re.compile(r"\| (\d+_\d+_\d+) \|")


def default_ratios(text: str, since: str, columns=DEFAULT_COLUMNS) -> list[list[tuple[str, float]]]:
    """[(shape, ratio), ...] per per-shape table (a header starting ``| shape |``) from the line
    starting with ``since`` on, read from the first of ``columns`` the header has. A shape off the
    cuda-l2 grid in such a table is an error: the record is of grid shapes, and an off-grid table
    headed ``| shape |`` (twenty-fifth session's call 5, until the twenty-seventh) would be pooled
    into it unnoticed."""
    from harness.shapes import on_cuda_l2_grid

    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(since)), None)
    if start is None:
        raise ValueError(f"no line starts with {since!r}")
    tables, col = [], None
    for ln in lines[start:]:
        if ln.startswith("| shape |"):
            head = [c.strip() for c in ln.strip().strip("|").split("|")]
            col = next((head.index(c) for c in columns if c in head), None)
            if col is None:
                raise ValueError(f"a per-shape table without a default column ({', '.join(columns)}): {ln}")
            tables.append([])
        elif col is not None and (row := ROW.match(ln)):
            cell = [c.strip() for c in ln.strip().strip("|").split("|")][col]
            if not on_cuda_l2_grid(row.group(1)):
                raise ValueError(f"an off-grid shape in a grid table: {row.group(1)} (head its table '| off-grid shape |')")
            if cell.endswith("x"):  # a shape the call did not finish has "-"
                tables[-1].append((row.group(1), float(cell[:-1])))
        elif not ln.startswith("|"):
            col = None
    return tables


def pooled(tables: list[list[tuple[str, float]]], boot: int = 10000, seed: int = 0) -> tuple[int, float, float, float]:
    """(shapes, geomean, 95 % bootstrap low, high) over every table's rows; a shape twice is an error."""
    rows = [r for t in tables for r in t]
    shapes = [s for s, _ in rows]
    twice = sorted({s for s in shapes if shapes.count(s) > 1})
    if twice:
        raise ValueError(f"shapes in more than one table: {', '.join(twice)}")
    logs = np.log([v for _, v in rows])
    rng = np.random.default_rng(seed)
    means = np.exp(rng.choice(logs, (boot, len(logs))).mean(axis=1))
    return len(logs), float(np.exp(logs.mean())), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmarks", type=Path)
    ap.add_argument("--since", default="## 2026-12-02 (nineteenth session)",
                    help="the line (its start) from which tables count: the session the default took effect")
    a = ap.parse_args(argv)
    try:
        tables = default_ratios(a.benchmarks.read_text(), a.since)
        n, g, lo, hi = pooled(tables)
    except (OSError, ValueError) as e:
        print(f"{a.benchmarks}: {e}", file=sys.stderr)
        return 2
    for t in tables:
        print(f"table of {len(t)} shapes: {np.exp(np.mean(np.log([v for _, v in t]))):.3f}x")
    print(f"first pick of record: {g:.3f}x (95 % bootstrap {lo:.3f}-{hi:.3f}) over {n} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
