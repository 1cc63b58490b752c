"""Anti-cheat checks for untrusted kernels, on top of the correctness gate.

The gate (``harness.gate``) already catches wrong values, unwritten elements (NaN-filled C),
writes outside C (guard bands), input mutation and results cached by pointer (new values in the
same buffers). These checks catch what a kernel search learns to exploit in the *timing*
(REFERENCES.md, "Reward hacking"):

* ``side_stream``: work launched on another stream is invisible to events on the timed stream.
  N calls are timed with events on the stream and with a device-wide synchronize; when the GPU,
  not the host, bounds the wall time but the stream's events saw much less of it, the work ran
  elsewhere.
* ``skipped_work``: N calls must cost about N x one call. Calls on the same inputs are compared
  with calls rotating distinct inputs; a kernel that skips repeated work is much cheaper on the
  former. A gap is confirmed with the L2 flushed before every call in both modes: inputs that
  fit in L2 only when they are the same (e.g. a 25 MB A on the H200's 50 MB L2) make a slow,
  memory-bound kernel up to 2x cheaper on repeats without skipping anything (seen on the H200).
* ``timed_path_output``: the output produced by the path that is timed (a replayed CUDA graph
  batch, which replays only what was captured on the stream) must be correct.
* ``precision``: a probe problem with large K (fp16 accumulation fails there) must pass the
  gate, against torch.matmul as the anchor.
* the runner flags anything faster than the physical floor (``below_floor``).

Each check returns a ``Finding``; ``run_anticheat`` returns them all. Checks that need a GPU are
reported as skipped on the CPU path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from harness.gate import GateCandidate, errors, reference, run_gate
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
        return {f.check: dict(f.figures, skipped=f.skipped) for f in self.findings}


def _median(xs):
    ys = sorted(xs)
    return ys[len(ys) // 2]


def _events_batch_ms(fn: Callable, sets: list[InputSet], calls: int) -> float:
    """GPU ms of ``calls`` calls queued behind a spin kernel (launch cost hidden)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    torch.cuda._sleep(int((100 + 40 * calls) * 2000))
    start.record()
    for i in range(calls):
        s = sets[i % len(sets)]
        fn(s.a, s.b, s.c)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def check_side_stream(fn: Callable, s: InputSet) -> Finding:
    """Events on the current stream vs device-synchronized wall time for N calls.

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
    enqueue_ms = (t_enqueued - t0) * 1e3
    event_ms = start.elapsed_time(end)
    figs = {"calls": n, "event_ms": event_ms, "wall_ms": wall_ms, "enqueue_ms": enqueue_ms}
    # GPU-bound: the device kept working well after the host had queued everything.
    gpu_bound = wall_ms - enqueue_ms > max(1.0, 0.25 * wall_ms)
    if gpu_bound and event_ms < 0.5 * wall_ms:
        return Finding("side_stream", False,
                       f"{n} calls kept the GPU busy {wall_ms:.2f} ms (device-wide sync) but events on the timed "
                       f"stream saw {event_ms:.2f} ms: work runs on another stream", figs)
    return Finding("side_stream", True, "", figs, skipped=not gpu_bound)


def _events_flushed_ms(fn: Callable, sets: list[InputSet], calls: int, scratch: torch.Tensor) -> float:
    """Summed GPU ms of ``calls`` calls, each timed alone right after overwriting ``scratch`` (an
    L2 flush): every call starts from a cold L2, whatever inputs it shares with the last one."""
    timed = []
    torch.cuda.synchronize()
    for i in range(calls):
        s = sets[i % len(sets)]
        scratch.zero_()  # the GPU is busy with this while the host queues the call behind it
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(s.a, s.b, s.c)
        end.record()
        timed.append((start, end))
    torch.cuda.synchronize()
    return sum(a.elapsed_time(b) for a, b in timed)


def _l2_scratch(l2_bytes: int | None = None) -> torch.Tensor:
    """A device buffer twice the L2's size: overwriting it evicts every input line."""
    if l2_bytes is None:
        l2_bytes = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 50 << 20))
    return torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")


