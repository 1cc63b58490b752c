"""The first pick: one config for a shape never measured, from what a learner has measured elsewhere.

A held-out check (``search --holdout``) or a tuner that may time only one kernel on a new shape
gets one evaluation, which cannot correct a guess. So the pick does not take the learner's
argmax over its pool (its additive knob effects extrapolate to knob mixes it never measured);
it ranks configs with evidence (``FirstPickSettings``):

1. Candidates (``candidates``): configs measured correctly on at least ``min_shapes`` other shapes
   (on every other shape, in a search of fewer), supported on the shape; of those, with
   ``min_near`` N > 0, the ones measured on N shapes within ``near_distance`` of it, while any
   config is; with ``decline_one_slice``, not a split-K config whose one-wave slice count resolves
   to one slice on the shape (``features.one_slice_split_k``); with ``decline_partial_cluster``, not
   a clustered config whose tile count leaves a cluster partly empty (``features.partial_cluster``).
   While no config has evidence, the learner's pool is ranked by its posterior mean instead.
2. The rule (``RULES``) orders them:

   * ``ranked`` (the default): a LightGBM LambdaRank model (``search.ranker``) that learns, from
     every shape with two or more configs measured, which config wins by the shape's features,
     the config's knobs and how it launches there (waves, tile fill, re-reads of A and B). Until
     some shape has two configs there is no order to learn, and it ranks as ``paired``.
   * ``paired``: each config's effect in a two-way (shape + config) least-squares fit of its
     rewards on nearby shapes (``paired_values``), shrunk towards a lower bound of the learner's
     prediction (posterior mean minus ``caution`` std): only differences measured on the same
     shape move the ranking, so how strong cuBLAS happened to be on a config's shapes does not
     count for or against it.

   Other rules register through ``register_rule`` (research variants live in ``lab/``).

Why these defaults: each beat the setting before it in a paired test on fresh H200 shapes
(evidence on 10 shapes 1.028x; 2 of them near, with the packaged evidence, 1.047x; ``paired`` over
the lower bound alone 1.017x; ``ranked`` over ``paired`` 1.055x).

The pick depends on the learner's observations and the shape only (candidates are ranked in spec
order, the pool's random part is seeded by the shape), not on what the process picked before: a
held-out check resumed in another process picks the same kernels, and they can be built ahead.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from harness.problem import Shape
from harness.shapes import parse_shape
from kernels_search.search.features import one_slice_split_k, partial_cluster, shape_distance
from kernels_search.proposals import Candidate
from kernels_search.search.settings import FirstPickSettings


@dataclass(frozen=True)
class Rule:
    """A first-pick rule: ``values(picker, shape, cands)`` -> one number per candidate, higher
    first; ``tag(settings)`` -> the rule's part of a held-out check's search id (``FirstPick.id``)."""

    values: Callable[["FirstPick", Shape, Sequence[Candidate]], np.ndarray]
    tag: Callable[[FirstPickSettings], str]


RULES: dict[str, Rule] = {}


def register_rule(name: str, values: Callable, tag: Callable[[FirstPickSettings], str]) -> None:
    """Make ``name`` a rule ``FirstPickSettings.rule`` may name."""
    RULES[name] = Rule(values, tag)


def best_first(values, top: int | None = None) -> list[int]:
    """Indices of ``values`` highest first (the first ``top``); ties keep their order. The one
    ordering of a first pick's candidates (``FirstPick.ranking``, ``search --dry-run``)."""
    return [int(i) for i in np.argsort(-np.asarray(values, dtype=float), kind="stable")[:top]]


