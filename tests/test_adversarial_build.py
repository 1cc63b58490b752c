"""CPU side of the adversarial suite (tests/adversarial): it builds, it is wired, and the cheats a
CPU can see are seen.

Why: the GPU test can only prove the checks catch each cheat if every adversarial kernel really
compiles for sm_90a through the same pipeline as a searched kernel (a kernel that fails to build
would "fail" the gate for the wrong reason), and if each is reachable by name in a sandbox
worker (``adv:<stem>`` through the plug-in registry). The gate's CPU tests (tests/test_gate.py)
already cover pointer caching, unwritten and ragged-unwritten output, guard-band writes, fp16
accumulation and input mutation with torch equivalents; what they do not cover is reading C
before writing it, and work skipped across repeated calls, which is done here.
"""

from __future__ import annotations

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
from harness import registry
from harness.anticheat import run_anticheat
from harness.gate import GateCandidate, run_gate
from harness.problem import Problem, Shape
from kernels_search import cuda_method, toolchain

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")



def test_every_kernel_has_an_expectation_and_resolves_by_name():
    """A kernel without an expected catch would be built but never checked; a name that does not
    resolve could not be sent to a sandbox worker."""
    stems = set(adv.kernel_paths())
    assert stems == set(adv.EXPECTED), stems ^ set(adv.EXPECTED)
    assert {"control", "hang", "illegal_address"} <= stems
    methods = registry.resolve([f"adv:{s}" for s in sorted(stems)])
    assert [m.name for m in methods] == [f"adv:{s}" for s in sorted(stems)]
    # one shared kernel, varied: every file compiles to a different source
    assert len({m.source_hash for m in methods}) == len(methods)
    with pytest.raises(registry.MethodSpecError, match="no adversarial kernel"):
        registry.resolve(["adv:no_such_kernel"])


@needs_nvcc
@pytest.mark.slow
def test_every_adversarial_kernel_compiles_for_sm90a(cache):
    """Build failures are results: each must come back ok=True with a library, its ptxas figures
    parsed, no spills. Uses cuda_method.prebuild, the pipeline a searched kernel goes through."""
    methods = [adv.method(s) for s in adv.kernel_paths()]
    results = cuda_method.prebuild(methods)
    for m, r in zip(methods, results):
        assert r.ok, f"{m.name} did not build:\n{r.log[-2000:]}"
        assert r.lib_path and "-gencode=arch=compute_90a,code=sm_90a" in r.flags
        assert r.kernels, f"{m.name}: no ptxas figures parsed"
        assert r.spill_bytes == 0, f"{m.name}: spills {r.resources}"
    # the second build of unchanged sources is a cache hit
    again = cuda_method.prebuild(methods)
    assert all(r.cached for r in again)


def _good(layout):
    def fn(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)
    return fn


def uninit_read(layout):
    """CPU twin of tests/adversarial/uninit_read.cu: C += A @ B reads C before writing it."""
    def fn(a, b, c):
        c.add_(torch.matmul(a, b if layout == "nn" else b.t()))
    return fn


def skip_repeat(layout):
    """CPU twin of skip_repeat.cu: recomputes only when the first elements of A or B changed."""
    seen = {}

    def fn(a, b, c):
        fp = (a.view(-1)[:2].tolist(), b.view(-1)[:2].tolist())
        if seen.get("fp") != fp:
            _good(layout)(a, b, c)
            seen["fp"] = fp
    return fn


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", [(40, 24, 72), (33, 17, 65)])
def test_gate_catches_reading_c_before_writing(layout, shape):
    """C is NaN-filled before every call, so a kernel that reads C before writing it (C += A @ B)
    returns NaN, caught with the same reason the GPU test expects of uninit_read.cu."""
    p = Problem(Shape(*shape), layout)
    res = run_gate(p, [GateCandidate("ref", _good(layout), anchor=True), GateCandidate("bad", uninit_read(layout))],
                   "cpu", seed=11)
    assert res["ref"].passed, res["ref"].reason
    assert not res["bad"].passed
    assert adv.EXPECTED["uninit_read"].matches(res["bad"].reason), res["bad"].reason


def test_skip_repeat_evades_the_gate_and_the_cpu_report_says_its_check_did_not_run():
    """Skipping repeated work computes every new input correctly, so the gate must pass it: the
    only defence is the timing check (N calls ~ N x one call), which needs a GPU. The CPU path
    must therefore report that check as *skipped*, never as passed-by-measurement."""
    p = Problem(Shape(32, 32, 64), "nn")
    fn = skip_repeat("nn")
    res = run_gate(p, [GateCandidate("ref", _good("nn"), anchor=True), GateCandidate("skip", fn)], "cpu", seed=3)
    assert res["skip"].passed, res["skip"].reason
    # and it really skips: a call on unchanged inputs leaves a poisoned C alone
    a, b = torch.ones(32, 64, dtype=torch.float16), torch.ones(64, 32, dtype=torch.float16)
    c = torch.empty(32, 32, dtype=torch.float16)
    fn(a, b, c)
    c.fill_(float("nan"))
    fn(a, b, c)
    assert torch.isnan(c).all()
    report = run_anticheat(p, fn, "cpu")
    f = {x.check: x for x in report.findings}
    assert f["skipped_work"].skipped and "GPU" in f["skipped_work"].reason


