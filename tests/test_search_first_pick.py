"""The first pick (``kernels_search/search/first_pick.py``) on the synthetic families of
test_search_learner.py: which configs compete, and how the ``paired`` and ``ranked`` rules order them.

Why these tests can fail: a pick that takes a config measured on too few shapes, or far from the
shape, or one that would run split-K with one slice or leave a cluster partly empty; a paired fit
that credits a config with the luck of the shapes it ran on; a ranker that refits needlessly, sees
a shape's own rows, or does not learn the optimum; a pick that depends on the process's history;
a held-out id that does not name the rule and evidence that picked.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from harness.problem import Shape
from kernels_search.search.first_pick import RULES, FirstPick
from kernels_search.search.learner import Learner
from kernels_search.proposals import Candidate, Outcome
from kernels_search.search.settings import FirstPickSettings, LearnerSettings
from test_search_learner import CONFIGS, FAMS, PAIRED_M2, TILED, grid_shapes, optimum, true_reward

NO_ELITES = LearnerSettings(elites=0)


def measured(fams, rows, settings=NO_ELITES) -> Learner:
    """A learner that measured ``rows``: (shape, family, knobs, reward)."""
    lr = Learner(fams, ("nn",), settings)
    for s, fam, knobs, r in rows:
        lr.observe(s, [Outcome(Candidate(fam, knobs, fams[fam].spec(knobs)), "nn", "ok", r, None, None)])
    return lr


def test_the_product_rules_are_ranked_and_paired_and_another_name_is_refused():
    assert set(RULES) >= {"ranked", "paired"} and FirstPickSettings().rule == "ranked"
    with pytest.raises(ValueError, match="first-pick rule 'best'"):
        FirstPick(Learner(FAMS, ("nn",)), FirstPickSettings(rule="best"))
    with pytest.raises(ValueError, match="min_shapes"):
        FirstPickSettings(min_shapes=0)
    with pytest.raises(ValueError, match="paired_bandwidth"):
        FirstPickSettings(paired_shrink=0)
    assert FirstPickSettings().name == "ranked/m10/n2/d/c" and PAIRED_M2.name == "paired/m2"


def test_first_pick_does_not_depend_on_what_the_process_picked_before():
    """Two learners with the same observations pick the same kernel for a held-out shape, also
    when one of them has made other picks first (a held-out check resumed after some shapes were
    measured picks for the rest only)."""
    shapes = grid_shapes(6, 7)
    # no elites and 3 random configs per family in the pool: its random part decides the pick
    rows = [(s, fam, k, true_reward(s, fam, k)) for s in shapes for fam, k in CONFIGS[::9]]
    st = LearnerSettings(random_per_family=3, elites=0)
    a, b = FirstPick(measured(FAMS, rows, st), PAIRED_M2), FirstPick(measured(FAMS, rows, st), PAIRED_M2)
    held = grid_shapes(8, 99)
    first_all = [a.pick(s).spec for s in held]
    assert first_all[4:] == [b.pick(s).spec for s in held[4:]]


def test_first_pick_ranks_only_configs_measured_on_enough_other_shapes():
    """The one-shot pick comes from configs that ran on >= min_shapes other shapes (also ones
    outside the sampled pool); a config seen on one shape only, however well predicted, is not
    picked; a learner without such evidence picks from the whole pool."""
    shapes = grid_shapes(5, 3)
    lr = Learner(FAMS, ("nn",), LearnerSettings(random_per_family=2, elites=0, neighbours=0))
    assert FirstPick(lr, PAIRED_M2).pick(Shape(512, 512, 512)).spec  # no evidence at all: the whole pool
    wide = {"tile": 32, "split": 1, "stages": 2, "raster": 0}  # on every shape, mediocre
    lone = {"tile": 128, "split": 4, "stages": 3, "raster": 1}  # on one shape, excellent
    for i, s in enumerate(shapes):
        outs = [Outcome(Candidate("tiled", wide, TILED.spec(wide)), "nn", "ok", 0.05, None, None)]
        if i == 0:
            outs.append(Outcome(Candidate("tiled", lone, TILED.spec(lone)), "nn", "ok", 0.9, None, None))
        lr.observe(s, outs)
    assert lr.measured_on[TILED.spec(wide)].keys() == {s.name for s in shapes}
    held = Shape(1024, 2048, 4096)
    m2, m1 = FirstPick(lr, PAIRED_M2), FirstPick(lr, replace(PAIRED_M2, min_shapes=1))
    assert m2.pick(held).spec == TILED.spec(wide)
    assert m1.pick(held).spec == TILED.spec(lone)  # one other shape is enough now: the better-measured config
    assert m1.pick(shapes[0]).spec == TILED.spec(wide)  # its own shape is not evidence for it
    ranked = m1.ranking(held)  # best first; the pick leads, the one-shape config is ranked too
    assert [c.spec for c in ranked] == [TILED.spec(lone), TILED.spec(wide)]
    assert [c.spec for c in m1.ranking(held, top=1)] == [TILED.spec(lone)]
    assert [c.spec for c in m2.ranking(held)] == [TILED.spec(wide)]
    ev = m1.evidence(held, ranked[1])
    assert (ev["shapes"] == 5 and ev["nearest"] in {s.name for s in shapes}
            and ev["speedup"] == pytest.approx(math.exp(0.05)))
    assert m1.evidence(shapes[0], ranked[0])["shapes"] == 0  # its only shape is the one asked about


def test_paired_first_pick_compares_configs_on_the_same_shapes():
    """The paired rule fits each config's effect from differences measured on the same shapes. Config
    ``a`` beats ``b`` by 0.1 on every shape where both ran; ``b`` also ran alone on shapes where
    cuBLAS was weak (its reward there 0.4 higher). The learner's model reads rewards across shapes
    and credits ``b`` with those shapes' luck: its lower bound ranks ``b`` first, the paired rule
    ``a``. With a huge shrink it is the lower bound again, and with no shape measuring two
    candidates its values are the prior it was given."""
    a = {"tile": 32, "split": 1, "stages": 2, "raster": 0}
    b = {"tile": 64, "split": 1, "stages": 3, "raster": 0}
    target = Shape(1024, 1024, 1024)
    plain = [Shape(int(1024 * 2 ** x), int(1024 * 2 ** y), int(1024 * 2 ** z))
             for x, y, z in ((1, 0, 0), (0, 1, 0), (0, 0, 1), (-1, 0, 0), (0, -1, 0), (0, 0, -1))]
    lucky = [Shape(int(1024 * 2 ** x), int(1024 * 2 ** y), 1024) for x, y in ((1, 1), (1, -1), (-1, 1), (-1, -1))]
    rows = [(s, {"a": 0.1, "b": 0.0}) for s in plain] + [(s, {"b": 0.4}) for s in lucky]
    lr = measured(FAMS, [(s, "tiled", k, got[n]) for s, got in rows for n, k in (("a", a), ("b", b)) if n in got])
    pr = FirstPick(lr, PAIRED_M2)
    cands = [Candidate("tiled", k, TILED.spec(k)) for k in (a, b)]
    prior = pr.lower_bound(target, cands)
    assert prior[1] > prior[0] and lr.predict(target, cands)[0][1, 0] > lr.predict(target, cands)[0][0, 0]
    assert pr.pick(target).spec == TILED.spec(a)
    v = pr.paired_values(target, cands, prior)
    assert v[0] - v[1] > 0.02  # pulled from the prior's order towards the pairs' +0.1
    stiff = FirstPick(lr, replace(PAIRED_M2, paired_shrink=1e9))  # the lower bound, untouched
    assert stiff.pick(target).spec == TILED.spec(b)
    assert np.allclose(stiff.paired_values(target, cands, prior), prior, atol=1e-6)
    # one candidate alone: no shape compares it with another, so the fit has nothing to add
    assert np.allclose(pr.paired_values(target, cands[:1], prior[:1]), prior[:1])
    assert pr.id("s", 10) == "s-first-pick-pr1s1-lcb1-m2-c10"


def _paired_on_two(family: str, better: dict, worse: dict, shapes):
    """A learner of one family that measured two configs on ``shapes`` (``better`` 0.2 above
    ``worse`` on each), and the set of specs the paired rule's first pick chooses among on a shape
    under settings ``st``."""
    from kernels_search.families import ALL

    fam = ALL[family]
    lr = measured({family: fam}, [(s, family, k, r) for s in shapes for k, r in ((better, 0.2), (worse, 0.0))])
    return lr, lambda shape, st=PAIRED_M2: {c.spec for c in FirstPick(lr, st).candidates(shape)}


def test_first_pick_can_decline_a_config_that_leaves_a_cluster_partly_empty():
    """``decline_partial_cluster``: a clustered config whose tile count along the cluster's axis is
    not a multiple of the cluster size on the shape (64x192 in a 2x1 cluster on M = 192: three
    64-row tiles, so the second cluster has one CTA with no tile) is no candidate; where the tiles
    fill whole clusters it still is; a transposed family counts along its own problem (N x M); and
    without the setting nothing changes."""
    from kernels_search.families import ALL
    from kernels_search.search.features import partial_cluster

    fam = ALL["hopper"]
    tall = dict(fam.defaults(), tile_m=64, tile_n=192, cluster_m=2, cluster_n=1, schedule="pingpong")
    flat = dict(tall, cluster_m=1)
    odd, even = Shape(192, 7168, 10240), Shape(256, 7168, 10240)  # 3 and 4 tiles along M
    assert partial_cluster(odd, tall) and not partial_cluster(even, tall) and not partial_cluster(odd, flat)
    narrow = dict(tall, tile_n=32, cluster_m=1, cluster_n=2)  # along N: 3 tiles of 32 on N = 96, 2 on N = 64
    assert partial_cluster(Shape(128, 96, 64), narrow) and not partial_cluster(Shape(128, 64, 64), narrow)
    swap = dict(ALL["hopper_swap"].defaults(), tile_m=64, tile_n=64, cluster_m=2, cluster_n=1)
    assert partial_cluster(Shape(1024, 192, 64), swap, swap=True)  # the kernel's M is N = 192: 3 tiles
    assert not partial_cluster(Shape(192, 1024, 64), swap, swap=True)
    lr, specs = _paired_on_two("hopper", tall, flat,
                               (Shape(256, 4096, 8192), Shape(512, 8192, 4096), Shape(256, 2048, 16384)))
    assert specs(odd) == specs(even) == {fam.spec(tall), fam.spec(flat)}
    assert FirstPick(lr, PAIRED_M2).pick(odd).spec == fam.spec(tall)
    st = replace(PAIRED_M2, decline_partial_cluster=True)
    assert specs(odd, st) == {fam.spec(flat)} and specs(even, st) == {fam.spec(tall), fam.spec(flat)}
    fp = FirstPick(lr, st)
    assert fp.pick(odd).spec == fam.spec(flat) and fp.pick(even).spec == fam.spec(tall)
    assert fp.id("s", 10).endswith("-m2-pc-c10")


def test_first_pick_can_decline_a_split_k_config_left_with_one_slice():
    """``decline_one_slice``: a config asking for the one-wave slice count where the shape's tiles
    already fill a wave (so it would run one slice through split-K's workspace) is no candidate;
    where the count resolves to several slices it still is, and without the setting nothing changes."""
    from kernels_search.families import ALL
    from kernels_search.families.hopper import ONE_WAVE
    from kernels_search.search.features import one_slice_split_k

    fam = ALL["splitk_tma_swap"]
    sk = dict(fam.defaults(), tile_m=64, tile_n=128, slices=ONE_WAVE)
    plain = dict(sk, slices=4)
    wide, few = Shape(320, 3072, 14336), Shape(64, 1024, 16384)  # 144 tiles of the swapped problem; 8
    assert one_slice_split_k(wide, sk, swap=True) and not one_slice_split_k(few, sk, swap=True)
    assert not one_slice_split_k(wide, plain, swap=True)
    lr, specs = _paired_on_two("splitk_tma_swap", sk, plain,
                               (Shape(256, 2048, 8192), Shape(512, 4096, 16384), Shape(128, 1024, 8192)))
    assert specs(wide) == specs(few) == {fam.spec(sk), fam.spec(plain)}
    st = replace(PAIRED_M2, decline_one_slice=True)
    assert specs(wide, st) == {fam.spec(plain)} and specs(few, st) == {fam.spec(sk), fam.spec(plain)}
    assert FirstPick(lr, st).pick(wide).spec == fam.spec(plain)
    assert FirstPick(lr, st).id("s", 10).endswith("-m2-d-c10")


RANKED_M2 = replace(PAIRED_M2, rule="ranked")


def _ranked(rows) -> FirstPick:
    """The ranked rule's first pick of a learner of the synthetic families that measured ``rows``:
    (shape, family, knobs) with their true rewards (no noise)."""
    return FirstPick(measured(FAMS, [(s, f, k, true_reward(s, f, k)) for s, f, k in rows]), RANKED_M2)


def test_ranked_first_pick_learns_a_known_optimum_and_beats_random():
    """The learned ranker (``search.ranker``) on the synthetic reward: trained on 60 shapes where 12
    random configs each were measured, its first pick on 30 fresh shapes lands far closer to the
    optimum than a random config measured on enough shapes, and closer than the learner's own
    argmax (whose quadratic-in-log-tile optimum its one-hot features can only approximate)."""
    pytest.importorskip("lightgbm")
    rng = random.Random(3)
    train = grid_shapes(60, 11)
    fp = _ranked([(s, *c) for s in train for c in rng.sample(CONFIGS, 12)])
    fresh = [s for s in grid_shapes(40, 12) if s.name not in {t.name for t in train}][:30]
    regret = {"ranked": [], "model": [], "random": []}
    for s in fresh:
        known = fp.candidates(s)
        c = fp.pick(s)
        regret["ranked"].append(optimum(s) - true_reward(s, c.family, c.knobs))
        c = known[int(np.argmax(fp.learner.predict(s, known)[0].max(axis=1)))]
        regret["model"].append(optimum(s) - true_reward(s, c.family, c.knobs))
        regret["random"].append(np.mean([optimum(s) - true_reward(s, k.family, k.knobs) for k in known]))
    mean = {k: float(np.mean(v)) for k, v in regret.items()}
    assert mean["ranked"] < 0.5 * mean["random"], mean
    assert mean["ranked"] < mean["model"], mean


def test_ranked_rule_fits_once_per_evidence_and_leaves_a_shapes_own_rows_out():
    """One fit serves every fresh shape until a reward is folded in; a shape with measurements of its
    own is ranked by a model fitted without them (as the paired rule leaves them out); the fit is
    deterministic (the same scores from a second learner fed the same rows); the pick's search id
    names the rule."""
    pytest.importorskip("lightgbm")
    rng = random.Random(5)
    train = grid_shapes(20, 21)
    rows = [(s, *c) for s in train for c in rng.sample(CONFIGS, 8)]
    fp = _ranked(rows)
    fresh_a, fresh_b = Shape(1024, 1024, 4096), Shape(96, 4096, 512)
    cands = fp.candidates(fresh_a)
    va = fp.values(fresh_a, cands)
    fitted = fp._ranker[1]
    fp.values(fresh_b, fp.candidates(fresh_b))
    assert fp._ranker[1] is fitted  # no refit for another fresh shape
    assert np.array_equal(_ranked(rows).values(fresh_a, cands), va)
    own = train[0]
    fp.values(own, fp.candidates(own))
    assert fp._ranker[0][1] == own.name and fp._ranker[1] is not fitted
    assert fp._ranker[1].shapes == len({s.name for s in train}) - 1
    s, fam, knobs = rows[0]
    fp.learner.observe(fresh_a, [Outcome(Candidate(fam, knobs, FAMS[fam].spec(knobs)), "nn", "ok", 0.1, None, None)])
    fp.values(fresh_b, fp.candidates(fresh_b))
    assert fp._ranker[0] == (fp.learner.revision, None)
    assert fp.id("s", 10) == "s-first-pick-rk-m2-c10"


def test_a_restored_checkpoint_refits_the_ranker(tmp_path):
    """Loading a checkpoint replaces the learner's evidence: the next ranking refits."""
    pytest.importorskip("lightgbm")
    rng = random.Random(6)
    rows = [(s, *c) for s in grid_shapes(12, 41) for c in rng.sample(CONFIGS, 6)]
    fp = _ranked(rows)
    fresh = Shape(1024, 1024, 4096)
    fp.values(fresh, fp.candidates(fresh))
    fitted = fp._ranker[1]
    fp.learner.save(tmp_path / "p.npz")
    assert fp.learner.load(tmp_path / "p.npz")
    fp.values(fresh, fp.candidates(fresh))
    assert fp._ranker[1] is not fitted


def test_ranker_grades_and_launch_features():
    """The labels: the shape's best at the top grade, one grade per 1 % below it, none below 0; the
    launch features read a swap family's tile along N x M."""
    from kernels_search.search.ranker import TOP_GRADE, grade, launch_features

    assert grade(0.2, 0.2) == TOP_GRADE
    assert grade(0.2 - 0.05, 0.2) == TOP_GRADE - 5
    assert grade(-1.0, 0.2) == 0
    knobs = {"tile_m": 64, "tile_n": 192}
    plain = launch_features(Shape(12288, 128, 4096), knobs, swap=False)
    swap = launch_features(Shape(12288, 128, 4096), knobs, swap=True)
    assert plain[3] == pytest.approx(math.log2(192 * 1))  # 192 tiles along M, one along N
    assert swap[3] == pytest.approx(math.log2(2 * 64))  # N / 64 x M / 192 on the transposed problem
    assert swap[7] == pytest.approx(1.0) and swap[8] == pytest.approx(6.0)  # A read by 2 tiles, B by 64
    assert np.isnan(launch_features(Shape(64, 64, 64), {"x": 1}, swap=False)).all()


def test_ranked_rule_ranks_as_paired_while_no_shape_has_two_configs():
    """With one config measured per shape there is no order to learn: the ranked rule's values are the
    paired rule's, and the search's first pick still picks."""
    pytest.importorskip("lightgbm")
    shapes = grid_shapes(6, 31)
    fp = _ranked([(s, *CONFIGS[0 if i < 3 else 7]) for i, s in enumerate(shapes)])  # one config a shape, each on 3
    target = Shape(512, 512, 512)
    cands = fp.candidates(target)
    assert len(cands) >= 2 and not fp.ranker_for(target).fitted
    assert np.array_equal(fp.values(target, cands), FirstPick(fp.learner, PAIRED_M2).values(target, cands))
