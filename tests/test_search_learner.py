"""The learner on a synthetic reward with a known optimum (pure numpy, fixed seeds).

Why these tests can fail: a learner that does not learn (or learns but does not share across
shapes) has the same regret as uniform random choice, and its first pick on shapes it never saw
is no better than a random config; a checkpoint that drops state changes the predictions.
"""

import math
import random

import numpy as np
import pytest

from harness.problem import Shape
from harness.shapes import CUDA_L2_VALUES
from kernels_search.family import Family, Knob
from kernels_search.search.features import FeatureSpace, geometry, shape_features
from kernels_search.search.first_pick import FirstPick
from kernels_search.search.learner import Learner
from kernels_search.proposals import Candidate, Outcome, SearchContext
from kernels_search.search.settings import FirstPickSettings, LearnerSettings


class Tiled(Family):
    def check(self, k):
        return "tile 256 with split 16 is not built" if (k["tile"], k["split"]) == (256, 16) else ""


TILED = Tiled(name="tiled", knobs=(
    Knob("tile", (16, 32, 64, 128, 256), 64),
    Knob("split", (1, 2, 4, 8, 16), 1),
    Knob("stages", (2, 3, 4), 2),
    Knob("raster", (0, 1), 0, runtime=True),
))
OTHER = Family(name="other", knobs=(Knob("x", (0, 1, 2, 3), 0), Knob("y", (0, 1, 2, 3), 0)))
FAMS = {"tiled": TILED, "other": OTHER}
# the paired rule with evidence on 2 other shapes and no other constraint: what a small synthetic search can give
PAIRED_M2 = FirstPickSettings(rule="paired", min_shapes=2, min_near=0, decline_one_slice=False,
                              decline_partial_cluster=False)


def true_reward(shape: Shape, fam: str, k: dict) -> float:
    """Known optimum: tile ~ min(M, N) / 8 (clipped to 16..256), split grows with K / sqrt(M N),
    stages=3 a little better; tile 256 with 4 stages 'fails' (-1). Family 'other' is mediocre."""
    if fam == "other":
        return 0.1 - 0.05 * abs(k["x"] - k["y"])
    if k["tile"] == 256 and k["stages"] == 4:
        return -1.0
    tt = min(max(math.log2(min(shape.m, shape.n)) - 3, 4), 8)
    ts = min(max(math.log2(shape.k) - 0.5 * math.log2(shape.m * shape.n) + 1, 0), 4)
    r = 0.6 - 0.08 * (math.log2(k["tile"]) - tt) ** 2 - 0.06 * (math.log2(k["split"]) - ts) ** 2
    r += 0.05 * (k["stages"] == 3)
    return max(-1.0, min(1.0, r))


def all_configs():
    import itertools

    out = []
    for name, fam in FAMS.items():
        for combo in itertools.product(*(k.values for k in fam.knobs)):
            knobs = dict(zip((k.name for k in fam.knobs), combo))
            if fam.is_valid(knobs):
                out.append((name, knobs))
    return out


CONFIGS = all_configs()


def optimum(shape):
    return max(true_reward(shape, f, k) for f, k in CONFIGS)


def grid_shapes(n, seed):
    rng = random.Random(seed)
    vals = CUDA_L2_VALUES
    return [Shape(rng.choice(vals), rng.choice(vals), rng.choice(vals)) for _ in range(n)]


def simulate(chooser, shapes, rounds, batch, seed, noise=0.05):
    """(regret of every pick per round, simple regret per shape: optimum - best true reward found).

    ``chooser(shape, n, exclude, rnd) -> [(family, knobs)]``; what was measured on a shape is
    excluded from later picks, as in the search loop."""
    rng = np.random.default_rng(seed)
    regrets = [[] for _ in range(rounds)]
    measured = {s.name: set() for s in shapes}
    found = {s.name: -1.0 for s in shapes}
    for rnd in range(rounds):
        for s in shapes:
            picks = chooser(s, batch, measured[s.name], rnd)
            for fam, knobs in picks:
                spec = FAMS[fam].spec(knobs)
                measured[s.name].add(spec)
                r = true_reward(s, fam, knobs)
                regrets[rnd].append(optimum(s) - r)
                found[s.name] = max(found[s.name], r)
                yield_obs = max(-1.0, min(1.0, r + noise * rng.standard_normal()))
                chooser.observe(s, fam, knobs, yield_obs)
    return np.array(regrets), float(np.mean([optimum(s) - found[s.name] for s in shapes]))


