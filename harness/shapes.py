"""Shape sets: parse ``--shapes`` into a list of Shapes.

Accepted forms, comma/space separated and mixable:

* ``M_N_K`` (also ``MxNxK``), any integers >= 1;
* a named set: ``cuda-l2`` (CUDA-L2's 1,000 shapes), ``smoke`` (a dozen diverse shapes),
  ``smoke-cpu`` (the same kinds of shape, sized for a CPU), ``square`` (powers of two 64..16384);
* a file path: one ``M_N_K`` per line (``#`` comments allowed) or a CSV with columns m,n,k;
* ``model:CONFIG[@batch=1,16,128][@tp=2]``: the GEMMs of a transformer's linear layers at those
  token counts, from its transformers config (``harness.model_shapes``).

Any malformed entry is a ``ShapeError`` that names the entry and what is wrong with it.
``resolve_shapes`` also says where each shape came from (model and layer) in a side table keyed
by shape name; ``Shape`` itself stays (m, n, k).
"""

from __future__ import annotations

import csv
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.model_shapes import PREFIX as MODEL_PREFIX
from harness.model_shapes import ModelShapeError, ShapeOrigin, model_shapes, model_token_at
from harness.problem import Shape

CUDA_L2_VALUES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)

# Diverse on purpose: tiny (launch-bound), skinny, few-tile large-K (split-K territory),
# tall-thin with tiny K, mid, square, large. Figures for most are in REFERENCES.md.
SMOKE = (
    (64, 64, 64),
    (256, 256, 256),
    (1024, 1024, 1024),
    (64, 4096, 4096),
    (64, 1024, 16384),
    (256, 128, 16384),
    (512, 64, 4096),
    (12288, 1024, 64),
    (512, 8192, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
)


# The same kinds of shape at most ~3e8 multiply-adds each: fp16 matmul on a CPU runs at about
# 1 GFLOP/s (measured on a 2-core CI-class machine: 4096^3 took 531 s), so smoke itself would take
# hours there; this set takes a minute or two with the default budget.
SMOKE_CPU = (
    (64, 64, 64),
    (256, 256, 256),
    (512, 512, 512),
    (64, 1024, 1024),
    (32, 256, 4096),
    (1024, 256, 64),
    (128, 1024, 512),
    (127, 255, 511),
)

# What ``compare`` measures when no --shapes are given, by device.
DEFAULT_SETS = {"cuda": "smoke", "cpu": "smoke-cpu"}


def default_set(device: str) -> str:
    """The named shape set sized for ``device`` ("cuda" or "cpu")."""
    return DEFAULT_SETS[device]


def _named_sets() -> dict[str, list[Shape]]:
    return {
        "cuda-l2": [Shape(m, n, k) for m, n, k in itertools.product(CUDA_L2_VALUES, repeat=3)],
        "smoke": [Shape(*s) for s in SMOKE],
        "smoke-cpu": [Shape(*s) for s in SMOKE_CPU],
        "square": [Shape(v, v, v) for v in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)],
    }


NAMED_SETS = tuple(_named_sets())


def on_cuda_l2_grid(shape: Shape | str) -> bool:
    """Whether every side of ``shape`` (a Shape or an ``M_N_K`` name) is one of ``CUDA_L2_VALUES``."""
    s = parse_shape(shape) if isinstance(shape, str) else shape
    return all(v in CUDA_L2_VALUES for v in (s.m, s.n, s.k))


class ShapeError(ValueError):
    """A --shapes entry could not be understood."""


_SHAPE_RE = re.compile(r"^\s*(-?\d+)\s*[_xX]\s*(-?\d+)\s*[_xX]\s*(-?\d+)\s*$")


def parse_shape(text: str) -> Shape:
    """Parse one ``M_N_K`` string."""
    m = _SHAPE_RE.match(text)
    if not m:
        raise ShapeError(f"malformed shape {text!r}: expected M_N_K with three positive integers, e.g. 4096_4096_4096")
    dims = [int(g) for g in m.groups()]
    bad = [f"{n}={v}" for n, v in zip("MNK", dims) if v < 1]
    if bad:
        raise ShapeError(f"malformed shape {text!r}: every dimension must be >= 1 ({', '.join(bad)})")
    return Shape(*dims)


