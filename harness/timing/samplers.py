"""Samplers: the only code that turns GEMM calls into device-time samples.

One sample = the GPU time of a batch of calls divided by the batch size, measured so that host
launch cost cannot leak in (REFERENCES.md: a synchronous call costs 30-40 us of host time while
small kernels run 2-4 us):

* ``graph``: the batch is captured once as a CUDA graph; each sample replays it between two
  events. A spin kernel (``torch.cuda._sleep``) is queued first so the start event and the
  whole replay are enqueued before the GPU reaches them. Before the spin, one eager call on the
  input set the batch ends with (the prime; the L2 then holds what back-to-back replays leave, cold
  rotation included): on small split-K shapes cuBLAS's graph-replayed calls run at
  one of two levels, 8-10 % apart, and which one depends only on whether an eager GEMM call
  preceded the replay (lab/throughput/hostab-h100.md: 5.7 us after one, 6.2-6.3 us after another
  replay or an idle gap, any other eager kernel does not do it). The prime makes every sample start
  from the same state whatever ran before it, so a call's time no longer depends on the round
  order or how many entries share the rounds. It costs one call a sample, outside the events, so
  only batches of at least ``PRIME_MIN_BATCH`` calls take it (calls up to ~50 us at the 1 ms batch,
  where a 0.5 us level is 1 % or more; one more call costs them at most 5 % of the GPU time).
* ``spin-events``: for calls that cannot be captured, and for batches of one call (long
  kernels, where a graph would add nothing): spin kernel, start event, the direct launches,
  end event (nvbench's blocking-kernel method).
* ``events+flush``: cold cache where rotating input sets would need too many sets: a buffer of twice
  the L2 is overwritten before every single call, then spin, events around one call. The events add
  their own cost to that one call: on an H100, 64^3 read 4.74 us this way against 2.43 us for its
  kernel by CUPTI (warm, graph-timed: 2.08 us); the flush's tail was not the difference
  (synchronizing after it: 4.83 us; lab/throughput/cold_probe.py).
* ``cupti+flush`` (``OfflineSettings.cold_by_cupti``, the default; ``events+flush`` where CUPTI cannot
  trace or when it is off): the same flush, the GPU drained, then the call's own kernels timed by
  CUPTI (``kernel_clock``).
* ``host-clock``: CPU device: wall clock around the batch (the CPU is the device).

If the GPU reached the start event before the host finished enqueuing (the spin was too short),
the sample could contain launch gaps: it is thrown away and the spin doubled ("starved").
"""

from __future__ import annotations

import itertools
import time
from typing import Callable, Sequence

import torch

from harness.cuda_streams import current_stream_ptr
from harness.tensors import InputSet
from harness.timing.kernel_clock import KernelClock

PRIME_MIN_BATCH = 20  # graph samples of at least this many calls follow one eager call (see above)
SPIN_CYCLES_PER_US = 2000  # ~2 GHz boost clock; only sets how long the spin holds the stream
MAX_STARVED_RETRIES = 6


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class _StreamCache:
    """torch's current stream as a Stream object, rebuilt only when the raw stream changes.

    ``Event.record()`` without a stream asks ``torch.cuda.current_stream()``, which costs ~29 us of
    host time a call (measured on an H200 host: 35,000 records, 1.0 s of a 46 s compare of 40
    shapes); reading the raw pointer costs about 1 us. The events must sit on the stream the
    batch runs on, so the pointer is read at every sample, not assumed."""

    def __init__(self):
        self.ptr = None
        self.stream = None

    def current(self):
        ptr = current_stream_ptr()
        if ptr != self.ptr:
            self.stream = torch.cuda.current_stream()
            self.ptr = self.stream.cuda_stream
        return self.stream