class PolicyChooser:
    def __init__(self, seed):
        self.p = Learner(FAMS, ("nn",), seed=seed)
        self.seed = seed

    def __call__(self, shape, n, exclude, rnd):
        ctx = SearchContext(shape, n, set(exclude), None, None, ("nn",), rnd,
                            seed=hash((self.seed, rnd, shape)) & 0xFFFF)
        return [(c.family, c.knobs) for c in self.p.propose(shape, ctx)]

    def observe(self, shape, fam, knobs, r):
        c = Candidate(fam, knobs, FAMS[fam].spec(knobs))
        self.p.observe(shape, [Outcome(c, "nn", "ok" if r > -1 else "gate_failed", r, None, None)])


class RandomChooser:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def __call__(self, shape, n, exclude, rnd):
        pool = [(f, k) for f, k in CONFIGS if FAMS[f].spec(k) not in exclude]
        return self.rng.sample(pool, n)

    def observe(self, *a):
        pass


def test_synthetic_reward_has_a_known_optimum_that_random_misses():
    """Sanity of the benchmark itself: the optimum differs across shapes and random is far from it."""
    shapes = grid_shapes(12, 0)
    best = {s.name: max(CONFIGS, key=lambda c: true_reward(s, *c)) for s in shapes}
    assert len({FAMS[f].spec(k) for f, k in best.values()}) > 3
    rand = np.mean([optimum(s) - np.mean([true_reward(s, f, k) for f, k in CONFIGS]) for s in shapes])
    assert rand > 0.3


@pytest.mark.parametrize("seed", [1, 2])
def test_policy_beats_random_choice_on_average_regret(seed):
    """Same shapes, same budget (16 shapes x 4 rounds x 2 picks), same noise: the learner's
    average regret is well under random's, and the first pick from it (paired rule, evidence on 2
    shapes) on shapes it never measured is far better than a random config."""
    shapes = grid_shapes(16, seed)
    pol = PolicyChooser(seed)
    reg_policy, _ = simulate(pol, shapes, rounds=4, batch=2, seed=seed)
    reg_random, _ = simulate(RandomChooser(seed), shapes, rounds=4, batch=2, seed=seed)
    assert reg_policy.mean() < 0.8 * reg_random.mean(), (reg_policy.mean(), reg_random.mean())
    # it learns: the last round's picks are better than the first round's
    assert reg_policy[-1].mean() < reg_policy[0].mean()
    # held-out shapes never measured: the first pick (argmax of predicted reward) beats random
    held = [s for s in grid_shapes(40, 100 + seed) if s.name not in {x.name for x in shapes}][:15]
    first = np.mean([optimum(s) - true_reward(s, (c := FirstPick(pol.p, PAIRED_M2).pick(s)).family, c.knobs)
                     for s in held])
    rand = np.mean([optimum(s) - np.mean([true_reward(s, f, k) for f, k in CONFIGS]) for s in held])
    assert first < 0.7 * rand, (first, rand)


def test_the_greedy_pick_on_a_fresh_shape_follows_what_was_learnt():
    """Before any data every prediction is 0; after observations the greedy pick follows them."""
    pol = Learner(FAMS, ("nn",), settings=LearnerSettings(epsilon=0.0))
    s = Shape(1024, 1024, 1024)
    good = Candidate("tiled", {"tile": 128, "split": 1, "stages": 3, "raster": 1}, "")
    bad = Candidate("tiled", {"tile": 16, "split": 16, "stages": 2, "raster": 0}, "")
    for _ in range(5):
        pol.observe(s, [Outcome(good, "nn", "ok", 0.5, None, None), Outcome(bad, "nn", "ok", -0.8, None, None)])
    mean, std = pol.predict(Shape(1024, 2048, 1024), [good, bad])
    assert mean[0, 0] > 0.2 > -0.2 > mean[1, 0]
    assert (std > 0).all()
    ctx = SearchContext(Shape(2048, 1024, 1024), 1, set(), seed=3)
    (pick,) = pol.propose(Shape(2048, 1024, 1024), ctx)
    assert pick.origin == "policy:greedy" and pick.knobs["tile"] in (64, 128, 256)
    why = pol.explain(Shape(2048, 1024, 1024), good, "nn")
    assert why and any("tiled.tile=128" in name for name, _ in why)