def read_shape_file(path: Path) -> list[Shape]:
    """A shape file's shapes in file order, repeats kept (``parse_shapes`` drops them): one
    ``M_N_K`` a line or a CSV with m, n, k columns, ``#`` comments and blank lines skipped; a
    ShapeError naming the file and entry for a malformed one, or for a file with none."""
    text = path.read_text()
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        raise ShapeError(f"shape file {path} holds no shapes")
    header = [h.strip().lower() for h in lines[0].split(",")]
    if {"m", "n", "k"} <= set(header):
        out = []
        for i, row in enumerate(csv.DictReader(lines), start=2):
            row = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
            try:
                out.append(parse_shape(f"{row['m']}_{row['n']}_{row['k']}"))
            except ShapeError as e:
                raise ShapeError(f"{path}, line {i}: {e}") from None
        return out
    out = []
    for i, ln in enumerate(lines, start=1):
        try:
            out.append(parse_shape(ln))
        except ShapeError as e:
            raise ShapeError(f"{path}, entry {i}: {e}") from None
    return out


@dataclass
class ShapeSelection:
    """Shapes in order without duplicates, and where the model-derived ones come from:
    ``origins[shape.name]`` lists every (model, layer) that runs that GEMM, in the order the
    entries named them (a shape two layers share is measured once and names both)."""

    shapes: list[Shape]
    origins: dict[str, tuple[ShapeOrigin, ...]] = field(default_factory=dict)


def _tokens(items: list[str]) -> list[str]:
    """Entries of --shapes values, split at commas and spaces, a ``model:`` entry kept whole."""
    out = []
    for text in items:
        pos = 0
        while pos < len(text):
            sep = re.match(r"[,\s]+", text[pos:])
            if sep:
                pos += sep.end()
                continue
            m = model_token_at(text, pos) if text.startswith(MODEL_PREFIX, pos) else None
            m = m or re.compile(r"[^\s,]+").match(text, pos)
            out.append(m.group())
            pos = m.end()
    return out


def resolve_shapes(spec: str | list[str]) -> ShapeSelection:
    """Resolve a ``--shapes`` value (or several) into shapes, in order, without duplicates, and
    the model and layer each model-derived shape comes from."""
    items = spec if isinstance(spec, list) else [spec]
    tokens = _tokens(items)
    if not tokens:
        raise ShapeError("no shapes given")
    sets = _named_sets()
    out: list[Shape] = []
    origins: dict[str, list[ShapeOrigin]] = {}
    for tok in tokens:
        if tok in sets:
            out.extend(sets[tok])
        elif tok.startswith(MODEL_PREFIX):
            try:
                pairs = model_shapes(tok)
            except ModelShapeError as e:
                raise ShapeError(str(e)) from None
            for shape, origin in pairs:
                out.append(shape)
                have = origins.setdefault(shape.name, [])
                if origin not in have:
                    have.append(origin)
        elif _SHAPE_RE.match(tok) or re.fullmatch(r"[-\d_xX]+", tok):
            out.append(parse_shape(tok))
        elif Path(tok).exists():
            out.extend(read_shape_file(Path(tok)))
        else:
            raise ShapeError(
                f"unknown shape entry {tok!r}: not M_N_K, not a named set ({', '.join(NAMED_SETS)}), "
                "not model:CONFIG, not an existing file"
            )
    return ShapeSelection(list(dict.fromkeys(out)), {k: tuple(v) for k, v in origins.items()})


def parse_shapes(spec: str | list[str]) -> list[Shape]:
    """Resolve a ``--shapes`` value (or several) into shapes, in order, without duplicates."""
    return resolve_shapes(spec).shapes


ORIGIN_SEPARATOR = ";"


def origin_columns(origins: tuple[ShapeOrigin, ...] | None) -> dict[str, str | None]:
    """The ``source_model`` / ``source_layer`` columns of a row: one entry per origin, joined by
    ``ORIGIN_SEPARATOR`` in the same order in both, so entry i of one pairs with entry i of the
    other (split both and zip); None for a shape no model named."""
    if not origins:
        return {"source_model": None, "source_layer": None}
    return {"source_model": ORIGIN_SEPARATOR.join(o.model for o in origins),
            "source_layer": ORIGIN_SEPARATOR.join(o.layer for o in origins)}


def sample_grid(n: int, seed: int = 0) -> list[Shape]:
    """``n`` shapes spread over the cuda-l2 grid: stratified by tile count and K, deterministic.

    Sorting the grid by (tiles, K) and taking evenly spaced picks covers launch-bound, few-tile,
    mid and large shapes in proportion, which a uniform random draw of 50 does not guarantee.
    """
    import random

    grid = sorted(_named_sets()["cuda-l2"], key=lambda s: (-(-s.m // 128) * -(-s.n // 128), s.k, s.m, s.n))
    step = len(grid) / n
    rng = random.Random(seed)
    return [grid[min(len(grid) - 1, int(i * step + rng.random() * step))] for i in range(n)]
