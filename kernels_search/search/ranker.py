"""The learned first-pick ranker (the ``ranked`` rule of ``first_pick``): LightGBM's LambdaRank over
the configs measured on each shape.

What it learns from. Every shape on which the learner measured two or more configs correctly is one
query; each config measured there is one document, labelled by how far its reward (log speedup
over the strongest baseline, best of layouts: ``Learner.measured_on``) lies below the best on that
shape, one grade per 1 % (``LABEL_STEP``) from ``TOP_GRADE`` at the best down to 0 at 30 % or
more below it. The features (``Ranker.features``) are the shape's (log2 M, N, K and
``features.shape_features``), the config's family and knob values, and how the config launches on
the shape (``features.launch``: tile, slices, CTAs, wave efficiency, tile fill, and how many times
the tiles read A and B). A ranking objective asks only for the order within a shape, which is all
a first pick uses: how strong cuBLAS happens to be on a shape is not the ranker's to learn.

Why a ranker: the learner's additive knob effects and the paired rule's kernel smoothing in log2
(M, N, K) cannot express "this tile wins where its CTA count fills the waves and its B re-reads
stay few"; trees over knobs and launch geometry can. Measured on an H200 against the paired rule:
paired 1.055x (95 % CI 1.040-1.072) over the 154 of 200 picks it changed.

LightGBM is deterministic here (``deterministic``, ``force_row_wise``, a fixed seed): a held-out
check resumed in another process picks the same kernels.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness.shapes import Shape, parse_shape
from kernels_search.search.features import SMS, launch, runs_swapped, shape_features

TOP_GRADE = 30  # the label of a shape's best config
LABEL_STEP = 0.01  # one grade per this much log reward below the shape's best
TREES, LEAVES, LEARNING_RATE, MIN_CHILD = 400, 31, 0.05, 20
SEED = 0
N_GEOMETRY = 11


def grade(reward: float, best: float) -> int:
    """A config's label on a shape: ``TOP_GRADE`` at the shape's best, one less per ``LABEL_STEP``
    below it, never below 0."""
    return max(0, min(TOP_GRADE, int(round(TOP_GRADE + (reward - best) / LABEL_STEP))))


class KnobCoder:
    """Numbers for the families' knobs, fixed by the families' own value lists: a numeric knob keeps
    its value, another (a schedule name) the index of its value in its knob's list; a family is the
    index of its name. Knobs of the same name share a column across families (the family column and
    the launch geometry tell their orientations apart)."""

    def __init__(self, families: Mapping[str, Any]):
        self.family_index = {name: i for i, name in enumerate(families)}
        self.columns: dict[str, int] = {}
        self.codes: dict[tuple[str, Any], float] = {}
        for fam in families.values():
            for knob in fam.knobs:
                self.columns.setdefault(knob.name, len(self.columns))
                for i, v in enumerate(knob.values):
                    self.codes[(knob.name, v)] = float(v) if _numeric(v) else float(i)

    def __call__(self, family: str, knobs: Mapping[str, Any]) -> np.ndarray:
        out = np.full(1 + len(self.columns), np.nan)
        out[0] = self.family_index.get(family, -1)
        for name, v in knobs.items():
            col = self.columns.get(name)
            if col is not None:
                out[1 + col] = self.codes.get((name, v), float(v) if _numeric(v) else np.nan)
        return out


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def launch_features(shape: Shape, knobs: Mapping[str, Any], swap: bool) -> np.ndarray:
    """How the config launches on the shape (``features.launch``): tile M and N and slices (the
    kernel's own, N x M for a ``swap`` family), log2 CTAs, CTAs per SM, wave efficiency, tile fill,
    log2 of how many tiles read each row of the shape's A (its tiles along N) and each column of its
    B (its tiles along M), whichever operand the kernel loads as which, log2 of the K one slice runs,
    log2 tile area. NaN for a family without tile knobs."""
    got = launch(shape, knobs, swap)
    if got is None:
        return np.full(N_GEOMETRY, np.nan)
    tm, tn, split, ctas, eff, fill = got
    along_m, along_n = (tn, tm) if swap else (tm, tn)
    return np.array([tm, tn, split, math.log2(ctas), ctas / SMS, eff, fill, math.log2(-(-shape.n // along_n)),
                     math.log2(-(-shape.m // along_m)), math.log2(shape.k / split), math.log2(tm * tn)])


class Ranker:
    """A fitted LambdaRank model over (shape, config) features; ``score`` orders candidates."""

    def __init__(self, families: Mapping[str, Any], swapped: set[str]):
        self.coder = KnobCoder(families)
        self.swapped = set(swapped)
        self.model = None

    def features(self, shape: Shape, family: str, knobs: Mapping[str, Any]) -> np.ndarray:
        s = [math.log2(shape.m), math.log2(shape.n), math.log2(shape.k), *shape_features(shape)]
        return np.concatenate([s, self.coder(family, knobs),
                               launch_features(shape, knobs, runs_swapped(family, knobs, self.swapped))])

    def fit(self, measured_on: Mapping[str, Mapping[str, float]],
            config_of: Callable[[str], tuple[str, Mapping] | None],
            exclude_shape: str | None = None) -> "Ranker":
        """Fit on every shape (but ``exclude_shape``) with two or more configs measured correctly
        (``measured_on``: spec -> {shape: reward}); ``config_of(spec)`` -> (family, knobs), or None
        for a spec the learner no longer searches. With no such shape there is no order to learn and
        the ranker stays unfitted (``fitted`` False)."""
        try:
            import lightgbm
        except ImportError as e:  # a named error, not a bare traceback deep in a pick
            raise ImportError("the 'ranked' first-pick rule needs LightGBM: pip install lightgbm") from e
        by_shape: dict[str, list[tuple[tuple[str, Mapping], float]]] = {}
        for spec in sorted(measured_on):
            cfg = config_of(spec)  # once per config: it parses the spec
            if cfg is None:
                continue
            for nm, r in measured_on[spec].items():
                if nm != exclude_shape:
                    by_shape.setdefault(nm, []).append((cfg, r))
        X, y, groups = [], [], []
        for nm in sorted(by_shape):
            rows = by_shape[nm]
            if len(rows) < 2:
                continue
            shape, best = parse_shape(nm), max(r for _, r in rows)
            for cfg, r in rows:
                X.append(self.features(shape, *cfg))
                y.append(grade(r, best))
            groups.append(len(rows))
        self.shapes, self.rows = len(groups), len(X)
        if not groups:
            return self
        # LightGBM's own API (its scikit-learn wrapper, LGBMRanker, would need scikit-learn too)
        params = dict(objective="lambdarank", num_leaves=LEAVES, learning_rate=LEARNING_RATE,
                      min_data_in_leaf=MIN_CHILD, label_gain=list(range(TOP_GRADE + 1)), seed=SEED,
                      deterministic=True, force_row_wise=True, num_threads=1, verbose=-1)
        data = lightgbm.Dataset(np.array(X), np.array(y), group=groups)
        self.model = lightgbm.train(params, data, num_boost_round=TREES)
        return self

    @property
    def fitted(self) -> bool:
        return self.model is not None

    def score(self, shape: Shape, cands: Sequence[tuple[str, Mapping[str, Any]]]) -> np.ndarray:
        """The fitted model's score of each (family, knobs) on ``shape``: higher ranks first."""
        if self.model is None:
            raise RuntimeError("Ranker.score before fit")
        return self.model.predict(np.array([self.features(shape, f, k) for f, k in cands]))