def test_checkpoint_round_trip_keeps_predictions_and_seen_rows(tmp_path):
    """save/load must restore the posterior, the rows seen and the elites exactly."""
    pol = Learner(FAMS, ("nn",))
    s = Shape(256, 128, 4096)
    c = Candidate("tiled", {"tile": 32, "split": 4, "stages": 3, "raster": 0}, "tiled:x")
    pol.observe(s, [Outcome(c, "nn", "ok", 0.3, None, None, row_id="r1")])
    pol.observe(s, [Outcome(c, "nn", "ok", 0.3, None, None, row_id="r1")])  # same row: ignored
    assert pol.model.n == 1
    pol.save(tmp_path / "p.npz")
    other = Learner(FAMS, ("nn",), seed=5)
    assert other.load(tmp_path / "p.npz")
    assert other.seen == {"r1"} and other.history == pol.history and other.model.n == 1
    assert other.measured_on == pol.measured_on == {TILED.spec(c.knobs): {s.name: 0.3}}
    np.testing.assert_allclose(other.predict(s, [c])[0], pol.predict(s, [c])[0])
    # a checkpoint of another family set is refused (and leaves the policy untouched)
    third = Learner({"tiled": TILED}, ("nn",))
    assert not third.load(tmp_path / "p.npz") and third.model.n == 0


def test_pool_excludes_measured_and_broken_builds_and_unsupported():
    pol = Learner(FAMS, ("nn",))
    s = Shape(64, 64, 64)
    bad = Candidate("tiled", {"tile": 64, "split": 2, "stages": 3, "raster": 0},
                    TILED.spec({"tile": 64, "split": 2, "stages": 3, "raster": 0}))
    pol.observe(s, [Outcome(bad, "nn", "error", -1.0, None, None, failure="compile")])
    pool = pol.pool(Shape(128, 128, 128), exclude={TILED.spec(TILED.defaults())}, seed=1)
    specs = {c.spec for c in pool}
    assert TILED.spec(TILED.defaults()) not in specs
    # the raster=1 twin shares the broken binary: excluded on every shape
    assert not any(c.family == "tiled" and (c.knobs["tile"], c.knobs["split"], c.knobs["stages"]) == (64, 2, 3)
                   for c in pool)
    assert all(FAMS[c.family].is_valid(c.knobs) for c in pool)


def test_shape_features_and_geometry():
    """Wave features: 1024x1024 has 64 tiles of 128x128 (< one wave of 132 SMs)."""
    f = shape_features(Shape(1024, 1024, 1024))
    assert f.shape == (8,) and np.all(np.abs(f) <= 1.5)
    assert math.isclose(f[5], 64 / 132)
    g = geometry(Shape(256, 128, 16384), {"bm": 64, "bn": 64, "splits": 16})
    assert math.isclose(g[1], 128 / 132)  # 8 tiles x 16 splits = 128 CTAs: 97% of one wave
    assert geometry(Shape(8, 8, 8), {"x": 1}) is None
    # splitk_tma names its split count `slices`: same CTA count as the other families' spellings
    assert geometry(Shape(256, 128, 16384), {"tile_m": 64, "tile_n": 64, "slices": 16}) == g
    # tile fill: a 128-wide tile on N = 64 computes half zeros; 64x64 tiles fill this shape
    assert math.isclose(geometry(Shape(8192, 64, 2048), {"tile_m": 64, "tile_n": 128})[3], 0.5)
    assert geometry(Shape(8192, 64, 2048), {"tile_m": 64, "tile_n": 64})[3] == 1.0
    assert math.isclose(geometry(Shape(100, 100, 64), {"bm": 64, "bn": 64})[3], 100 * 100 / (128 * 128))
    # split-K partials: none without splits; 16 fp32 slices of a 256x128 output against 8.5 MB of operands
    assert geometry(Shape(256, 128, 16384), {"bm": 64, "bn": 64})[4] == 0.0
    assert math.isclose(g[4], math.log2(1 + 15 * 256 * 128 * 8 / (2 * (256 * 16384 + 16384 * 128 + 256 * 128))))
    fs = FeatureSpace(FAMS, ("nn", "tn"))
    x = fs.features(Shape(64, 64, 64), "tiled", TILED.defaults(), "tn")
    assert x.shape == (fs.dim,) and len(fs.names()) == fs.dim
    # a swap family tiles the transposed problem: tile_m along N, tile_n along M. A 64x128 swap tile
    # on M = 64 is half zeros (4 tiles along N = 256); read along M x N it would look full (2 tiles)
    swap_tile = {"tile_m": 64, "tile_n": 128, "slices": 4}
    assert geometry(Shape(64, 256, 16384), swap_tile)[3] == 1.0
    assert math.isclose(geometry(Shape(64, 256, 16384), swap_tile, swap=True)[3], 0.5)
    assert geometry(Shape(64, 256, 16384), swap_tile, swap=True) == geometry(Shape(256, 64, 16384), swap_tile)
    # the one-wave slice count (-1) is known before the run: its geometry is that of the count it resolves to
    # (32 tiles of the transposed 2048 x 64 problem -> 4 slices; 1 x 16 tiles as given -> 8)
    one_wave, s = {"tile_m": 64, "tile_n": 128, "slices": -1}, Shape(64, 2048, 8192)
    assert geometry(s, one_wave, swap=True) == geometry(s, {**one_wave, "slices": 4}, swap=True)
    assert geometry(s, one_wave) == geometry(s, {**one_wave, "slices": 8}) != geometry(s, {**one_wave, "slices": 4})


