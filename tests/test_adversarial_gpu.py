"""GPU: every adversarial kernel (tests/adversarial) is caught by the right check, with the right
reason, and the honest control passes everything.

Why: the gate and the anti-cheat checks are only as good as the cheats they have been shown to
catch. Each kernel here is real CUDA behind our C ABI, loaded the way a searched kernel is
(build cache + ctypes), cheating in exactly one way; ``tests.adversarial.EXPECTED`` says which
check must catch it. The control (the same kernel without the cheat) must pass the gate and
every anti-cheat check, or a "catch" could be the check misfiring on any kernel.

``hang`` and ``illegal_address`` kill whatever process runs them (a spinning kernel never
returns; an illegal address leaves the CUDA context dead), so they only ever run inside the
evaluator sandbox (harness.sandbox), which must time out / restart its worker, report an
``error`` row for the culprit and finish the shape for everyone else. The sandbox tests also run
the whole suite through the product's own pipeline (runner: gate, anti-cheat, timing).
"""

from __future__ import annotations

import re
from functools import partial

import pytest
import torch

import sys
from pathlib import Path

# The suite is the plug-in module ``tests.adversarial`` (a sandbox worker imports it by that name):
# the repository root must be importable however pytest was started.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import tests.adversarial as adv  # noqa: E402
from harness.anticheat import run_anticheat
from harness.gate import GateCandidate, run_gate
from harness.method import PrepareContext
from harness.problem import Problem, Shape
from harness.tensors import timing_sets
from harness.timing import time_candidates

pytestmark = pytest.mark.gpu

IN_PROCESS = [s for s, e in adv.EXPECTED.items() if e.stage != "sandbox"]
SANDBOX_ONLY = [s for s, e in adv.EXPECTED.items() if e.stage == "sandbox"]
GATE_EVADERS = {"side_stream", "skip_repeat"}  # correct values on every gate draw: only timing sees them


def _shape(name: str) -> Shape:
    return Shape(*map(int, name.split("_")))


def _prepare(method, problem: Problem):
    (st,) = timing_sets(problem, "cuda", 1, seed=0)
    ins = (st.a, st.b, st.c)
    return method.prepare(problem, PrepareContext("cuda", ins, partial(time_candidates, inputs=ins, device="cuda")))


def _anchor(layout):
    def fn(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)
    return fn


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("stem", IN_PROCESS)
def test_caught_by_the_right_check(stem, layout):
    exp = adv.EXPECTED[stem]
    problem = Problem(_shape(exp.shape), layout)
    method = adv.method(stem)
    prep = _prepare(method, problem)
    gate = run_gate(problem, [GateCandidate("torch", _anchor(layout), anchor=True), GateCandidate(stem, prep.fn)],
                    "cuda", seed=2026)
    assert gate["torch"].passed, gate["torch"].reason
    g = gate[stem]
    if exp.stage == "gate":
        assert not g.passed, f"{stem} passed the gate"
        assert exp.matches(g.reason), f"{stem}: caught for another reason: {g.reason}"
        return
    if stem == "control" or stem in GATE_EVADERS:
        assert g.passed, f"{stem} failed the gate: {g.reason}"
    elif not g.passed:  # caught early by the gate; the anti-cheat check must still catch it below
        assert exp.or_gate and exp.or_gate in g.reason, f"{stem}: gate failed for another reason: {g.reason}"
    report = run_anticheat(problem, prep.fn, "cuda", prep.capturable,
                           make_probe_fn=lambda p: _prepare(method, p).fn, seed=7)
    findings = {f.check: f for f in report.findings}
    figures = report.figures()
    if exp.stage == "none":
        assert report.passed, f"control flagged: {report.reason} {figures}"
        return
    f = findings[exp.stage]
    assert not f.passed, f"{stem} passed {exp.stage}: {figures}"
    assert not f.skipped
    assert exp.matches(f.reason), f"{stem}: {exp.stage} failed for another reason: {f.reason}"


def test_control_side_stream_check_really_measured():
    """The control's side-stream pass must come from a measurement, not from the check skipping
    itself as host-bound (then the side_stream catch above would prove nothing either way)."""
    problem = Problem(Shape(256, 256, 1024), "nn")
    prep = _prepare(adv.method("control"), problem)
    report = run_anticheat(problem, prep.fn, "cuda", prep.capturable, seed=3)
    side = {f.check: f for f in report.findings}["side_stream"]
    assert side.passed and not side.skipped, side.figures


# ---- the sandbox: kernels that kill their process ----------------------------------------------