@needs_nvcc
@pytest.mark.slow
def test_precision_cheat_survives_compilation(cache):
    """The fp16-accumulation kernel must really accumulate in half (HFMA2 in its SASS, no fp32
    FFMA) and the control in fp32: otherwise a passing/failing precision check would say nothing
    about the cheat it is meant to catch."""
    import re

    if not toolchain.find_cuobjdump():
        pytest.skip("cuobjdump not installed (set HGEMM_CUOBJDUMP)")
    counts = {}
    for stem in ("control", "fp16_accum"):
        r = adv.method(stem).build()
        assert r.ok, r.log[-2000:]
        sass = toolchain.dump_sass(r.lib_path)
        counts[stem] = (len(re.findall(r"\bHFMA2\b", sass)), len(re.findall(r"\bFFMA\b", sass)))
    (_, c_f), (h_h, h_f) = counts["control"], counts["fp16_accum"]
    assert c_f >= 16 and h_f == 0 and h_h >= 16, counts  # the 16-deep inner loop, unrolled


@pytest.mark.parametrize("flushed, passed", [((1.0, 1.0), True), ((0.2, 1.0), False)])
def test_skipped_work_gap_must_survive_an_l2_flush(monkeypatch, flushed, passed):
    """Same-input calls at 0.4x of distinct-input calls: skipped work only if the gap holds with
    the L2 flushed before every call; a gap from inputs that fit in L2 only when repeated (a
    slow kernel re-reading a 25 MB A on the H200) passes, and says why."""
    import harness.anticheat as ac

    p = Problem(Shape(8, 8, 8))
    s = ac.InputSet(torch.zeros(8, 8), torch.zeros(8, 8), torch.zeros(8, 8))
    monkeypatch.setattr(ac, "timing_sets", lambda problem, device, n, seed=0: [s] * n)
    monkeypatch.setattr(ac, "_flush_bytes", lambda l2_bytes=None: 4)
    monkeypatch.setattr(ac, "_per_call_us", lambda fn, sets, calls: 0.4 if len(sets) == 1 else 1.0)
    monkeypatch.setattr(ac, "_per_call_flushed_us",
                        lambda fn, sets, calls, flush_bytes: flushed[0] if len(sets) == 1 else flushed[1])
    f = ac.check_skipped_work(lambda a, b, c: None, p, s)
    assert f.passed is passed and f.figures["same_inputs_flushed_us"] == flushed[0]
    assert ("warm L2" in f.reason) if passed else ("repeated work is skipped" in f.reason)
    monkeypatch.setattr(ac, "_per_call_us", lambda fn, sets, calls: 1.0)  # no gap: no second look
    f = ac.check_skipped_work(lambda a, b, c: None, p, s)
    assert f.passed and f.reason == "" and "same_inputs_flushed_us" not in f.figures


HONEST = dict(calls=100, event_ms=9.5, wall_ms=10.0, enqueue_ms=1.0)  # GPU-bound, events see it all
STALLED = dict(calls=100, event_ms=9.5, wall_ms=40.0, enqueue_ms=1.0)  # host slept before its sync
HIDDEN = dict(calls=100, event_ms=0.2, wall_ms=10.0, enqueue_ms=1.0)  # work on another stream
HOST_BOUND = dict(calls=100, event_ms=0.9, wall_ms=1.2, enqueue_ms=1.0)
# the side_stream cheat on the H200 (2026-12-01): slow launches, so the idle timed stream's events
# span the enqueue time, over half the wall time; only the tail after it shows the hidden work
SLOW_QUEUE_CHEAT = dict(calls=76, event_ms=1.558, wall_ms=2.972, enqueue_ms=1.577)


@pytest.mark.parametrize("trials, passed, skipped, timed", [
    ([HONEST], True, False, 1),  # one measured pass: no second trial
    ([STALLED, HONEST], True, False, 2),  # the control's flake: a stall is not a cheat
    ([HIDDEN, HIDDEN, HIDDEN], False, False, 3),
    ([HIDDEN, HOST_BOUND, HIDDEN], False, False, 3),
    ([SLOW_QUEUE_CHEAT] * 3, False, False, 3),
    ([STALLED, HOST_BOUND, HOST_BOUND], True, True, 3),  # one gap is not evidence either way
    ([HOST_BOUND] * 3, True, True, 3),
])
def test_side_stream_needs_the_gap_twice_and_one_measured_pass_clears(monkeypatch, trials, passed, skipped, timed):
    """The side-stream check repeats its timing until one trial passes on evidence (up to three)
    and fails a kernel only on a gap seen in two trials: on the H200 the honest control failed it
    once in four runs, the signature of a host stall between queuing and synchronizing."""
    import harness.anticheat as ac

    queue = list(trials)
    monkeypatch.setattr(ac, "_side_stream_trial", lambda fn, s: queue.pop(0))
    f = ac.check_side_stream(lambda a, b, c: None, None)
    assert (f.passed, f.skipped, f.figures["trials"]) == (passed, skipped, timed)
    assert len(queue) == len(trials) - timed
    assert ("another stream" in f.reason) if not passed else f.reason == ""
