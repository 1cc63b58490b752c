"""The evaluator sandbox on the CPU: hangs and crashes cost one method, never the run."""

import pytest
from typer.testing import CliRunner

from harness import env as envmod
from harness.cli import app
from harness.problem import Shape
from harness.results import read_results
from harness.runner import CompareSettings
from harness.sandbox import Evaluator, Timeouts, timing_for

FAST = Timeouts(start_s=120, prepare_s=4, run_s=4, timing_s=60)


@pytest.fixture(scope="module")
def evaluator():
    ev = Evaluator("cpu", envmod.collect("cpu"), plugins=["sandbox_plugins"], timeouts=FAST)
    yield ev
    ev.close()


def rows_by_method(groups):
    (rows, samples), = groups
    return {(r["method"], r["layout"]): r for r in rows}, samples


def settings(**kw):
    return CompareSettings(shapes=[], layouts=["nn"], budget_s=0.2, min_rounds=3, seed=1, **kw)


def test_hang_crash_and_raise_each_cost_only_their_method(evaluator):
    specs = ["torch", "t-good", "t-hang-call", "t-exit-call", "t-segv-call", "t-raise-call", "t-hang-prepare"]
    groups = evaluator.evaluate_shape(Shape(32, 48, 64), specs, settings(), [("offline", "warm")], "run")
    rows, samples = rows_by_method(groups)
    assert rows[("torch", "nn")]["status"] == "ok" and rows[("t-good", "nn")]["status"] == "ok"
    assert rows[("torch", "nn")]["device_us_median"] > 0
    hang = rows[("t-hang-call", "nn")]
    assert hang["status"] == "error" and "timeout" in hang["status_reason"] and "gate" in hang["status_reason"]
    died = rows[("t-exit-call", "nn")]
    assert died["status"] == "error" and "worker died in gate (exit code 7)" in died["status_reason"]
    segv = rows[("t-segv-call", "nn")]
    assert segv["status"] == "error" and "signal 11" in segv["status_reason"]
    raised = rows[("t-raise-call", "nn")]  # an exception is an ordinary failure: no restart needed
    assert raised["status"] == "gate_failed" and "misaligned address" in raised["status_reason"]
    prep = rows[("t-hang-prepare", "nn")]
    assert prep["status"] == "error" and "timeout" in prep["status_reason"] and "prepare" in prep["status_reason"]
    assert evaluator.restarts >= 4
    assert {s["method"] for s in samples} == {"torch", "t-good"}


def test_worker_keeps_serving_after_failures(evaluator):
    groups = evaluator.evaluate_shape(Shape(8, 8, 8), ["torch", "t-good"], settings(), [("offline", "warm")], "run")
    rows, _ = rows_by_method(groups)
    assert all(r["status"] == "ok" for r in rows.values())


