"""Server mode: calls arrive as a Poisson process; the GPU idles between them.

This is the workload of an inference service at ``qps`` requests per second: between calls the
GPU cools, clocks drop and caches hold other data, so a call costs more than in back-to-back
offline timing. Methods are interleaved in one random arrival sequence (every method sees the
same conditions), within blocks of the entries that share operands (one block per B layout): a
layout's calls run together, so whether a call finds its matrices in L2 does not depend on which
layout the call before it used. Interleaved across layouts, 1_4096_4096's 32 MB weights are in
the H200's 60 MB L2 for some calls and not for others (9 against 12.6 us a call, nn and tn of one
method up to 39 % apart, run 87). Per call:

* ``device_us``: the GPU's own time for the call, from CUPTI activity records of its kernels
  (``kernel_clock``): the time the GPU spent on the call's operations (their intervals'
  union), however many kernels the call launches. Host dispatch is not in it, also not the gap
  before a call's second kernel (a split-K reduction) that the host launched after the GPU had
  finished the first: measured on an H200, that gap doubled 256_128_16384's first-to-last span
  against its offline time. ``timing_method`` is ``cupti``.
* ``idle_us``: how long the GPU sat idle before the call (from the end of the last GPU operation
  recorded before it; the session's first call has none).
* ``host_us``: from the scheduled arrival to the return of ``synchronize()``: the latency the
  caller sees, including any queueing if the previous call overran its gap, and CUPTI's own cost
  for tracing the call's kernels (+18 us at 64^3 on an H200, ``kernel_clock``).

CUDA events are recorded around every call as well. An entry's ``device_us`` comes from them
(``timing_method`` ``events``, and ``timing_note`` says why) when CUPTI cannot trace in this
process, or when any of the entry's calls got no GPU operation record: one entry's samples are
never a mix of the two clocks. On an idle GPU the start event fires as soon as the GPU reaches
it, so event time includes the launch's trip to the GPU (measured on an H200: 111-208 us around
a 2.2 us kernel). On the CPU path ``device_us`` is the host clock around the call.
"""

from __future__ import annotations

import math
import random
import time
from typing import Callable, Hashable, Sequence

import torch

from harness.timing.clocks import ClockLog, ClockSampler
from harness.timing.kernel_clock import CallSpan, KernelClock, KernelClockUnavailable
from harness.timing.offline import Entry, Measurement
from harness.timing.samplers import flush_drained


def _wait_until(t: float) -> None:
    """Sleep to just before ``t``, then spin: time.sleep alone overshoots by ~100 us."""
    while True:
        left = t - time.perf_counter()
        if left <= 0:
            return
        if left > 0.0015:
            time.sleep(left - 0.001)


def poisson_arrivals(n: int, qps: float, rng: random.Random) -> list[float]:
    """Arrival offsets (seconds) of ``n`` calls: exponential gaps with mean 1/qps."""
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(qps)
        out.append(t)
    return out