class Sampler:
    """Base: ``sample()`` returns device microseconds per call for one batch."""

    kind = ""

    def __init__(self, fn: Callable, sets: Sequence[InputSet], batch: int):
        self.fn = fn
        self.sets = list(sets)
        self.batch = max(1, int(batch))
        self.starved = 0

    def _run_batch(self) -> None:
        n = len(self.sets)
        for i in range(self.batch):
            s = self.sets[i % n]
            self.fn(s.a, s.b, s.c)

    def sample(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


class HostClockSampler(Sampler):
    kind = "host-clock"

    def sample(self) -> float:
        t0 = time.perf_counter()
        self._run_batch()
        return (time.perf_counter() - t0) * 1e6 / self.batch


class _EventSampler(Sampler):
    """Shared spin-then-events logic for the CUDA samplers."""

    def __init__(self, fn, sets, batch, enqueue_us_guess: float):
        super().__init__(fn, sets, batch)
        self.spin_us = max(50.0, enqueue_us_guess)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self._streams = _StreamCache()

    def _prime(self) -> None:
        """Work queued before the spin, outside the timed span (none by default)."""

    def _enqueue(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _calls(self) -> int:
        return self.batch

    def sample(self) -> float:
        stream = self._streams.current()
        for _ in range(MAX_STARVED_RETRIES):
            self._prime()
            torch.cuda._sleep(int(self.spin_us * SPIN_CYCLES_PER_US))
            self.start.record(stream)
            self._enqueue()
            self.end.record(stream)
            reached_early = self.start.query()
            self.end.synchronize()
            if not reached_early:
                return self.start.elapsed_time(self.end) * 1000.0 / self._calls()
            self.starved += 1
            self.spin_us *= 2
        # Still starved with a long spin: the host is slower than the GPU at this batch. Report
        # the sample (it over-states device time) and let the count say so.
        return self.start.elapsed_time(self.end) * 1000.0 / self._calls()


class SpinEventsSampler(_EventSampler):
    kind = "spin-events"

    def __init__(self, fn, sets, batch):
        super().__init__(fn, sets, batch, enqueue_us_guess=50.0 + 40.0 * batch)

    def _enqueue(self) -> None:
        self._run_batch()


class GraphSampler(_EventSampler):
    kind = "graph"

    def __init__(self, fn, sets, batch, warmed: bool = False, prime: bool = True):
        """``warmed``: ``fn`` has already run on inputs of this shape (its lazy initialisation is
        done), so the warm-up calls before the capture are skipped. ``prime``: one eager call before
        each sample when the batch holds at least PRIME_MIN_BATCH calls (the module docstring says
        why; off only to measure what it changes)."""
        super().__init__(fn, sets, batch, enqueue_us_guess=50.0)
        self.prime = prime and self.batch >= PRIME_MIN_BATCH
        self.kind = "graph+prime" if self.prime else "graph"
        if not warmed:
            # Warm up on a side stream before capture (lazy library init must not be captured).
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for s in self.sets[:2]:
                    fn(s.a, s.b, s.c)
            torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._run_batch()
        torch.cuda.synchronize()

    def _prime(self) -> None:
        if self.prime:
            s = self.sets[(self.batch - 1) % len(self.sets)]
            self.fn(s.a, s.b, s.c)

    def _enqueue(self) -> None:
        self.graph.replay()

    def close(self) -> None:
        self.graph.reset()


class FlushSampler(_EventSampler):
    """Cold cache by overwriting an L2-sized scratch buffer before each single timed call."""

    kind = "events+flush"

    def __init__(self, fn, sets, flush_bytes: int):
        super().__init__(fn, sets, 1, enqueue_us_guess=50.0)
        self.scratch = torch.empty(max(1, flush_bytes), dtype=torch.uint8, device="cuda")
        self.i = 0

    def _enqueue(self) -> None:
        s = self.sets[self.i % len(self.sets)]
        self.i += 1
        self.fn(s.a, s.b, s.c)

    def sample(self) -> float:
        self.scratch.zero_()  # evicts C/A/B lines; ordered before the spin on the same stream
        return super().sample()


class CuptiFlushSampler(Sampler):
    """Cold cache by overwriting a scratch buffer before each single call, the call timed by its
    kernels' CUPTI records (module docstring). The flush runs in a window of its own and the GPU
    drains before the call, so neither is in the call's time."""

    kind = "cupti+flush"

    def __init__(self, fn, sets, flush_bytes: int, clock: KernelClock):
        super().__init__(fn, sets, 1)
        self.scratch = torch.empty(max(1, flush_bytes), dtype=torch.uint8, device="cuda")
        self.clock = clock
        self.i = 0

    def sample(self) -> float:
        s = self.sets[self.i % len(self.sets)]
        self.i += 1
        call = next(_CALL_IDS)
        flush_drained(self.scratch, self.clock, -call)
        self.clock.begin(call)
        self.fn(s.a, s.b, s.c)
        self.clock.end()
        torch.cuda.synchronize()
        span = self.clock.take(call)
        # take's flush handed CUPTI's buffer back; the next record makes CUPTI request and zero-fill
        # another. A one-byte flush in a window no call owns takes that cost here, not the host
        # time of whatever the caller runs next (offline's host_us call)
        flush_drained(self.scratch[:1], self.clock, -call)
        if span is None:
            raise RuntimeError(f"CUPTI delivered no record of the call ({self.clock.summary()})")
        return span.device_us


_CALL_IDS = itertools.count(1)  # call ids unique in the process (a KernelClock session needs them unique)


def flush_drained(scratch: torch.Tensor, clock: KernelClock | None = None, window: int = -1) -> None:
    """Overwrite ``scratch`` (twice the L2: every input line is evicted) and wait until the GPU is done.
    With a CUPTI session the memset runs in ``window``, a negative id no call owns, so it is in no
    call's time (server mode's cold calls, ``CuptiFlushSampler``)."""
    if clock:
        clock.begin(window)
    scratch.zero_()
    if clock:
        clock.end()
    torch.cuda.synchronize()


def host_call_us(fn: Callable, s: InputSet, device: str) -> float:
    """Wall-clock of one synchronous call as a Python user sees it (CUDA-L2's measure).

    Includes Python dispatch, launch, the kernel and the synchronize; the stream is drained
    first so earlier work is not counted."""
    _sync(device)
    t0 = time.perf_counter()
    fn(s.a, s.b, s.c)
    _sync(device)
    return (time.perf_counter() - t0) * 1e6


def estimate_call_us(fn: Callable, s: InputSet, device: str) -> float:
    """Rough device time of one warm call, used only to size batches.

    One warm-up call, then one timed call (behind a spin on CUDA); a 13 ms GEMM is not run
    more often than it must be."""
    fn(s.a, s.b, s.c)
    if device != "cuda":
        t0 = time.perf_counter()
        fn(s.a, s.b, s.c)
        return (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize()
    return SpinEventsSampler(fn, [s], 1).sample()


def make_sampler(
    fn: Callable,
    sets: Sequence[InputSet],
    device: str,
    capturable: bool,
    target_batch_us: float = 1000.0,
    max_batch: int = 500,
    flush_bytes: int = 0,
    call_us: float | None = None,
    warmed: bool = False,
    prime: bool = True,
    clock: KernelClock | None = None,
) -> Sampler:
    """Pick the sampler and batch size for one (method, layout) entry.

    The batch is sized so one sample lasts about ``target_batch_us`` (small kernels get many
    calls, a 13 ms GEMM gets one) and, when rotating input sets, covers every set. ``call_us``,
    when the caller knows it, is one call's device time; else one warm call is timed here.
    ``warmed``: ``fn`` has already run on inputs of this shape, so a known ``call_us`` needs no
    warm-up call before the first sample. ``prime``: a graph sample follows one eager call.
    ``clock``: an open CUPTI session, which times cold single calls (``flush_bytes``) by their kernels.
    """
    est = max(call_us if call_us is not None else estimate_call_us(fn, sets[0], device), 0.5)
    batch = int(min(max_batch, max(1, round(target_batch_us / est))))
    if device != "cuda":
        return HostClockSampler(fn, sets, batch)
    if flush_bytes:
        return CuptiFlushSampler(fn, sets, flush_bytes, clock) if clock else FlushSampler(fn, sets, flush_bytes)
    if len(sets) > 1:
        batch = max(batch, len(sets))
        batch = -(-batch // len(sets)) * len(sets)
    # A graph only removes gaps *between* calls; a batch of one is already gap-free behind the
    # spin kernel, so it skips the capture (which costs warm-up calls of a multi-ms GEMM).
    if capturable and batch > 1:
        try:
            # estimate_call_us (call_us unknown) has just run fn: it needs no second warm-up
            return GraphSampler(fn, sets, batch, warmed=warmed or call_us is None, prime=prime)
        except Exception:
            torch.cuda.synchronize()
    if call_us is not None and not warmed:
        fn(sets[0].a, sets[0].b, sets[0].c)  # the warm-up the estimate would have been (lazy module load)
    return SpinEventsSampler(fn, sets, batch)
