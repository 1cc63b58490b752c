"""lab/first_picks.py's ``/prior`` rules and lab/prior_cv.py: a prior folded in for a study's picks,
held-out shapes in it refused or left out."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.problem import Shape
from lab import first_picks
from test_search_prior import A, B, FAM, row, write
from test_search_prior import learner as policy


def test_the_prior_changes_the_pick_and_held_out_shapes_in_it_are_refused(tmp_path):
    """The search measured A on every shape and B on none near the held-out shape; the prior
    measured B well there. Without the prior the rule can only pick A; with it, B. A held-out
    shape that the prior measured is not fresh: refused."""
    pol = policy()
    from kernels_search.proposals import Candidate, Outcome

    for e in range(6, 12):
        pol.observe(Shape(2 ** e, 2 ** e, 2 ** e), [Outcome(Candidate("f", FAM.parse(A.partition(":")[2]), A), "nn", "ok", 0.0, None, None)])
    rows = []
    for m in (1024, 2048, 4096):
        name = f"{m}_{m}_2048"
        rows += [row("r", name, "cublaslt-autotune", "nn", 10.0, baseline=True), row("r", name, A, "nn", 12.0),
                 row("r", name, B, "nn", 7.0)]
    f = write(tmp_path / "p.parquet", rows)
    held = [Shape(3072, 3072, 2048)]
    empty = type("DB", (), {"df": pd.DataFrame()})()
    with_prior = first_picks.with_prior_policy(pol, [f], held)
    picks = first_picks.picks_by_rule(pol, empty, held, ["cautious", "cautious/prior"], {"": with_prior})
    assert picks["cautious"][held[0].name] == A and picks["cautious/prior"][held[0].name] == B
    assert B not in pol.measured_on  # the search's own policy is untouched
    # /prior=LIST: that file's policy for that rule alone, beside the default prior's (here none)
    by_list = first_picks.picks_by_rule(pol, empty, held, ["cautious", f"cautious/prior={f}"], {str(f): with_prior})
    assert by_list == {"cautious": picks["cautious"], f"cautious/prior={f}": picks["cautious/prior"]}
    with pytest.raises(ValueError, match="needs the policy with the prior"):
        first_picks.picks_by_rule(pol, empty, held, ["cautious/prior=other.txt"], {"": with_prior, str(f): with_prior})
    with pytest.raises(ValueError, match="1024_1024_2048 are in the prior: they are not fresh"):
        first_picks.with_prior_policy(pol, [f], [Shape(1024, 1024, 2048)])
    # --leave-out: such a shape is accepted and every row of it is dropped from the prior, the rest kept
    left = first_picks.with_prior_policy(pol, [f], [Shape(1024, 1024, 2048)], leave_out=True)
    assert set(left.measured_on[B]) == {"2048_2048_2048", "4096_4096_2048"}
    assert set(with_prior.measured_on[B]) == {"1024_1024_2048", "2048_2048_2048", "4096_4096_2048"}


def test_prior_cv_groups_files_sharing_a_shape_and_ranks_only_configs_with_near_evidence(tmp_path):
    """scripts/prior_cv.py: files that share a shape are one draw, except a later file on shapes all
    seen before (``remeasurements``); each file's speedups are against
    its own reference rows, best of layouts; ``pick`` with ``RULE/mN/nK`` lets only configs with
    near evidence compete, so a far config that measured better on the shape is not the pick."""
    from lab import prior_cv

    from kernels_search.proposals import Candidate, Outcome

    f1 = write(tmp_path / "1.parquet", [row("a", "64_64_64", "cublaslt-autotune", "nn", 10.0, baseline=True),
                                        row("a", "64_64_64", A, "nn", 8.0), row("a", "64_64_64", A, "tn", 5.0)])
    f2 = write(tmp_path / "2.parquet", [row("b", "64_64_64", "cublaslt-autotune", "nn", 9.0, baseline=True),
                                        row("b", "128_64_64", "cublaslt-autotune", "nn", 10.0, baseline=True),
                                        row("b", "128_64_64", B, "nn", 20.0)])
    f3 = write(tmp_path / "3.parquet", [row("c", "4096_64_64", "cublaslt-autotune", "nn", 10.0, baseline=True)])
    assert prior_cv.draws_of([f1, f2, f3]) == [[f1, f2], [f3]]
    # a later call on shapes all seen before (a study) is a re-measurement, which joins no draw;
    # order decides which file is the later one
    f4 = write(tmp_path / "4.parquet", [row("d", "4096_64_64", "cublaslt-autotune", "nn", 10.0, baseline=True),
                                        row("d", "64_64_64", "cublaslt-autotune", "nn", 10.0, baseline=True)])
    assert prior_cv.remeasurements([f1, f2, f3, f4]) == [f4]
    assert prior_cv.remeasurements([f4, f1, f2, f3]) == [f1, f3]  # f4 first: the others repeat its shapes
    assert prior_cv.measured_speedups([f1, f2]) == {"64_64_64": {A: 2.0}, "128_64_64": {B: 0.5}}
    # a shape with one measured config (a check of each shape's own pick) ranks nothing: not scored
    assert prior_cv.rankable({"64_64_64": {A: 2.0}, "128_64_64": {A: 0.9, B: 0.5}}) == {"128_64_64": {A: 0.9, B: 0.5}}
    pol = policy()
    near, far = [Shape(128, 256, 256), Shape(256, 128, 256), Shape(256, 256, 128)], [Shape(4096, 4096, 4096 * 2 ** i) for i in range(3)]
    for a_shape, b_shape in zip(near, far):  # A measured 1.0 from 256_256_256 (three shapes), B only far away
        pol.observe(a_shape, [Outcome(Candidate("f", FAM.parse(A.partition(":")[2]), A), "nn", "ok", 0.0, None, None)])
        pol.observe(b_shape, [Outcome(Candidate("f", FAM.parse(B.partition(":")[2]), B), "nn", "ok", 0.5, None, None)])
    measured = {A: 1.1, B: 1.5}
    assert prior_cv.pick(pol, "256_256_256", measured, first_picks.RuleSpec("cautious", 3, False, 2)) == (1.1, 1.1)
    assert prior_cv.pick(pol, "256_256_256", measured, first_picks.RuleSpec("cautious", 3, False))[1] == 1.5  # both compete without /n2
    assert prior_cv.pick(pol, "256_256_256", measured, first_picks.RuleSpec("cautious", 4, False)) is None  # neither has 4 shapes
