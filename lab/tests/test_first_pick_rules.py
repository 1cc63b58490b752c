"""lab/first_pick_rules.py: the first-pick rules kept for studies (model, cautious, neighbours, geopaired),
through the product's rule registry."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.problem import Shape
from kernels_search.search.first_pick import RULES, FirstPick
from kernels_search.search.learner import Learner
from kernels_search.proposals import Candidate, Outcome
from kernels_search.search.settings import LearnerSettings
from lab import first_pick_rules
from test_search_learner import FAMS, PAIRED_M2, TILED

NO_ELITES = LearnerSettings(elites=0)


def rule(name: str):
    return replace(PAIRED_M2, rule=name)


def test_the_lab_rules_are_registered_with_their_ids():
    assert {"model", "cautious", "neighbours", "geopaired"} <= set(RULES)
    lr = Learner(FAMS, ("nn",))
    ids = {name: FirstPick(lr, rule(name)).id("s", 10) for name in ("model", "cautious", "neighbours", "geopaired")}
    assert ids == {"model": "s-first-pick-m2-c10", "cautious": "s-first-pick-lcb1-m2-c10",
                   "neighbours": "s-first-pick-nb-m2-c10", "geopaired": "s-first-pick-gp0.3-pr1s1-lcb1-m2-c10"}


def test_first_pick_takes_the_config_best_on_the_nearest_shapes():
    """The neighbour rule reads each config's record on the shapes nearest the held-out one (best of
    layouts): a config that wins only on mid-size cubes is picked for a mid-size cube, the one that
    is steady everywhere for a large one, and a config measured only on far shapes is not picked
    however well it did there. The linear model's argmax cannot fit the band and does not pick the
    band config for the mid-size cube."""
    band = {"tile": 64, "split": 1, "stages": 3, "raster": 0}
    steady = {"tile": 32, "split": 1, "stages": 2, "raster": 0}
    tiny = {"tile": 16, "split": 1, "stages": 2, "raster": 0}
    lr = Learner(FAMS, ("nn", "tn"), NO_ELITES)
    measured = [Shape(2 ** e, 2 ** e, 2 ** e) for e in (6, 7, 8, 9, 11, 12, 13, 14)]  # not 1024^3
    measured += [Shape(1024, 1024, 512), Shape(1024, 1024, 2048)]
    for s in measured:
        in_band = all(512 <= d <= 2048 for d in (s.m, s.n, s.k))
        outs = [Outcome(Candidate("tiled", steady, TILED.spec(steady)), "nn", "ok", 0.1, None, None),
                # the band config is measured poorly in nn and well in tn: its value is the best layout
                Outcome(Candidate("tiled", band, TILED.spec(band)), "nn", "ok", -0.5, None, None),
                Outcome(Candidate("tiled", band, TILED.spec(band)), "tn", "ok", 0.3 if in_band else -0.3, None, None)]
        if s.m <= 128:  # a config excellent on the two smallest shapes only: no evidence near mid or large
            outs.append(Outcome(Candidate("tiled", tiny, TILED.spec(tiny)), "nn", "ok", 0.9, None, None))
        lr.observe(s, outs)
    nb, model = FirstPick(lr, rule("neighbours")), FirstPick(lr, rule("model"))
    mid, large = Shape(1024, 1024, 1024), Shape(16384, 16384, 8192)
    assert first_pick_rules.neighbour_value(nb, TILED.spec(tiny), mid)[1] < first_pick_rules.MIN_WEIGHT
    assert nb.pick(mid).spec == TILED.spec(band)
    assert nb.pick(large).spec == TILED.spec(steady)
    assert model.pick(mid).spec != TILED.spec(band)


def test_cautious_first_pick_prefers_evidence_to_an_extrapolated_guess():
    """The cautious rule ranks by mean - caution x posterior std (best layout). A config measured on
    two small shapes only, where it was excellent, is the model's argmax on a large shape far from
    them (its additive knob effects carry the small shapes' reward over) but is uncertain there; the
    config measured steady on every shape is certain. With caution 0 the rule is the model's argmax."""
    steady = {"tile": 32, "split": 1, "stages": 2, "raster": 0}
    far = {"tile": 128, "split": 4, "stages": 3, "raster": 1}
    lr = Learner(FAMS, ("nn",), NO_ELITES)
    measured = [Shape(2 ** a, 2 ** b, 2 ** c) for a, b, c in
                ((6, 6, 6), (6, 7, 8), (8, 9, 10), (10, 10, 10), (11, 12, 9), (12, 12, 12), (13, 11, 14), (14, 14, 12))]
    for i, s in enumerate(measured):
        outs = [Outcome(Candidate("tiled", steady, TILED.spec(steady)), "nn", "ok", 0.15, None, None)]
        if i < 2:
            outs.append(Outcome(Candidate("tiled", far, TILED.spec(far)), "nn", "ok", 0.6, None, None))
        lr.observe(s, outs)
    large = Shape(16384, 8192, 16384)
    cands = [Candidate("tiled", k, TILED.spec(k)) for k in (steady, far)]
    mu, sd = lr.predict(large, cands)
    assert mu[1, 0] > mu[0, 0] and sd[1, 0] > 2 * sd[0, 0]  # the far config: higher guess, less sure
    assert FirstPick(lr, rule("model")).pick(large).spec == TILED.spec(far)
    assert FirstPick(lr, rule("cautious")).pick(large).spec == TILED.spec(steady)
    reckless = FirstPick(lr, replace(rule("cautious"), caution=0.0))
    assert reckless.pick(large).spec == TILED.spec(far)
    # a held-out check is read back only under the rule (and caution) that picked it
    ids = {FirstPick(lr, rule(r)).id("s", 10) for r in ("model", "cautious")} | {reckless.id("s", 10)}
    assert len(ids) == 3


def test_geopaired_first_pick_weighs_evidence_by_how_alike_the_config_launches():
    """Off the grid a shape's nearest measured shapes may launch a config differently. On
    1536_1536_4096 the 128x128 tile ``a`` runs 144 CTAs (55 % of two waves); on the three nearest
    measured shapes it fills one or two waves (97 %) and beats the 64x64 tile ``b`` by 0.1, while on
    two shapes with the target's M and N (K 2x away), where both launch as on the target, ``b``
    wins by 0.1. The paired rule reads distance only and ranks ``a`` first; the geometry-weighted
    one trusts the alike launches and ranks ``b`` first. Where every shape launches both alike, the
    two rules agree."""
    from kernels_search.family import Family, Knob
    from kernels_search.search.features import launch, launch_mismatch

    sq = Family(name="sq", knobs=(Knob("tile_m", (64, 128), 64), Knob("tile_n", (64, 128), 64)))
    a, b = {"tile_m": 128, "tile_n": 128}, {"tile_m": 64, "tile_n": 64}
    target = Shape(1536, 1536, 4096)
    unlike = [Shape(2048, 2048, 4096), Shape(2048, 1024, 4096), Shape(1024, 2048, 4096)]
    alike = [Shape(1536, 1536, 2048), Shape(1536, 1536, 8192)]
    assert launch_mismatch(launch(target, a), launch(unlike[0], a)) > 0.4
    assert launch_mismatch(launch(target, a), launch(alike[0], a)) == 0.0
    cands = [Candidate("sq", k, sq.spec(k)) for k in (a, b)]

    def values(name, rows):
        lr = Learner({"sq": sq}, ("nn",), NO_ELITES)
        for s, ra, rb in rows:
            lr.observe(s, [Outcome(c, "nn", "ok", r, None, None) for c, r in zip(cands, (ra, rb))])
        fp = FirstPick(lr, rule(name))
        if name == "geopaired":
            return first_pick_rules.geopaired_values(fp, target, cands, prior=np.zeros(2))
        return fp.paired_values(target, cands, np.zeros(2))

    rows = [(s, 0.1, 0.0) for s in unlike] + [(s, -0.1, 0.0) for s in alike]
    assert values("paired", rows)[0] > values("paired", rows)[1]
    assert values("geopaired", rows)[1] > values("geopaired", rows)[0]
    only_alike = [(s, -0.1, 0.0) for s in alike]
    assert np.allclose(values("paired", only_alike), values("geopaired", only_alike))


def test_an_unregistered_rule_name_is_refused_before_the_lab_registers_it():
    with pytest.raises(ValueError, match="first-pick rule 'nope'"):
        FirstPick(Learner(FAMS, ("nn",)), rule("nope"))