def test_feature_space_reads_swap_families_tiles_along_n_by_m():
    """The policy's features take the swap families' geometry on the transposed problem (the
    families say so with ``swap_ab``), and everyone else's on the problem as given."""
    from kernels_search.families import ALL

    fams = {n: ALL[n] for n in ("hopper", "splitk_tma", "splitk_tma_swap", "hopper_swap")}
    fs = FeatureSpace(fams, ("nn",))
    assert fs.swapped == {"splitk_tma_swap", "hopper_swap"}
    shape, k = Shape(64, 256, 16384), ALL["splitk_tma_swap"].parse("tile_m=64:tile_n=128:slices=4")
    fill = fs.names().index("geom_tile_fill")
    assert math.isclose(fs.features(shape, "splitk_tma_swap", k, "nn")[fill], 0.5)
    assert fs.features(shape, "splitk_tma", ALL["splitk_tma"].parse("tile_m=64:tile_n=128:slices=4"), "nn")[fill] == 1.0


def test_new_build_cap_limits_distinct_new_binaries_per_batch():
    """With max_new_builds=1 a batch needs at most one new binary (runtime-knob twins share it);
    once a binary is built, variants of it are free to pick."""
    pol = Learner({"tiled": TILED}, ("nn",), settings=LearnerSettings(max_new_builds=1))
    s = Shape(512, 512, 512)
    picks = pol.propose(s, SearchContext(s, 4, set(), seed=1))
    keys = {pol.compile_key(c.family, c.knobs) for c in picks}
    assert len(keys) == 1 and len(picks) == 2  # raster 0 and 1 of one binary (its runtime twin joins the pool)
    pol.observe(s, [Outcome(c, "nn", "ok", 0.1, None, None) for c in picks])
    assert keys <= pol.built
    more = pol.propose(s, SearchContext(s, 4, {c.spec for c in picks}, seed=2))
    new = {pol.compile_key(c.family, c.knobs) for c in more} - pol.built
    assert len(new) <= 1 and more
    free = Learner({"tiled": TILED}, ("nn",))
    assert len({free.compile_key(c.family, c.knobs) for c in free.propose(s, SearchContext(s, 4, set(), seed=1))}) > 1


def test_sync_reads_rows_recorded_before_a_knob_existed():
    """A kernel DB outlives knob additions (splitk gained ``kslices``): a row without the new knob
    replays as the knob's default, the behaviour it was measured with, instead of failing."""
    import json
    from types import SimpleNamespace

    import pandas as pd

    from kernels_search.families import ALL

    fam = ALL["splitk"]
    old = {k: v for k, v in fam.defaults().items() if k != "kslices"}
    row = dict(is_baseline=False, origin="policy", family="splitk", config=json.dumps(old),
               method="splitk:bm=64", shape="256_128_16384", layout="nn", status="ok", reward=0.2,
               status_reason="", failure="", row_id="r1")
    pol = Learner({"splitk": fam}, ("nn",))
    assert pol.sync(SimpleNamespace(df=pd.DataFrame([row]))) == 1
    assert pol.model.n == 1 and pol.compile_key("splitk", fam.complete(old)) in pol.built
    assert fam.complete(old)["kslices"] == 1 and fam.complete({"kslices": 2})["kslices"] == 2
    assert "gone" not in fam.complete({"gone": 1, "bm": 32}) and fam.complete({"bm": 32})["bm"] == 32


