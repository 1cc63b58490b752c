"""Anti-cheat checks for untrusted kernels, on top of the correctness gate.

The gate (``harness.gate``) already catches wrong values, unwritten elements (NaN-filled C),
writes outside C (guard bands), input mutation and results cached by pointer (new values in the
same buffers). These checks catch what a kernel search learns to exploit in the *timing*
(REFERENCES.md, "Reward hacking"):

* ``side_stream``: work launched on another stream is invisible to events on the timed stream.
  N calls are timed with events on the stream and with a device-wide synchronize; when the GPU
  kept working well after the host had queued the calls but the stream's events saw much less of
  that tail, the work ran elsewhere. Trials repeat until one passes on evidence (up to three): a
  gap must show twice.
* ``skipped_work``: N calls must cost about N x one call. Calls on the same inputs are compared
  with calls rotating distinct inputs; a kernel that skips repeated work is much cheaper on the
  former. A gap is confirmed with the L2 flushed before every call in both modes: inputs that
  fit in L2 only when they are the same (e.g. a 25 MB A on the H200's 50 MB L2) make a slow,
  memory-bound kernel up to 2x cheaper on repeats without skipping anything (seen on the H200).
  Both comparisons are of device time, taken with the timing core's samplers (launches queued
  behind a spin kernel, starved samples redone): host launch cost is not work a kernel skips.
  With a fixed spin, or none in the flushed mode, Triton's TMA kernels (three tensor maps
  encoded per launch) are flagged for launch cost alone (measured on an H200).
* ``timed_path_output``: the output produced by the path that is timed (a replayed CUDA graph
  batch, which replays only what was captured on the stream) must be correct.
* ``precision``: the prepared call on the shape under test, against torch.matmul as the anchor,
  with a tolerance for that shape's K (``harness.precision``). Where that K is too small to tell
  fp16 from fp32 accumulation the finding says so; a method that serves any shape is then also
  prepared for and probed on a large-K problem (``PRECISION_PROBE``). A kernel built for its own
  shape is never judged on another one.
* the runner flags anything faster than the physical floor (``below_floor``).

Every check runs on the shape under test. Each returns a ``Finding`` (its figures, and on a failure
which check and by how much); ``run_anticheat`` returns them all. Checks that need a GPU are
reported as skipped on the CPU path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from harness.gate import GateCandidate, errors, reference, run_gate
from harness.precision import accumulation_verdict
from harness.problem import Problem, Shape
from harness.tensors import InputSet, timing_sets

PRECISION_PROBE = Shape(64, 128, 8192)
SIDE_STREAM_MIN_GPU_MS = 5.0  # the side-stream check needs the GPU, not the host, to bound the wall time
SIDE_STREAM_MAX_CALLS = 500  # under the ~1000 launches a stream queues before the host blocks
SKIP_RATIO = 0.5  # same-input calls cheaper than this fraction of distinct-input calls: skipped work


@dataclass
class Finding:
    check: str
    passed: bool
    reason: str = ""
    figures: dict = field(default_factory=dict)
    skipped: bool = False


@dataclass
class CheatReport:
    findings: list[Finding]

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings)

    @property
    def reason(self) -> str:
        return "; ".join(f"{f.check}: {f.reason}" for f in self.findings if not f.passed)

    def figures(self) -> dict:
        """Each check's figures; a check that passed with something to say (skipped, or could not
        decide) carries it as ``note``."""
        return {f.check: dict(f.figures, skipped=f.skipped, **({"note": f.reason} if f.passed and f.reason else {}))
                for f in self.findings}


def _median(xs):
    ys = sorted(xs)
    return ys[len(ys) // 2]


SIDE_STREAM_TRIALS = 3  # a host stall after the batch is queued looks like a cheat once, never three times


def _side_stream_trial(fn: Callable, s: InputSet) -> dict:
    """One timing of N calls: events on the current stream vs device-synchronized wall time.

    N is sized from one call's device-synchronized wall time (events would read ~0 for a
    cheat) and capped well under the ~1000 launches a stream queues before the host blocks,
    so that the host finishes enqueuing long before the GPU finishes the work."""
    fn(s.a, s.b, s.c)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(s.a, s.b, s.c)
    torch.cuda.synchronize()
    one_ms = (time.perf_counter() - t0) * 1e3
    n = int(min(SIDE_STREAM_MAX_CALLS, max(10, SIDE_STREAM_MIN_GPU_MS / max(one_ms, 1e-3))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    start.record()
    for _ in range(n):
        fn(s.a, s.b, s.c)
    end.record()
    t_enqueued = time.perf_counter()
    torch.cuda.synchronize()  # device-wide: waits for every stream
    wall_ms = (time.perf_counter() - t0) * 1e3
    return {"calls": n, "event_ms": start.elapsed_time(end), "wall_ms": wall_ms,
            "enqueue_ms": (t_enqueued - t0) * 1e3}


def _side_stream_gap(t: dict) -> bool | None:
    """None: host-bound (the wall time says nothing about the device). True: the GPU kept working
    well after the host had queued everything, but the timed stream's events saw less than half
    of that tail. False: the timed stream's events account for the work.

    The tail, not the whole wall time: events on an idle timed stream still span the host's
    enqueue time (the end event fires when it is recorded), so a cheat whose launches are slow to
    queue covers half the wall time with nothing on the stream (measured on an H200: 76 calls,
    events 1.56 ms, enqueue 1.58 ms, wall 2.97 ms)."""
    tail_ms = t["wall_ms"] - t["enqueue_ms"]
    gpu_bound = tail_ms > max(1.0, 0.25 * t["wall_ms"])
    if not gpu_bound:
        return None
    return t["event_ms"] - t["enqueue_ms"] < 0.5 * tail_ms


def side_stream_verdict(trials: list[dict]) -> Finding:
    """The side-stream finding from up to ``SIDE_STREAM_TRIALS`` trials.

    One measured pass clears the kernel: work on another stream cannot make the timed stream's
    events cover the wall time. A gap fails it only when it shows in two trials and no trial
    passed: a host thread stalled between queuing and synchronizing inflates one trial's wall time
    (measured on an H200: the control kernel failed this check once in four runs), while a kernel that
    hides its work shows the gap every time. Otherwise: skipped, not passed on evidence."""
    gaps = [_side_stream_gap(t) for t in trials]
    if False in gaps:
        return Finding("side_stream", True, "", dict(trials[gaps.index(False)], trials=len(trials)))
    if gaps.count(True) >= 2:
        t = trials[gaps.index(True)]
        return Finding("side_stream", False,
                       f"{t['calls']} calls kept the GPU busy {t['wall_ms']:.2f} ms (device-wide sync) but events on "
                       f"the timed stream saw {t['event_ms']:.2f} ms ({gaps.count(True)} of {len(trials)} trials): "
                       f"work runs on another stream", dict(t, trials=len(trials)))
    return Finding("side_stream", True, "", dict(min(trials, key=lambda t: t["wall_ms"]), trials=len(trials)),
                   skipped=True)


def check_side_stream(fn: Callable, s: InputSet) -> Finding:
    """Time N calls on the stream and device-wide, up to ``SIDE_STREAM_TRIALS`` times, stopping at
    the first measured pass (one trial for an honest GPU-bound kernel)."""
    trials = []
    for _ in range(SIDE_STREAM_TRIALS):
        trials.append(_side_stream_trial(fn, s))
        if _side_stream_gap(trials[-1]) is False:
            break
    return side_stream_verdict(trials)


def _per_call_us(fn: Callable, sets: list[InputSet], calls: int, repeats: int = 5) -> float:
    """Median device us per call of batches of ``calls`` calls, from the timing core's spin-events
    sampler: the batch is queued behind a spin kernel, and a batch the GPU reached before the host
    had queued it all is thrown away and measured again behind a longer spin. Host launch cost
    (which can differ with the inputs: Triton encodes TMA descriptors at every launch) stays out."""
    from harness.timing.samplers import SpinEventsSampler

    sampler = SpinEventsSampler(fn, sets, calls)
    return _median([sampler.sample() for _ in range(repeats)])


def _per_call_flushed_us(fn: Callable, sets: list[InputSet], calls: int, flush_bytes: int) -> float:
    """Median device us of ``calls`` single calls, each from a cold L2 (the timing core's flush
    sampler: scratch overwritten, then spin, then events around one call), rotating ``sets``."""
    from harness.timing.samplers import FlushSampler

    sampler = FlushSampler(fn, sets, flush_bytes)
    return _median([sampler.sample() for _ in range(calls)])


def _flush_bytes(l2_bytes: int | None = None) -> int:
    """Twice the L2's size: overwriting that much evicts every input line."""
    if l2_bytes is None:
        l2_bytes = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()),
                               "L2_cache_size", 50 << 20))
    return 2 * l2_bytes