def measure_server(
    entries: Sequence[Entry],
    device: str,
    qps: float,
    calls_per_entry: int,
    seed: int = 0,
    clocks: ClockSampler | None = None,
    clock_log: ClockLog | None = None,
    on_call: Callable[[int], None] | None = None,
    open_clock: Callable[[], KernelClock] | None = None,
    flush_bytes: int = 0,
) -> dict[Hashable, Measurement]:
    """Time ``calls_per_entry`` isolated calls of every entry at ``qps`` arrivals a second.
    ``open_clock`` starts the GPU-side clock (default ``KernelClock.open``); if it raises
    ``KernelClockUnavailable``, device time comes from CUDA events, labelled. ``flush_bytes``: a
    scratch buffer of that size is overwritten before each call, ahead of its arrival and outside
    its window (the cold cache of a shape too small to rotate input sets, as offline flushes)."""
    if qps <= 0:
        raise ValueError(f"--qps must be > 0, got {qps}")
    rng = random.Random(seed)
    cuda = device == "cuda"
    out = {e.key: Measurement(timing_method="events" if cuda else "host-clock", calls_per_batch=1)
           for e in entries}
    blocks: dict[int, list[Entry]] = {}  # entries by the input sets they share (one layout's operands)
    for e in entries:
        blocks.setdefault(id(e.sets), []).append(e)
    schedule = []
    for members in blocks.values():
        block = [e for e in members for _ in range(calls_per_entry)]
        rng.shuffle(block)
        schedule += block
    arrivals = poisson_arrivals(len(schedule), qps, rng)
    calls: dict[Hashable, list[int]] = {e.key: [] for e in entries}  # schedule index of each timed call
    event_us: dict[Hashable, list[float]] = {e.key: [] for e in entries}
    clock, unavailable = None, ""
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        try:
            clock = (open_clock or KernelClock.open)()
        except KernelClockUnavailable as ex:
            unavailable = f"CUPTI unavailable: {ex}"
    scratch = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if cuda and flush_bytes else None
    counter = {e.key: 0 for e in entries}
    every = max(1, len(schedule) // 50)
    t0 = time.perf_counter() + 0.01
    try:
        for i, (e, at) in enumerate(zip(schedule, arrivals)):
            m = out[e.key]
            if m.error:
                continue
            s = e.sets[counter[e.key] % len(e.sets)]
            counter[e.key] += 1
            arrive = t0 + at
            if scratch is not None:  # the flush's memset in a window no call owns, then the GPU idles
                flush_drained(scratch, clock, -(i + 1))
            _wait_until(arrive)
            try:
                if cuda:
                    if clock:
                        clock.begin(i)
                    try:
                        start.record()
                        e.fn(s.a, s.b, s.c)
                        end.record()
                    finally:
                        if clock:
                            clock.end()
                    end.synchronize()
                    done = time.perf_counter()
                    event_us[e.key].append(start.elapsed_time(end) * 1000.0)
                else:
                    c0 = time.perf_counter()
                    e.fn(s.a, s.b, s.c)
                    done = time.perf_counter()
                    m.device_us.append((done - c0) * 1e6)
                m.host_us.append((done - arrive) * 1e6)
                calls[e.key].append(i)
            except Exception as ex:
                m.error = f"{type(ex).__name__}: {ex}"
                continue
            if i % every == 0:
                clk = clocks.sample() if clocks else None
                if clk is not None and clock_log is not None:
                    clock_log.samples.append(clk)
            m.round_sm_mhz.append(clock_log.samples[-1].sm_mhz if clock_log and clock_log.samples else float("nan"))
            if on_call:
                on_call(i + 1)
    finally:
        spans = {}
        if clock:
            try:
                torch.cuda.synchronize()
            except Exception:  # a broken context: its error is the entry's, the clock still closes
                pass
            spans = clock.close()
    if cuda:
        for e in entries:
            _device_times(out[e.key], calls[e.key], event_us[e.key], spans, clock, unavailable)
    for m in out.values():
        m.stop_reason = "calls" if m.error is None else "error"
    return out


def _device_times(m: Measurement, calls: list[int], event_us: list[float], spans: dict[int, CallSpan],
                  clock: KernelClock | None, unavailable: str) -> None:
    """One entry's device_us (and idle_us): from CUPTI when every call has a GPU span, else from
    the events for every call, with the reason in ``timing_note``."""
    if clock is None:
        m.device_us, m.timing_method, m.timing_note = event_us, "events", unavailable
        return
    got = [spans.get(i) for i in calls]
    missing = sum(s is None for s in got)
    if missing:
        m.device_us, m.timing_method = event_us, "events"
        m.timing_note = (f"CUPTI: {missing} of {len(calls)} calls had no GPU operation record "
                         f"({clock.summary()}); device_us of every call from CUDA events")
        return
    m.timing_method = "cupti"
    m.device_us = [s.device_us for s in got]
    m.idle_us = [math.nan if s.idle_us is None else s.idle_us for s in got]