def test_a_config_recorded_under_its_old_spec_name_counts_as_measured(tmp_path):
    """After splitk gained ``kslices``, its canonical spec names include ``kslices=1``; the rows
    of a DB written before carry the old names. Both must exclude the config from new proposals."""
    import json

    from kernels_search.families import ALL
    from kernels_search.search.db import KernelDB
    from kernels_search.search.loop import measured_specs

    fam = ALL["splitk"]
    old = {k: v for k, v in fam.defaults().items() if k != "kslices"}
    old_name = "splitk:" + ",".join(f"{k}={v}" for k, v in old.items())
    db = KernelDB(tmp_path / "db")
    db.append([dict(is_baseline=False, search_id="s", call_id="c", round=0, gpu_name="NVIDIA H200",
                    shape="256_128_16384", m=256, n=128, k=16384, layout="nn", method=old_name, family="splitk",
                    config=json.dumps(old), status="ok")])
    got = measured_specs(db, Shape(256, 128, 16384), "NVIDIA H200", {"splitk": fam})
    assert got == {old_name, fam.spec(fam.defaults())} and old_name != fam.spec(fam.defaults())
    assert measured_specs(db, Shape(256, 128, 16384), "NVIDIA H200", {}) == {old_name}


def test_pool_holds_every_config_of_a_small_family_and_samples_a_large_one():
    """splitk_tma (270 valid configs) is ranked whole by the model; hopper (a space far beyond
    enumeration) and smalltile (~720 valid, more than 5 x 64) contribute a random sample of
    `random_per_family` configs each, so no family floods the pool."""
    from kernels_search.families import ALL

    fams = {"splitk_tma": ALL["splitk_tma"], "hopper": ALL["hopper"], "smalltile": ALL["smalltile"]}
    pol = Learner(fams, settings=LearnerSettings(random_per_family=64))
    shape = Shape(256, 128, 16384)
    pool = pol.pool(shape, seed=1)
    tma = {c.spec for c in pool if c.family == "splitk_tma"}
    every = pol._valid_configs("splitk_tma")
    assert every is not None and 150 < len(every) <= 5 * 64
    assert tma == {ALL["splitk_tma"].spec(k) for k in every}  # K=16384 takes every slice count
    assert "splitk_tma:tile_m=64,tile_n=64,cluster_m=2,cluster_n=2,schedule=pingpong,slices=8" in tma
    assert "splitk_tma:tile_m=64,tile_n=64,cluster_m=2,cluster_n=2,schedule=pingpong,slices=-1" in tma
    assert pol._valid_configs("hopper") is None and len(pol._valid_configs("smalltile")) > 5 * 64
    for fam in ("hopper", "smalltile"):
        assert 0 < sum(c.origin == "policy:random" for c in pool if c.family == fam) <= 64


class PresetTiled(Tiled):
    def supports(self, k, problem):
        from harness.method import SUPPORTED, unsupported

        return unsupported("16 splits need K >= 1024") if k["split"] == 16 and problem.k < 1024 else SUPPORTED


