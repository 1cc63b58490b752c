"""Features the learner conditions on: shape features, config features and their interactions.

Shape features (``shape_features``), all O(1) in size so one linear model spans the grid:
log2 M, N, K and log2 min(M, N) (the skinny side, which bounds useful tile sizes), scaled to
~[0, 1] over 1..16384, tiles per SM wave for 128x128 tiles on 132 SMs
(log2), the fill of the last wave, arithmetic intensity (log2 flop/byte, scaled) and skinniness
log2(K / (M*N)) (scaled). Config features (``FeatureSpace``): one-hot family, one-hot value per
(family, knob), one-hot layout, and knob-derived launch geometry for this shape where the family
has a tile (CTAs per wave on 132 SMs, wave efficiency, whether the tile covers the shape, the
tile fill and the split-K partials' traffic; ``geometry``).

The model's input is the outer product [1, shape features] x [config one-hots] plus the
geometry features: each knob value's effect is a linear function of the shape, so what is
learned on one shape transfers to shapes never measured.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from harness.problem import Shape
from kernels_search.families.hopper import ONE_WAVE, one_wave_slices

SMS = 132
WAVE_TILE = 128
# knob pairs that name a CTA tile, in the families' spellings
TILE_KNOBS = (("bm", "bn"), ("tile_m", "tile_n"), ("block_m", "block_n"))
SPLIT_KNOBS = ("splits", "split_k", "sk_splits", "slices")

SHAPE_FEATURES = ("log_m", "log_n", "log_k", "log_min_mn", "log_waves", "last_wave_fill", "log_intensity", "log_skinny")


def _tiles(m: int, n: int, tm: int, tn: int) -> int:
    return -(-m // tm) * -(-n // tn)


def shape_features(shape: Shape) -> np.ndarray:
    """The shape's features, in SHAPE_FEATURES order, each roughly in [-1, 1]."""
    m, n, k = shape.m, shape.n, shape.k
    tiles = _tiles(m, n, WAVE_TILE, WAVE_TILE)
    waves = tiles / SMS
    last = tiles - (math.ceil(waves) - 1) * SMS
    intensity = 2.0 * m * n * k / (2.0 * (m * k + k * n + m * n))
    return np.array([
        math.log2(m) / 14.0,
        math.log2(n) / 14.0,
        math.log2(k) / 14.0,
        math.log2(min(m, n)) / 14.0,
        math.log2(waves) / 8.0,
        last / SMS,
        math.log2(intensity) / 12.0,
        math.log2(k / (m * n)) / 28.0,
    ])


def shape_distance(a: Shape, b: Shape) -> float:
    """Euclidean distance in (log2 M, log2 N, log2 K): 1.0 = one dimension differs 2x."""
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2 for x, y in ((a.m, b.m), (a.n, b.n), (a.k, b.k))))


def geometry(shape: Shape, knobs: Mapping[str, Any], swap: bool = False) -> tuple[float, ...] | None:
    """The launch geometry of a config with a tile on this shape, or None (``swap``: a family that
    runs the transposed problem, C^T = B^T A^T, whose tile_m runs along N and tile_n along M):

    - log2 CTA waves (scaled), wave efficiency (CTAs / (waves x 132));
    - whether the tile covers the whole shape;
    - tile fill: the share of the launched tiles' area inside the output, M N / (ceil(M/tm) tm
      ceil(N/tn) tn). A 128-wide tile on N = 64 computes half zeros;
    - split-K partials' traffic: log2(1 + (splits - 1) x the fp32 partial bytes / the fp16
      bytes of A, B and C), the cost split-K pays for its extra CTAs (0 without split-K, and for
      an automatic slice count, 0 in the knobs: that count is decided at run time; the one-wave
      count, -1, is resolved as the kernel will be, on 132 SMs).

    Why the last two: the one-hot knobs times the shape features can only learn such interactions
    knob value by knob value (a 128-wide tile on N = 64; a config padding a shape); these say them
    directly. Measured on an H200: the linear model's picks on 40 fresh shapes, 0.945x of cuBLASLt
    autotune with them against 0.910x without. A swap family's tiles are read along N x M, where
    they run: read along M x N, a 64x128 swap tile on M = 64 looks full where half of each is zeros.
    """
    got = launch(shape, knobs, swap)
    if got is None:
        return None
    (m, n), k = kernel_mn(shape, swap), shape.k
    tm, tn, split, ctas, eff, fill = got
    partials = (split - 1) * m * n * 8 / (2 * (m * k + k * n + m * n))  # fp32 write + read, per split
    return (math.log2(ctas / SMS) / 8.0, eff, float(tm >= m and tn >= n), fill, math.log2(1 + partials))