class FirstPick:
    """The first pick of ``learner`` (a ``learner.Learner``) under ``settings`` (module docstring)."""

    def __init__(self, learner, settings: FirstPickSettings = FirstPickSettings()):
        if settings.rule not in RULES:
            raise ValueError(f"first-pick rule {settings.rule!r}: one of {', '.join(RULES)}")
        self.learner = learner
        self.settings = settings
        self._ranker: tuple[tuple, Any] | None = None  # ((learner revision, excluded shape), fitted Ranker)

    # ------------------------------------------------------------------ candidates
    def near_evidence(self, spec: str, shape: Shape) -> int:
        """How many other shapes within ``near_distance`` (log2 M, N, K) measured ``spec``."""
        return sum(1 for nm in self.learner.measured_on.get(spec, {}) if nm != shape.name
                   and shape_distance(shape, parse_shape(nm)) <= self.settings.near_distance)

    def candidates(self, shape: Shape, specs: Iterable[str] | None = None) -> list[Candidate]:
        """The configs the pick chooses among on ``shape`` (module docstring, 1), of ``specs``
        (canonical specs; default every measured config), in spec order."""
        lr, st = self.learner, self.settings
        # a search of few shapes cannot give N others: then a config measured on every other shape
        need = min(st.min_shapes, max(1, len(lr.history.keys() - {shape.name})))
        known = []
        for spec in sorted(lr.measured_on) if specs is None else specs:
            if len(lr.measured_on.get(spec, {}).keys() - {shape.name}) < need:
                continue
            cand = lr.candidate_for(spec)
            if cand is None or not lr.supported(cand.family, cand.knobs, shape):
                continue
            swap = lr.space.is_swapped(cand.family, cand.knobs)
            if st.decline_one_slice and one_slice_split_k(shape, cand.knobs, swap):
                continue
            if st.decline_partial_cluster and partial_cluster(shape, cand.knobs, swap):
                continue
            known.append(cand)
        if st.min_near:  # evidence near the shape if any config has it, else the rest
            known = [c for c in known if self.near_evidence(c.spec, shape) >= st.min_near] or known
        return known

    # ------------------------------------------------------------------ ranking
    def values(self, shape: Shape, cands: Sequence[Candidate]) -> np.ndarray:
        """What the rule ranks ``cands`` by on ``shape``, higher first."""
        return np.asarray(RULES[self.settings.rule].values(self, shape, cands), dtype=float)

    def ranking(self, shape: Shape, db=None, gpu: str | None = None, top: int | None = None) -> list[Candidate]:
        """The candidates on ``shape`` best first (the first ``top``); ties keep ``candidates``'
        order, so the first is ``pick``'s. While no config has evidence, the learner's pool (seeded
        by the shape) by its posterior mean."""
        known, values = self.scored(shape, db, gpu)
        return [known[i] for i in best_first(values, top)]

    def scored(self, shape: Shape, db=None, gpu: str | None = None) -> tuple[list[Candidate], np.ndarray]:
        """(candidates, their values), unordered: what ``ranking`` sorts."""
        known = self.candidates(shape)
        if known:
            return known, self.values(shape, known)
        pool = self.learner.pool(shape, db=db, gpu=gpu, seed=zlib.crc32(f"first-pick {shape.name}".encode()))
        return pool, self.learner.predict(shape, pool)[0].max(axis=1)

    def pick(self, shape: Shape, db=None, gpu: str | None = None) -> Candidate:
        """The config to measure on ``shape``: the first of ``ranking``."""
        return self.ranking(shape, db, gpu, top=1)[0]

    # ------------------------------------------------------------------ the rules' parts
    def lower_bound(self, shape: Shape, cands: Sequence[Candidate]) -> np.ndarray:
        """The learner's posterior mean minus ``caution`` std, best layout: the paired rule's prior."""
        mu, sd = self.learner.predict(shape, cands)
        return (mu - self.settings.caution * sd).max(axis=1)

    def paired_values(self, shape: Shape, cands: Sequence[Candidate], prior: np.ndarray,
                      weigh: Callable[[Shape, np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """Each config's effect in a two-way (shape + config) least-squares fit of the rewards
        ``measured_on`` holds for ``cands`` on other shapes, each shape weighted
        exp(-(distance / ``paired_bandwidth``)^2), every effect shrunk towards ``prior`` with the
        weight of ``paired_shrink`` shapes at distance 0. A shape where one candidate ran says
        nothing about the others and drops out; with no shape left, the values are ``prior``.

        The fit: minimise sum_j sum_{a in S_j} w_ja (r_ja - mu_j - v_a)^2 + shrink sum_a (v_a - prior_a)^2.
        Eliminating mu_j leaves (sum_j L_j + shrink I) v = sum_j L_j r_j + shrink prior,
        L_j = W_j - w_j w_j^T / sum(w_j) over the candidates S_j measured on shape j: one small solve.
        ``weigh(other_shape, candidate indices)``, where given, multiplies each row's weight (and
        shapes of weight below 1e-6 drop out)."""
        st, measured = self.settings, self.learner.measured_on
        index = {c.spec: i for i, c in enumerate(cands)}
        by_shape: dict[str, list[tuple[int, float]]] = {}
        for c in cands:
            for nm, r in measured.get(c.spec, {}).items():
                if nm != shape.name:
                    by_shape.setdefault(nm, []).append((index[c.spec], r))
        n = len(cands)
        lhs, rhs = st.paired_shrink * np.eye(n), st.paired_shrink * np.asarray(prior, float)
        for nm, got in by_shape.items():
            if len(got) < 2:
                continue
            other = parse_shape(nm)
            w0 = math.exp(-((shape_distance(shape, other) / st.paired_bandwidth) ** 2))
            if weigh is not None and w0 < 1e-6:
                continue
            idx = np.array([i for i, _ in got])
            r = np.array([x for _, x in got])
            w = np.full(len(got), w0) if weigh is None else w0 * weigh(other, idx)
            lap = np.diag(w) - np.outer(w, w) / w.sum()
            lhs[np.ix_(idx, idx)] += lap
            rhs[idx] += lap @ r
        return np.linalg.solve(lhs, rhs)

    def ranker_for(self, shape: Shape):
        """The ranked rule's model (``search.ranker``), fitted on every correct measurement but
        ``shape``'s own, refitted only when the learner's evidence moved or for a shape that has
        measurements of its own (a fresh shape has none, so one fit serves a whole held-out draw)."""
        from kernels_search.search.ranker import Ranker

        lr = self.learner
        own = shape.name if any(shape.name in d for d in lr.measured_on.values()) else None
        key = (lr.revision, own)
        if self._ranker is None or self._ranker[0] != key:
            def config_of(spec: str):
                c = lr.candidate_for(spec)
                return None if c is None else (c.family, c.knobs)
            self._ranker = (key, Ranker(lr.families, lr.space.swapped).fit(lr.measured_on, config_of, own))
        return self._ranker[1]

    # ------------------------------------------------------------------ reporting
    def id(self, search_id: str, candidates: int) -> str:
        """The search id of a held-out check: the search, the rule (``RULES[rule].tag``), the
        evidence it asks for (``m<min_shapes>``, ``-n<min_near>``, ``-d``, ``-pc``), how many
        candidates the learner had seen and (``-p<rows>``) how many prior rows it learnt, so that a
        check is read back only by a learner and rule that would pick the same kernels."""
        st = self.settings
        prior = sum(1 for r in self.learner.seen if r.startswith("prior:"))  # rows folded in by search.prior
        return (f"{search_id}-first-pick-{RULES[st.rule].tag(st)}m{st.min_shapes}"
                + (f"-n{st.min_near}" if st.min_near else "") + ("-d" if st.decline_one_slice else "")
                + ("-pc" if st.decline_partial_cluster else "") + f"-c{candidates}" + (f"-p{prior}" if prior else ""))

    def evidence(self, shape: Shape, cand: Candidate) -> dict:
        """What ``cand``'s place on ``shape`` rests on: the other shapes it ran correctly on, how many
        of them are near, and the nearest one with its speedup there over the strongest baseline."""
        measured = {nm: r for nm, r in self.learner.measured_on.get(cand.spec, {}).items() if nm != shape.name}
        if not measured:
            return dict(shapes=0, near=0, nearest=None, distance=None, speedup=None)
        dist, nearest = min((shape_distance(shape, parse_shape(nm)), nm) for nm in measured)
        return dict(shapes=len(measured), near=self.near_evidence(cand.spec, shape), nearest=nearest,
                    distance=dist, speedup=math.exp(measured[nearest]))


def paired_tag(st: FirstPickSettings) -> str:
    return f"pr{st.paired_bandwidth:g}s{st.paired_shrink:g}-lcb{st.caution:g}-"


def _paired(fp: FirstPick, shape: Shape, cands: Sequence[Candidate]) -> np.ndarray:
    return fp.paired_values(shape, cands, fp.lower_bound(shape, cands))


def _ranked(fp: FirstPick, shape: Shape, cands: Sequence[Candidate]) -> np.ndarray:
    ranker = fp.ranker_for(shape)
    if ranker.fitted:
        return ranker.score(shape, [(c.family, c.knobs) for c in cands])
    return _paired(fp, shape, cands)  # no shape with two configs: no order to learn


register_rule("ranked", _ranked, lambda st: "rk-")
register_rule("paired", _paired, paired_tag)