@pytest.fixture(scope="module")
def evaluator():
    sandbox = pytest.importorskip("harness.sandbox")
    from harness import env as envmod

    timeouts = sandbox.Timeouts(start_s=300, prepare_s=300, run_s=45, timing_s=600)
    ev = sandbox.Evaluator("cuda", envmod.collect("cuda"), plugins=["tests.adversarial"], timeouts=timeouts)
    yield ev
    ev.close()


def _settings(layouts=("nn",)):
    from harness.runner import CompareSettings

    return CompareSettings(shapes=[], layouts=list(layouts), budget_s=0.5, min_rounds=3, seed=11)


def _rows(groups):
    (rows, samples), = groups
    return {r["method"]: r for r in rows if r["layout"] == "nn"}, samples


def _assert_caught(stem: str, row: dict) -> None:
    exp = adv.EXPECTED[stem]
    status, reason = row["status"], row.get("status_reason") or ""
    if exp.stage == "none":
        assert status == "ok", f"{stem}: {status} {reason}"
    elif exp.stage == "sandbox":
        assert status == "error" and exp.matches(reason), f"{stem}: {status} {reason}"
    elif exp.stage == "gate":
        assert status == "gate_failed" and not reason.startswith("anti-cheat") and exp.matches(reason), \
            f"{stem}: {status} {reason}"
    elif exp.or_gate and status == "gate_failed" and not reason.startswith("anti-cheat"):
        assert exp.or_gate in reason, f"{stem}: {status} {reason}"
    else:
        assert status == "gate_failed" and reason.startswith("anti-cheat") and f"{exp.stage}:" in reason \
            and exp.matches(reason), f"{stem}: {status} {reason}"


@pytest.mark.parametrize("stem", SANDBOX_ONLY)
def test_sandbox_contains_a_fatal_kernel(evaluator, stem):
    """The fatal kernel costs its own row; torch and the control finish with timings."""
    restarts = evaluator.restarts
    groups = evaluator.evaluate_shape(Shape(256, 256, 1024), ["torch", "adv:control", f"adv:{stem}"], _settings(),
                                      [("offline", "warm")], f"adv-{stem}")
    rows, samples = _rows(groups)
    _assert_caught(stem, rows[f"adv:{stem}"])
    if stem == "hang":  # the wait is scaled by the shape's call time, not the fixed cap: <= 15 s
        waited = re.search(r"no progress for (\d+) s", rows[f"adv:{stem}"]["status_reason"])
        assert waited and int(waited.group(1)) <= 15, rows[f"adv:{stem}"]["status_reason"]
    for ok in ("torch", "adv:control"):
        assert rows[ok]["status"] == "ok", rows[ok]
        assert rows[ok]["device_us_median"] > 0
    assert {s["method"] for s in samples} == {"torch", "adv:control"}
    assert evaluator.restarts > restarts  # the worker really was replaced


def test_sandbox_runs_the_whole_suite_and_catches_every_kernel(evaluator):
    """All adversarial kernels in one shape through the product pipeline (runner in the worker:
    gate, anti-cheat, timing). Each row carries its expected reason; the run finishes."""
    by_shape: dict[str, list[str]] = {}
    for stem, exp in adv.EXPECTED.items():
        by_shape.setdefault(exp.shape, []).append(stem)
    by_shape.setdefault("256_256_1024", [])
    for shape, stems in by_shape.items():
        stems = sorted(set(stems) | {"control"})
        groups = evaluator.evaluate_shape(_shape(shape), ["torch"] + [f"adv:{s}" for s in stems], _settings(),
                                          [("offline", "warm")], f"adv-suite-{shape}")
        rows, samples = _rows(groups)
        assert rows["torch"]["status"] == "ok", rows["torch"]
        for stem in stems:
            _assert_caught(stem, rows[f"adv:{stem}"])
        assert {s["method"] for s in samples} == {"torch", "adv:control"}


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["250_250_1000", "7_13_33", "1_1_1", "64_128_8192"])
def test_control_is_correct_on_ragged_and_tiny_shapes(shape, layout):
    """The shared kernel every cheat is built on is correct wherever the cheats are exposed
    (ragged edges, tiny and large-K shapes): a cheat's catch must not be the base kernel's bug."""
    problem = Problem(_shape(shape), layout)
    prep = _prepare(adv.method("control"), problem)
    res = run_gate(problem, [GateCandidate("torch", _anchor(layout), anchor=True), GateCandidate("control", prep.fn)],
                   "cuda", seed=99)
    assert res["torch"].passed and res["control"].passed, res["control"].reason