def check_skipped_work(fn: Callable, problem: Problem, s: InputSet, calls: int = 20,
                       l2_bytes: int | None = None) -> Finding:
    """Device time per call on repeated identical inputs vs rotating distinct inputs; a gap is then
    measured again with the L2 flushed before every call (module docstring)."""
    distinct = [s] + timing_sets(problem, "cuda", 3, seed=99)
    for st in distinct:
        fn(st.a, st.b, st.c)
    same = _per_call_us(fn, [s], calls)
    rot = _per_call_us(fn, distinct, calls)
    figs = {"same_inputs_us": same, "distinct_inputs_us": rot, "calls": calls}
    if not same < SKIP_RATIO * rot:
        return Finding("skipped_work", True, "", figs)
    flush = _flush_bytes(l2_bytes)
    same_cold = _per_call_flushed_us(fn, [s], calls, flush)
    rot_cold = _per_call_flushed_us(fn, distinct, calls, flush)
    figs.update(same_inputs_flushed_us=same_cold, distinct_inputs_flushed_us=rot_cold)
    if same_cold < SKIP_RATIO * rot_cold:
        return Finding("skipped_work", False,
                       f"{calls} calls on the same inputs cost {same:.2f} us each but {rot:.2f} us on "
                       f"distinct inputs ({same_cold:.2f} vs {rot_cold:.2f} us with the L2 flushed "
                       "before each call): repeated work is skipped", figs)
    return Finding("skipped_work", True,
                   f"same inputs were cheaper only from a warm L2 ({same:.2f} vs {rot:.2f} us back to "
                   f"back, {same_cold:.2f} vs {rot_cold:.2f} us flushed)", figs)


