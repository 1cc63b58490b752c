"""A per-shape measurement plan for ``compare --plan``: which methods to measure on which shape.

A held-out check of first picks needs each shape's own picks and the reference, not every pick on
every shape: the cross product of 20-25 picks over 40 shapes measures some twenty times what the
check needs, and does not fit a 10-minute GPU session. A plan names the methods per shape; the
runner measures only those on that shape (``CompareSettings.only``), still in shared interleaved
rounds, so every ratio stays one between methods timed together.

File format, one shape a line, ``#`` comments and blank lines ignored::

    512_1024_4096  splitk_tma_swap:tile_m=64,tile_n=128,slices=-1,hopper:tile_m=64,tile_n=64
    64_64_12288    cublaslt

The second field is a method list as ``--methods`` takes it (commas; a family spec's ``k=v``
pieces stay with it). Methods given with ``--methods`` as well are measured on every shape.
"""

from __future__ import annotations

from pathlib import Path

from harness.problem import Shape
from harness.shapes import ShapeError, parse_shape


class PlanError(ValueError):
    """A plan file could not be read or understood; the message names the file and line."""


def read_plan(path: Path) -> list[tuple[Shape, str]]:
    """[(shape, its method list as written)] in file order; PlanError for a missing or empty file,
    a line without a method list, a malformed shape or a shape given twice."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PlanError(f"plan {path}: {e.strerror or e}") from None
    out: list[tuple[Shape, str]] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise PlanError(f"plan {path}, line {i}: expected 'M_N_K METHOD[,METHOD...]', got {line!r}")
        try:
            shape = parse_shape(parts[0])
        except ShapeError as e:
            raise PlanError(f"plan {path}, line {i}: {e}") from None
        if shape.name in seen:
            raise PlanError(f"plan {path}, line {i}: shape {shape.name} is already planned on line {seen[shape.name]}")
        seen[shape.name] = i
        out.append((shape, parts[1].strip()))
    if not out:
        raise PlanError(f"plan {path} names no shapes")
    return out
