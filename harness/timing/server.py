"""Server mode: calls arrive as a Poisson process; the GPU idles between them.

This is the workload of an inference service at ``qps`` requests per second: between calls the
GPU cools, clocks drop and caches hold other data, so a call costs more than in back-to-back
offline timing. Methods are interleaved in one random arrival sequence (every method sees the
same conditions). Per call:

* ``device_us``: events recorded around the call on the stream. On an idle GPU the start event
  fires at once, so this includes the time for the launch to reach the GPU: that is part of a
  lone call's cost in a server.
* ``host_us``: from the scheduled arrival to the return of ``synchronize()``: the latency the
  caller sees, including any queueing if the previous call overran its gap.
"""

from __future__ import annotations

import random
import time
from typing import Callable, Hashable, Sequence

import torch

from harness.timing.clocks import ClockLog, ClockSampler
from harness.timing.offline import Entry, Measurement


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
) -> dict[Hashable, Measurement]:
    if qps <= 0:
        raise ValueError(f"--qps must be > 0, got {qps}")
    rng = random.Random(seed)
    out = {e.key: Measurement(timing_method="events" if device == "cuda" else "host-clock", calls_per_batch=1)
           for e in entries}
    schedule = [e for e in entries for _ in range(calls_per_entry)]
    rng.shuffle(schedule)
    arrivals = poisson_arrivals(len(schedule), qps, rng)
    cuda = device == "cuda"
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
    counter = {e.key: 0 for e in entries}
    every = max(1, len(schedule) // 50)
    t0 = time.perf_counter() + 0.01
    for i, (e, at) in enumerate(zip(schedule, arrivals)):
        m = out[e.key]
        if m.error:
            continue
        s = e.sets[counter[e.key] % len(e.sets)]
        counter[e.key] += 1
        arrive = t0 + at
        _wait_until(arrive)
        try:
            if cuda:
                c0 = time.perf_counter()
                start.record()
                e.fn(s.a, s.b, s.c)
                end.record()
                end.synchronize()
                done = time.perf_counter()
                m.device_us.append(start.elapsed_time(end) * 1000.0)
            else:
                c0 = time.perf_counter()
                e.fn(s.a, s.b, s.c)
                done = time.perf_counter()
                m.device_us.append((done - c0) * 1e6)
            m.host_us.append((done - arrive) * 1e6)
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
    for m in out.values():
        m.stop_reason = "calls" if m.error is None else "error"
    return out