def check_timed_path_output(fn: Callable, problem: Problem, s: InputSet, capturable: bool) -> Finding:
    """Capture a batch as the timing core does, replay it, and check what it wrote."""
    if not capturable:
        return Finding("timed_path_output", True, "not capturable: timed with direct launches", skipped=True)
    from harness.timing.samplers import GraphSampler

    try:
        sampler = GraphSampler(fn, [s], 3)
    except Exception as e:
        return Finding("timed_path_output", True, f"capture failed ({type(e).__name__}); direct launches are timed",
                       skipped=True)
    s.c.fill_(float("nan"))
    torch.cuda.synchronize()
    sampler.graph.replay()
    torch.cuda.synchronize()
    sampler.close()
    ref = reference(s.a, s.b, problem.layout)
    nan = int(torch.isnan(s.c).sum())
    rel, _ = errors(s.c, ref) if not nan else (float("nan"), None)
    figs = {"rel_fro_err": rel, "nan": nan}
    if nan or not rel < 5e-3:
        return Finding("timed_path_output", False,
                       f"a replay of the captured calls left {nan} NaN and rel. error {rel:.3g}: the timed path does "
                       "not compute C (work escapes the captured stream or is cached)", figs)
    return Finding("timed_path_output", True, "", figs)


def _anchor(layout: str) -> Callable:
    def anchor(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)
    return anchor


