"""The time left in a run comes from the work left, not from a per-shape average."""

import pytest

from harness.problem import Shape
from harness.progress import Eta, WorkModel, format_duration

SMALL, MID, BIG = Shape(64, 64, 64), Shape(1024, 1024, 1024), Shape(4096, 4096, 4096)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_big_shape_left_weighs_its_flops_not_an_average():
    """Three small shapes in 1 s each, then 4096^3 on a 1 GFLOP/s CPU: an average would say ~1 s
    is left; the work says minutes."""
    model = WorkModel(flops_per_s=1e9, entries=2)
    clock = Clock()
    eta = Eta(model, [SMALL] * 1 + [Shape(64, 64, 65), Shape(64, 64, 66), BIG], clock=clock)
    for s in (SMALL, Shape(64, 64, 65), Shape(64, 64, 66)):
        eta.started(s)
        clock.t += 1.0
        eta.done(s)
    assert eta.remaining_s() > 100 * 1.0
    assert eta.remaining_s() == pytest.approx(model.shape_s(BIG) * eta.scale)


def test_the_estimate_is_rescaled_by_what_was_measured():
    model = WorkModel(flops_per_s=1e9, entries=1)
    clock = Clock()
    eta = Eta(model, [MID, BIG], clock=clock)
    assert eta.remaining_s() is None  # nothing measured yet: no figure rather than the bare model's
    eta.started(MID)
    clock.t += 3 * model.shape_s(MID)  # the machine is 3x slower than the model thought
    eta.done(MID)
    assert eta.scale == pytest.approx(3.0)
    assert eta.remaining_s() == pytest.approx(3 * model.shape_s(BIG))
    eta.started(BIG)
    clock.t += model.shape_s(BIG)
    assert eta.remaining_s() == pytest.approx(2 * model.shape_s(BIG))  # what is left of the shape in flight


def test_shapes_measured_side_by_side_share_the_work_left():
    """A scale-out run measures ``workers`` shapes at once: each shape's own time calibrates the
    model, and the work left is shared among the workers."""
    model = WorkModel(flops_per_s=1e9, entries=1)
    clock = Clock()
    eta = Eta(model, [MID, SMALL, BIG, Shape(64, 64, 65)], clock=clock, workers=2)
    eta.started(MID)
    eta.started(SMALL)
    clock.t += 2 * model.shape_s(MID)
    eta.done(MID)  # SMALL still in flight
    assert eta.scale == pytest.approx(2.0)
    left = 2 * model.shape_s(BIG) + 2 * model.shape_s(Shape(64, 64, 65))  # SMALL has used up its prediction
    assert eta.remaining_s() == pytest.approx(left / 2)
    eta.done(SMALL)
    assert eta.scale == pytest.approx((2 * model.shape_s(MID) + 2 * model.shape_s(MID))
                                      / (model.shape_s(MID) + model.shape_s(SMALL)))


def test_skipped_shapes_cost_nothing_and_teach_nothing():
    model = WorkModel(flops_per_s=1e9, entries=1)
    eta = Eta(model, [MID, BIG], clock=Clock())
    eta.skipped(BIG)
    assert eta.remaining_s() is None and eta.scale == 1.0 and list(eta.left) == [MID]


def test_the_model_follows_the_budget_and_the_rounds():
    fast = WorkModel(flops_per_s=1e15, entries=40, budget_s=5.0)
    assert fast.shape_s(SMALL) == pytest.approx(0.2 + 5.0, abs=0.01)  # rounds of 1 ms batches run to the budget
    capped = WorkModel(flops_per_s=1e15, entries=4, budget_s=5.0, max_rounds=200)
    assert capped.shape_s(SMALL) == pytest.approx(0.2 + 200 * 4 * 1e-3, abs=0.01)  # ... unless max_rounds ends it
    slow = WorkModel(flops_per_s=1e9, entries=2, budget_s=5.0)
    call = slow.call_s(BIG)
    assert slow.shape_s(BIG) == pytest.approx(0.2 + 2 * 3 * call + 3 * 2 * 2 * call)  # 3 rounds past the budget
    both = WorkModel(flops_per_s=1e15, entries=1, modes=("offline", "server"), caches=2, server_calls=50, qps=100)
    assert both.shape_s(SMALL) == pytest.approx(0.2 + 2 * 200 * 1e-3 + 2 * 50 / 100, rel=0.01)


def test_durations_read_as_rough_figures():
    assert [format_duration(s) for s in (42, 600, 4 * 3600, 3 * 86400)] == ["42 s", "10 min", "4.0 h", "3.0 days"]


def test_the_models_mirrors_match_the_measurement_settings():
    from harness import progress
    from harness.gate import DISTRIBUTIONS
    from harness.timing.offline import MIN_BUDGET_ROUNDS, OfflineSettings

    assert progress.GATE_DRAWS == len(DISTRIBUTIONS)
    assert progress.MIN_BUDGET_ROUNDS == MIN_BUDGET_ROUNDS
    assert progress.BATCH_S == OfflineSettings().target_batch_us / 1e6


def test_the_bar_prints_a_stage_naming_a_bracketed_kernel_file_as_it_is():
    """The stage line names methods, a --kernels-dir file among them: 'k[/v2]' is text, not a rich
    closing tag (which raised MarkupError mid-run)."""
    import io

    from rich.console import Console

    from harness.cli import _RichReporter, _progress_bar

    out = io.StringIO()
    eta = Eta(WorkModel(flops_per_s=1e9, entries=1), [SMALL], clock=Clock())
    with _progress_bar(eta, Console(file=out, force_terminal=True, width=200)) as bar:
        reporter = _RichReporter(bar, 1, eta)
        reporter.shape_started(0, 1, SMALL)
        reporter.stage("anti-cheat k[/v2] [bold] tn")
        bar.refresh()
    assert "anti-cheat k[/v2] [bold] tn" in out.getvalue()