def check_skipped_work(fn: Callable, problem: Problem, s: InputSet, calls: int = 20,
                       l2_bytes: int | None = None) -> Finding:
    """Per-call time on repeated identical inputs vs rotating distinct inputs, back to back; a
    gap is then measured again with the L2 flushed before every call (module docstring)."""
    distinct = [s] + timing_sets(problem, "cuda", 3, seed=99)
    for st in distinct:
        fn(st.a, st.b, st.c)
    same = _median([_events_batch_ms(fn, [s], calls) for _ in range(5)]) / calls
    rot = _median([_events_batch_ms(fn, distinct, calls) for _ in range(5)]) / calls
    figs = {"same_inputs_ms": same, "distinct_inputs_ms": rot, "calls": calls}
    if not same < SKIP_RATIO * rot:
        return Finding("skipped_work", True, "", figs)
    scratch = _l2_scratch(l2_bytes)
    same_cold = _median([_events_flushed_ms(fn, [s], calls, scratch) for _ in range(3)]) / calls
    rot_cold = _median([_events_flushed_ms(fn, distinct, calls, scratch) for _ in range(3)]) / calls
    del scratch
    figs.update(same_inputs_flushed_ms=same_cold, distinct_inputs_flushed_ms=rot_cold)
    if same_cold < SKIP_RATIO * rot_cold:
        return Finding("skipped_work", False,
                       f"{calls} calls on the same inputs cost {same * 1e3:.2f} us each but {rot * 1e3:.2f} us on "
                       f"distinct inputs ({same_cold * 1e3:.2f} vs {rot_cold * 1e3:.2f} us with the L2 flushed "
                       "before each call): repeated work is skipped", figs)
    return Finding("skipped_work", True,
                   f"same inputs were cheaper only from a warm L2 ({same * 1e3:.2f} vs {rot * 1e3:.2f} us back to "
                   f"back, {same_cold * 1e3:.2f} vs {rot_cold * 1e3:.2f} us flushed)", figs)


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


def check_precision(make_fn: Callable[[Problem], Callable | None], device: str, layout: str) -> Finding:
    """Gate a large-K probe problem against torch.matmul: fp16 accumulation fails here."""
    probe = Problem(PRECISION_PROBE, layout)
    fn = make_fn(probe)
    if fn is None:
        return Finding("precision", True, f"method does not serve the probe {probe}", skipped=True)

    def anchor(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)

    res = run_gate(probe, [GateCandidate("anchor", anchor, anchor=True), GateCandidate("probe", fn)], device, seed=5)
    r = res["probe"]
    figs = {"rel_fro_err": r.rel_fro_err, "tol_rel_fro": r.tol_rel_fro, "probe": str(probe)}
    if not r.passed:
        return Finding("precision", False, f"large-K probe {probe.shape.name} failed: {r.reason}", figs)
    return Finding("precision", True, "", figs)


def run_anticheat(problem: Problem, fn: Callable, device: str, capturable: bool = True,
                  make_probe_fn: Callable[[Problem], Callable | None] | None = None, seed: int = 0) -> CheatReport:
    """All checks for one prepared call on one problem. Run after the gate has passed."""
    findings: list[Finding] = []
    if make_probe_fn is not None:
        findings.append(check_precision(make_probe_fn, device, problem.layout))
    if device != "cuda":
        for name in ("side_stream", "skipped_work", "timed_path_output"):
            findings.append(Finding(name, True, "needs a GPU", skipped=True))
        return CheatReport(findings)
    (s,) = timing_sets(problem, device, 1, seed=seed)
    findings.append(check_timed_path_output(fn, problem, s, capturable))
    findings.append(check_side_stream(fn, s))
    findings.append(check_skipped_work(fn, problem, s))
    return CheatReport(findings)