def _gate_precision(problem: Problem, fn: Callable, device: str, seed: int):
    """(candidate's gate result, anchor's) on fresh draws of ``problem``."""
    res = run_gate(problem, [GateCandidate("anchor", _anchor(problem.layout), anchor=True),
                             GateCandidate("candidate", fn)], device, seed=seed)
    return res["candidate"], res["anchor"]


def _precision_on(problem: Problem, fn: Callable, device: str, seed: int) -> tuple[dict, str | None, bool]:
    """(figures, failure reason or None, decisive) of the precision check of ``fn`` on ``problem``."""
    cand, anchor = _gate_precision(problem, fn, device, seed)
    figs = {"shape": problem.shape.name, "k": problem.k, "rel_fro_err": cand.rel_fro_err,
            "anchor_rel_fro_err": anchor.rel_fro_err}
    v = accumulation_verdict(problem.k, cand.rel_fro_err, anchor.rel_fro_err)
    figs.update(v.figures())
    if not cand.passed:
        return figs, f"{problem.shape.name} failed the gate: {cand.reason}; {v.describe()}", True
    return figs, (None if v.passed else f"{problem.shape.name}: {v.describe()}"), v.decisive


def check_precision(problem: Problem, fn: Callable, device: str, seed: int = 5,
                    make_probe_fn: Callable[[Problem], Callable | None] | None = None) -> Finding:
    """fp32 accumulation, judged on the shape under test with a tolerance for its K
    (``harness.precision.accumulation_verdict``).

    When that K cannot tell fp16 from fp32 accumulation, ``make_probe_fn`` (given only for a method
    that serves any shape) prepares the method for ``PRECISION_PROBE`` in the same layout, and the
    verdict comes from there; without it the finding passes as skipped, saying why."""
    figs, failed, decisive = _precision_on(problem, fn, device, seed)
    if failed:
        return Finding("precision", False, failed, figs)
    if decisive:
        return Finding("precision", True, "", figs)
    undecided = (f"K={problem.k} is too small to tell fp16 from fp32 accumulation (fp16 accumulation expected "
                 f"at {figs['fp16_acc_expected']:.2g}, tolerance {figs['tol_rel_fro']:.2g})")
    probe = Problem(PRECISION_PROBE, problem.layout)
    probe_fn = make_probe_fn(probe) if make_probe_fn is not None else None
    if probe_fn is None:
        why = "the method serves only its own shapes" if make_probe_fn is None else f"the method does not serve {probe}"
        return Finding("precision", True, f"{undecided}; not probed at a larger K: {why}", figs, skipped=True)
    pfigs, pfailed, _ = _precision_on(probe, probe_fn, device, seed + 1)
    figs["probe"] = pfigs
    if pfailed:
        return Finding("precision", False, f"large-K probe {pfailed}; on the shape under test {undecided}", figs)
    return Finding("precision", True, "", figs)


def run_anticheat(problem: Problem, fn: Callable, device: str, capturable: bool = True,
                  make_probe_fn: Callable[[Problem], Callable | None] | None = None, seed: int = 0) -> CheatReport:
    """All checks for one prepared call on one problem. Run after the gate has passed.

    ``make_probe_fn(probe)`` prepares the same method for another problem (None when it cannot
    serve it); pass it only for a method that serves any shape (``check_precision``)."""
    findings = [check_precision(problem, fn, device, seed=seed + 5, make_probe_fn=make_probe_fn)]
    if device != "cuda":
        for name in ("side_stream", "skipped_work", "timed_path_output"):
            findings.append(Finding(name, True, "needs a GPU", skipped=True))
        return CheatReport(findings)
    (s,) = timing_sets(problem, device, 1, seed=seed)
    findings.append(check_timed_path_output(fn, problem, s, capturable))
    findings.append(check_side_stream(fn, s))
    findings.append(check_skipped_work(fn, problem, s))
    return CheatReport(findings)