def tile_of(knobs: Mapping[str, Any]) -> tuple[int, int] | None:
    """A config's tile (M, N) along its kernel's own problem, from whichever family's knob names it
    uses (``TILE_KNOBS``); None for a family without tile knobs."""
    for km, kn in TILE_KNOBS:
        if km in knobs and kn in knobs:
            return int(knobs[km]), int(knobs[kn])
    return None


def runs_swapped(family: str, knobs: Mapping[str, Any], swap_families) -> bool:
    """Whether a config runs the transposed problem, C^T = B^T A^T: its family is one of ``swap_families``
    (``HopperView.swap_ab``), or its ``swap`` knob is set (``splitk_dsmem``)."""
    return family in swap_families or bool(knobs.get("swap", 0))


def kernel_mn(shape: Shape, swap: bool = False) -> tuple[int, int]:
    """M and N of the kernel's own problem: N x M for a ``swap`` family."""
    return (shape.n, shape.m) if swap else (shape.m, shape.n)


def launch(shape: Shape, knobs: Mapping[str, Any],
           swap: bool = False) -> tuple[int, int, int, int, float, float] | None:
    """How a config with a tile launches on this shape, or None (no tile knobs): (tile_m, tile_n,
    the split-K slice count that runs, CTAs, wave efficiency CTAs / (waves x 132), tile fill), on
    the kernel's own problem (N x M for a ``swap`` family). The slice count is the knob's where it
    is fixed, the one-wave count (-1) resolved as the kernel resolves it, and 1 for the automatic
    count (0), which is decided at run time."""
    tile = tile_of(knobs)
    if tile is None:
        return None
    (tm, tn), (m, n), k = tile, kernel_mn(shape, swap), shape.k
    split = 1
    for s in SPLIT_KNOBS:
        v = knobs.get(s)
        if isinstance(v, (int, np.integer)) and v > 1:
            split = int(v)
        elif v == ONE_WAVE:  # known before the run, unlike the automatic count (0)
            split = one_wave_slices(m, n, k, tm, tn, int(knobs.get("tile_k", 64)), SMS)
    tiles = _tiles(m, n, tm, tn)
    ctas = tiles * split
    return tm, tn, split, ctas, ctas / (math.ceil(ctas / SMS) * SMS), m * n / (tiles * tm * tn)