def test_cli_isolated_run_keeps_going_and_records_why(tmp_path):
    out = tmp_path / "r.parquet"
    res = CliRunner().invoke(app, ["compare", "--device", "cpu", "--plugin", "sandbox_plugins", "--methods",
                                   "torch,t-exit-call", "--layouts", "nn", "--shapes", "16_16_16,24_24_24",
                                   "--budget", "0.2", "--out", str(out)], catch_exceptions=False,
                                  env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "sandboxed worker" in res.output
    df = read_results(out).to_pandas()
    assert len(df) == 4
    assert (df[df.method == "torch"]["status"] == "ok").all()
    bad = df[df.method == "t-exit-call"]
    assert (bad["status"] == "error").all() and bad["status_reason"].str.contains("worker died").all()


def test_unknown_plugin_is_a_clear_error(tmp_path):
    res = CliRunner().invoke(app, ["compare", "--device", "cpu", "--plugin", "no_such_module_xyz",
                                   "--out", str(tmp_path / "r.parquet")])
    assert res.exit_code == 2 and "no_such_module_xyz" in res.output


def test_a_kernel_that_declines_at_run_time_is_unsupported_not_wrong(evaluator):
    groups = evaluator.evaluate_shape(Shape(16, 16, 16), ["torch", "t-decline-call"], settings(),
                                      [("offline", "warm")], "run")
    rows, _ = rows_by_method(groups)
    r = rows[("t-decline-call", "nn")]
    assert r["status"] == "unsupported" and "declined" in r["status_reason"]
    assert rows[("torch", "nn")]["status"] == "ok"


def test_the_sandbox_and_the_runner_share_the_evaluation_without_a_cycle():
    """The worker measures a shape through harness.evaluate, the public entry point, not through
    the runner: importing the sandbox loads no runner."""
    import subprocess
    import sys

    code = ("import sys, harness.sandbox\n"
            "assert 'harness.runner' not in sys.modules, 'harness.sandbox imports harness.runner'\n"
            "import harness.evaluate as e\n"
            "assert e.ShapeEvaluator.evaluate and 'harness.runner' not in sys.modules\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_stage_timeouts_scale_with_the_expected_call_and_keep_a_floor():
    t = Timeouts(floor_s=5.0)
    assert t.for_stage("gate") == t.run_s and t.for_stage("timing") == t.timing_s  # nothing measured yet
    assert t.for_stage("gate", 1e-5) == 5.0 and t.for_stage("anticheat", 1e-5) == 5.0  # a small shape
    assert t.for_stage("gate", 0.02) == pytest.approx(20.0)  # a 20 ms call: 1000 calls' worth
    assert t.for_stage("anticheat", 0.02) == t.run_s  # capped
    assert t.for_stage("prepare", 1e-5) == t.prepare_s  # a compile does not scale with the call
    s = CompareSettings(shapes=[], budget_s=5.0)
    assert t.for_stage("timing", 1e-5, timing_for(s, 8), 8) == pytest.approx(15.0)
    assert t.for_stage("timing", 1e-3, timing_for(s, 8), 8) == pytest.approx(800.0)


def test_a_hanging_call_is_killed_within_the_scaled_timeout_and_the_run_goes_on():
    """With the default caps (120 s per gate message), a call that sleeps on a small shape costs
    the floor, not the cap; the next shape is measured as usual."""
    import time

    with Evaluator("cpu", envmod.collect("cpu"), plugins=["sandbox_plugins"],
                   timeouts=Timeouts(floor_s=3.0)) as ev:
        t0 = time.monotonic()
        groups = ev.evaluate_shape(Shape(16, 24, 32), ["torch", "t-good", "t-hang-call"], settings(),
                                   [("offline", "warm")], "run")
        took = time.monotonic() - t0
        rows, _ = rows_by_method(groups)
        hang = rows[("t-hang-call", "nn")]
        assert hang["status"] == "error" and "no progress for 3 s in gate" in hang["status_reason"], hang
        assert rows[("torch", "nn")]["status"] == "ok" and rows[("t-good", "nn")]["status"] == "ok"
        assert took < 40, took  # one floor for the hang, then the shape again without it
        rows, _ = rows_by_method(ev.evaluate_shape(Shape(8, 8, 8), ["torch", "t-good"], settings(),
                                                   [("offline", "warm")], "run"))
        assert all(r["status"] == "ok" for r in rows.values())


def test_a_timing_group_longer_than_the_timeout_survives_while_its_rounds_progress():
    """The worker reports each offline round, so the timing wait bounds one round: a group whose
    rounds of 0.3 s calls take longer than the whole wait is measured, not killed."""
    import time

    class Tight(Timeouts):
        TIMING_CALLS = 2  # the wait is then four calls' worth: 1.2 s (a round: two or three calls)

    t = Tight(floor_s=0.5)
    s = CompareSettings(shapes=[], layouts=["nn"], budget_s=0.01, min_rounds=3, seed=1, qps=1e6)
    assert t.for_stage("timing", 0.3, timing_for(s, 2), 2) == pytest.approx(1.2)
    with Evaluator("cpu", envmod.collect("cpu"), plugins=["sandbox_plugins"], timeouts=t) as ev:
        t0 = time.monotonic()
        groups = ev.evaluate_shape(Shape(16, 24, 32), ["torch", "t-slow-baseline"], s, [("offline", "warm")], "run")
        took = time.monotonic() - t0
    rows, _ = rows_by_method(groups)
    slow = rows[("t-slow-baseline", "nn")]
    assert slow["status"] == "ok" and slow["rounds"] >= 3, slow
    assert took > 3 * 0.6, took  # three rounds of (at least) a batch and a host call of 0.3 s each