def test_initial_design_measures_supported_presets_first_then_the_model_picks():
    """A shape's first batch is every preset that supports it (however many: the batch size does
    not cut it); once they are measured the model picks ``n``; design=False skips the design."""
    import dataclasses

    tiled = dataclasses.replace(PresetTiled(name="tiled", knobs=TILED.knobs),
                                presets=("tile=128:stages=3", "tile=32:split=16", "tile=16:split=4"))
    other = dataclasses.replace(OTHER, presets=("x=1:y=1",))
    fams = {"tiled": tiled, "other": other}
    pol = Learner(fams, ("nn",), settings=LearnerSettings(epsilon=0.0))
    presets = {tiled.spec(tiled.parse(p)) for p in tiled.presets} | {other.spec(other.parse("x=1:y=1"))}
    assert pol.preset_specs == presets
    small_k = Shape(256, 256, 512)  # the 16-split preset does not support K=512
    first = pol.propose(small_k, SearchContext(small_k, 2, set(), seed=1))
    assert {c.spec for c in first} == presets - {tiled.spec(tiled.parse("tile=32:split=16"))}
    assert {c.origin for c in first} == {"policy:design"}
    for c in first:
        pol.observe(small_k, [Outcome(c, "nn", "ok", true_reward(small_k, c.family, c.knobs), None, None)])
    second = pol.propose(small_k, SearchContext(small_k, 2, {c.spec for c in first}, seed=2))
    assert len(second) == 2 and not {c.spec for c in second} & presets
    # most of the batch stays next to the shape's best configs (one knob changed), the rest is global
    assert [c.origin for c in second] == ["policy:local-greedy", "policy:thompson"]
    assert second[0].spec in pol.local_specs(small_k)
    # another shape gets its own design batch; without the design the model picks from the start
    big_k = Shape(256, 256, 8192)
    assert {c.spec for c in pol.propose(big_k, SearchContext(big_k, 2, set(), seed=3))} == presets
    plain = Learner(fams, ("nn",), settings=LearnerSettings(design=False))
    assert len(plain.propose(big_k, SearchContext(big_k, 2, set(), seed=3))) == 2


def test_local_picks_change_one_knob_of_the_shapes_best_configs():
    """The trust region: the first ``local_share`` of a batch are one-knob mutations of the shape's
    ``local_elites`` best measured configs (not of worse ones, not of other shapes' configs);
    the rest come from the whole pool; local_share=0 turns it off."""
    s = Shape(1024, 1024, 1024)
    measured = [{"tile": 128, "split": 1, "stages": 3, "raster": 1}, {"tile": 64, "split": 1, "stages": 2, "raster": 0},
                {"tile": 16, "split": 16, "stages": 2, "raster": 0}]
    for share, n_local in ((0.5, 2), (0.75, 3), (0.0, 0)):
        pol = Learner(FAMS, ("nn",), settings=LearnerSettings(epsilon=0.0, design=False, local_share=share))
        for knobs, r in zip(measured, (0.4, 0.2, -0.5)):
            pol.observe(s, [Outcome(Candidate("tiled", knobs, TILED.spec(knobs)), "nn", "ok", r, None, None)])
        pol.observe(Shape(64, 64, 64),
                    [Outcome(Candidate("other", {"x": 1, "y": 1}, "o"), "nn", "ok", 0.9, None, None)])
        batch = pol.propose(s, SearchContext(s, 4, {TILED.spec(k) for k in measured}, seed=5))
        assert len(batch) == 4
        local = [c for c in batch if c.origin.startswith("policy:local")]
        assert len(local) == n_local and batch[:n_local] == local
        for c in local:
            assert c.family == "tiled"
            assert min(sum(c.knobs[k] != m[k] for k in m) for m in measured[:2]) == 1, c.knobs


def test_built_in_family_presets_are_valid_distinct_configs():
    """Every built-in family's presets parse into valid configs, and no two name the same kernel."""
    from kernels_search.families import ALL

    for fam in ALL.values():
        specs = [fam.spec(k) for k in fam.preset_configs()]
        assert fam.presets and len(set(specs)) == len(specs), fam.name
        assert all(fam.is_valid(k) for k in fam.preset_configs())




def test_a_swap_knob_reads_the_tile_along_n_by_m():
    """A config whose ``swap`` knob is set (splitk_dsmem) runs C^T = B A^T: its launch geometry is the transposed
    problem's, as a swap family's is. On 1_4096_4096 a 64x8 swapped tile holds one row of 8 (a fill of 1/8); read
    along M x N it would hold one row of 64 (1/64)."""
    from harness.problem import Shape
    from kernels_search.families import ALL
    from kernels_search.search.features import FeatureSpace, geometry, runs_swapped

    space = FeatureSpace(ALL)
    fam = ALL["splitk_dsmem"]
    plain, swapped = fam.parse("bn=8"), fam.parse("swap=1,bn=8")
    assert not space.is_swapped("splitk_dsmem", plain) and space.is_swapped("splitk_dsmem", swapped)
    assert runs_swapped("splitk_tma_swap", {}, space.swapped)
    shape = Shape(1, 4096, 4096)
    fill = 3  # geometry's tile fill
    assert geometry(shape, swapped, swap=True)[fill] > geometry(shape, swapped, swap=False)[fill]