class FeatureSpace:
    """The fixed vocabulary of config one-hots for a set of families (knob spaces).

    ``families`` maps family name -> object with ``knobs`` (each with ``name`` and ``values``),
    i.e. ``kernels_search.family.Family`` instances. The vocabulary (and so the model's
    dimension) is fixed at construction; ``vocab`` is saved with a checkpoint so a changed
    family set is detected on resume.
    """

    def __init__(self, families: Mapping[str, Any], layouts: Sequence[str] = ("nn", "tn")):
        self.layouts = tuple(layouts)
        # families that run the transposed problem (``HopperView.swap_ab``): their tiles lie along N x M
        self.swapped = {name for name, fam in families.items() if getattr(fam, "swap_ab", False)}
        vocab: list[str] = [f"layout={lay}" for lay in self.layouts]
        for fname, fam in families.items():
            vocab.append(f"family={fname}")
            for knob in fam.knobs:
                for v in knob.values:
                    vocab.append(f"{fname}.{knob.name}={v}")
        self.vocab = vocab
        self.index = {v: i for i, v in enumerate(vocab)}
        self.n_config = len(vocab)
        self.n_shape = 1 + len(SHAPE_FEATURES)
        self.n_geom = 6  # has-geometry flag, log waves, wave efficiency, covers, tile fill, partials
        self.dim = self.n_shape * self.n_config + self.n_geom * self.n_shape

    def is_swapped(self, family: str, knobs: Mapping[str, Any]) -> bool:
        return runs_swapped(family, knobs, self.swapped)

    def config_onehot(self, family: str, knobs: Mapping[str, Any], layout: str) -> np.ndarray:
        x = np.zeros(self.n_config)
        for key in (f"layout={layout}", f"family={family}",
                    *(f"{family}.{k}={v}" for k, v in knobs.items())):
            i = self.index.get(key)
            if i is not None:
                x[i] = 1.0
        return x

    def features(self, shape: Shape, family: str, knobs: Mapping[str, Any], layout: str,
                 shape_feats: np.ndarray | None = None) -> np.ndarray:
        s = np.concatenate([[1.0], shape_features(shape) if shape_feats is None else shape_feats])
        c = self.config_onehot(family, knobs, layout)
        g = geometry(shape, knobs, swap=self.is_swapped(family, knobs))
        gv = np.array([1.0, *g]) if g is not None else np.zeros(self.n_geom)
        return np.concatenate([np.outer(s, c).ravel(), np.outer(s, gv).ravel()])

    def names(self) -> list[str]:
        """Human-readable name of every model input (for explaining weights)."""
        s = ["1", *SHAPE_FEATURES]
        g = ["geom", "geom_log_waves", "geom_wave_eff", "geom_covers", "geom_tile_fill", "geom_partials"]
        return [f"{a}*{b}" if a != "1" else b for a in s for b in self.vocab] + \
               [f"{a}*{b}" if a != "1" else b for a in s for b in g]


def launch_mismatch(a: tuple | None, b: tuple | None) -> float:
    """How differently one config launches on two shapes (``launch``'s tuples; 0 where either has
    no tile): the differences in wave efficiency and tile fill (each 0..1) and in log2 of the slice
    count (a half per doubling), as one Euclidean length. A 128-tile config on M = 1536 (12 tiles)
    and M = 2048 (16 tiles) fills its tiles alike; on 144 CTAs it uses 55 % of two waves where 128
    CTAs used 97 % of one."""
    if a is None or b is None:
        return 0.0
    return math.sqrt((a[4] - b[4]) ** 2 + (a[5] - b[5]) ** 2 + (math.log2(a[2] / b[2]) / 2) ** 2)


def partial_cluster(shape: Shape, knobs: Mapping[str, Any], swap: bool = False) -> bool:
    """Whether a clustered config leaves a cluster partly empty on this shape: its tile count along M
    (or N) is not a multiple of the cluster's size there, so the grid, rounded up to whole clusters,
    launches CTAs with no tile (on the kernel's own problem, N x M for a ``swap`` family). Measured
    on an H200: such a config ran at 0.818x of the same config in a 1x1 cluster on the same shape
    in the same call (128 pairs, slower on 94 %), where a full cluster ran at 1.027x (708 pairs)."""
    cm, cn = int(knobs.get("cluster_m", 1)), int(knobs.get("cluster_n", 1))
    tile = tile_of(knobs)
    if tile is None or cm * cn == 1:
        return False
    (tm, tn), (m, n) = tile, kernel_mn(shape, swap)
    return -(-m // tm) % cm != 0 or -(-n // tn) % cn != 0


def one_slice_split_k(shape: Shape, knobs: Mapping[str, Any], swap: bool = False) -> bool:
    """Whether a config asks for the one-wave slice count (-1) and it resolves to a single slice on
    this shape: its tiles alone fill a wave, so the split-K kernel runs one slice through its fp32
    workspace and the reduction for nothing. Measured on an H200: 198 such rows ran at 0.595x of
    cuBLASLt autotune (geomean), against 0.69-0.93x with 2-24 slices."""
    if not any(knobs.get(s) == ONE_WAVE for s in SPLIT_KNOBS):
        return False
    got = launch(shape, knobs, swap)
    return got is not None and got[2] == 1
