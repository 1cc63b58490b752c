"""The GPU's own timestamps on each isolated call, from CUPTI activity records (cupti-python).

Owns CUPTI for one session of isolated calls (server mode; offline cold samples of shapes that flush the
L2; ``CallTimes``: calls a method makes while it prepares): ``KernelClock.open`` turns on activity
records for GPU operations (kernels, memsets, memory copies), ``begin``/``end`` tag each call, ``take``
reads one call's span while the session goes on, and ``close`` collects the records and maps them to
calls. A call's device time is the time the GPU spent on its operations (the union of their intervals),
so the several kernels of one call (split-K and its reduction, a memset before a GEMM) are one call and
a host launch gap between them is not in it; its span (first start to last end) is kept beside. The idle
time before a call runs from the end of the last operation recorded before it. The mapping is plain
functions on plain records (``ops_by_correlation``, ``ops_by_window``, ``call_spans``).

Two ways to tell which operations belong to which call (``ATTRIBUTIONS``):

* ``correlation``: an external correlation id is pushed around each call; CUPTI then writes an
  external-correlation record for every CUDA API record made under it, pairing the API call's
  correlation id (which its kernels carry) with the call's id. External-correlation records are
  written only for API records, so driver and runtime API records are on too.
* ``window`` (the default): each call owns the operations that start between its CUPTI timestamp
  and the next call's. Needs only the operation records; exact because server calls are serial
  (each call synchronizes before the next begins). Tracing API calls costs the caller host time:
  measured on an H200 (``lab/throughput/cupti_overhead.py``, torch.matmul, 540 calls a mode),
  host_us medians of 189 / 227 / 207 us at 64^3 with no CUPTI / ``correlation`` / ``window``, and
  326 / 361 / 342 us at 4096^3, the device times equal between the two attributions.

Must not: be imported by anything that runs without a GPU at import time (``cupti`` is imported
inside ``open``), or let a CUPTI failure escape as anything but ``KernelClockUnavailable`` from
``open``; a failure during a session marks the clock ``failed`` and ``close`` returns no spans, so
the caller times with CUDA events instead and says so.
"""

from __future__ import annotations

import bisect
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

ATTRIBUTIONS = ("correlation", "window")
DEFAULT_ATTRIBUTION = "window"  # half the host-time cost of "correlation" (module docstring)
# One buffer holds a whole session's records (about 200 bytes an operation, 50 an API call), so
# CUPTI hands it back only at the flush in ``close``, on the caller's thread: no Python callback
# runs on CUPTI's own thread while the caller holds the GIL inside a CUDA call.
BUFFER_BYTES = 64 << 20
# A session read call by call (``take``) flushes after every call, and CUPTI zero-fills each new
# buffer it requests: 64 MB cost about 36 ms of the next caller's host time (an H100, offline cold
# at 64^3). A call and its flush leave a few records; 1 MB holds about 5,000.
TAKE_BUFFER_BYTES = 1 << 20


class KernelClockUnavailable(RuntimeError):
    """CUPTI cannot trace here (no cupti-python, no driver support, another tracer): the reason."""


@dataclass(frozen=True)
class GpuOp:
    """One operation the GPU ran, as CUPTI stamped it (ns on CUPTI's clock)."""

    start_ns: int
    end_ns: int
    correlation_id: int  # the CUDA API call that launched it
    kind: str = "kernel"  # kernel | memset | memcpy

    @property
    def valid(self) -> bool:
        """CUPTI writes zero timestamps for an operation it could not stamp."""
        return self.start_ns > 0 and self.end_ns >= self.start_ns


@dataclass(frozen=True)
class CallSpan:
    """One call on the GPU: its operations' first start to last end, the time the GPU was busy
    with them, and the idle gap before it."""

    start_ns: int
    end_ns: int
    ops: int
    idle_ns: int | None  # None: nothing ran before it in this session
    busy_ns: int | None = field(default=None, compare=False)  # its operations' intervals' union; None: the span

    @property
    def device_us(self) -> float:
        """The GPU's own time for the call: the union of its operations' intervals. A gap between
        two of its kernels (a split-K GEMM and its reduction) is the host launching the second
        one after the GPU finished the first: host dispatch, which offline graphs remove too."""
        return (self.busy_ns if self.busy_ns is not None else self.end_ns - self.start_ns) / 1000.0

    @property
    def span_us(self) -> float:
        """First start to last end: the call's latency on the GPU, dispatch gaps included."""
        return (self.end_ns - self.start_ns) / 1000.0

    @property
    def idle_us(self) -> float | None:
        return None if self.idle_ns is None else self.idle_ns / 1000.0


def ops_by_correlation(ops: Iterable[GpuOp], call_of_api: Mapping[int, int]) -> dict[int, list[GpuOp]]:
    """Operations grouped by call, through the external-correlation records' pairs
    (CUDA API correlation id -> call id); operations of untagged API calls belong to no call."""
    out: dict[int, list[GpuOp]] = {}
    for op in ops:
        call = call_of_api.get(op.correlation_id)
        if call is not None and op.valid:
            out.setdefault(call, []).append(op)
    return out


def ops_by_window(ops: Iterable[GpuOp], call_starts: Mapping[int, int]) -> dict[int, list[GpuOp]]:
    """Operations grouped by call: each belongs to the last call that began (CUPTI timestamp in
    ``call_starts``) at or before the operation's start; one that started before every call
    belongs to none."""
    order = sorted(call_starts.items(), key=lambda kv: kv[1])
    starts = [t for _, t in order]
    out: dict[int, list[GpuOp]] = {}
    for op in ops:
        i = bisect.bisect_right(starts, op.start_ns) - 1
        if i >= 0 and op.valid:
            out.setdefault(order[i][0], []).append(op)
    return out


def call_spans(ops_of_call: Mapping[int, Sequence[GpuOp]], all_ops: Iterable[GpuOp]) -> dict[int, CallSpan]:
    """Each call's span, and its idle gap: from the latest end among all of the session's valid
    operations (a call's or not) that ended before the call's first start."""
    ends = sorted(op.end_ns for op in all_ops if op.valid)
    out = {}
    for call, ops in ops_of_call.items():
        ops = [op for op in ops if op.valid]
        if not ops:
            continue
        start, end = min(op.start_ns for op in ops), max(op.end_ns for op in ops)
        i = bisect.bisect_left(ends, start)
        out[call] = CallSpan(start, end, len(ops), start - ends[i - 1] if i > 0 else None, _union_ns(ops))
    return out


def _union_ns(ops: Sequence[GpuOp]) -> int:
    """Nanoseconds covered by the operations' intervals (overlaps counted once)."""
    busy, reach = 0, None
    for op in sorted(ops, key=lambda o: o.start_ns):
        if reach is None or op.start_ns >= reach:
            busy += op.end_ns - op.start_ns
            reach = op.end_ns
        elif op.end_ns > reach:
            busy += op.end_ns - reach
            reach = op.end_ns
    return busy


@dataclass
class _Sink:
    """What the buffer-completed callback extracted, as plain values: CUPTI's record objects view
    its buffer, which is freed once the callback returns."""

    ops: list[GpuOp] = field(default_factory=list)
    call_of_api: dict[int, int] = field(default_factory=dict)
    other_records: int = 0
    errors: list[str] = field(default_factory=list)
    op_kinds: dict[int, str] = field(default_factory=dict)
    external_kind: int = -1
    custom_kind: int = -1
    buffer_bytes: int = BUFFER_BYTES  # the open session's (``KernelClock.open``)

    def requested(self):
        return self.buffer_bytes, 0

    def completed(self, activities) -> None:
        try:
            for a in activities:
                k = int(a.kind)
                tag = self.op_kinds.get(k)
                if tag is not None:
                    self.ops.append(GpuOp(int(a.start), int(a.end), int(a.correlation_id), tag))
                elif k == self.external_kind:
                    if int(a.external_kind) == self.custom_kind:
                        self.call_of_api[int(a.correlation_id)] = int(a.external_id)
                else:
                    self.other_records += 1
        except Exception as e:  # never raise into CUPTI
            self.errors.append(f"{type(e).__name__}: {e}")

    def clear(self) -> None:
        self.ops, self.call_of_api, self.other_records, self.errors = [], {}, 0, []


_SINK: _Sink | None = None  # CUPTI takes one pair of buffer callbacks per process


def _sink(cupti: Any) -> _Sink:
    global _SINK
    if _SINK is None:
        kinds = cupti.ActivityKind
        sink = _Sink(op_kinds={int(kinds.CONCURRENT_KERNEL): "kernel", int(kinds.KERNEL): "kernel",
                               int(kinds.MEMSET): "memset", int(kinds.MEMCPY): "memcpy"},
                     external_kind=int(kinds.EXTERNAL_CORRELATION),
                     custom_kind=int(cupti.ExternalCorrelationKind.CUSTOM0))
        cupti.activity_register_callbacks(sink.requested, sink.completed)
        _SINK = sink
    return _SINK


class KernelClock:
    """CUPTI tracing for one session of isolated calls: ``open``, ``begin(i)``/``end()`` around
    each call, ``close`` for the spans. One session at a time in a process."""

    def __init__(self, cupti: Any, sink: _Sink, kinds: list, attribution: str):
        self._cupti, self._sink, self._kinds, self.attribution = cupti, sink, kinds, attribution
        self._call_starts: dict[int, int] = {}
        self._custom = cupti.ExternalCorrelationKind.CUSTOM0
        self.failed: str | None = None
        self.dropped: int | None = None

    @classmethod
    def open(cls, attribution: str = DEFAULT_ATTRIBUTION, buffer_bytes: int = BUFFER_BYTES) -> KernelClock:
        """``buffer_bytes``: of each buffer CUPTI asks for (``TAKE_BUFFER_BYTES`` for a session read
        by ``take``)."""
        if attribution not in ATTRIBUTIONS:
            raise ValueError(f"attribution must be one of {ATTRIBUTIONS}, got {attribution!r}")
        try:
            from cupti import cupti
        except Exception as e:  # not installed, or its library does not load
            raise KernelClockUnavailable(f"cupti-python not importable ({type(e).__name__}: {e})") from e
        k = cupti.ActivityKind
        kinds = [k.CONCURRENT_KERNEL, k.MEMSET, k.MEMCPY]
        if attribution == "correlation":
            kinds += [k.EXTERNAL_CORRELATION, k.DRIVER, k.RUNTIME]
        enabled = []
        try:
            sink = _sink(cupti)
            sink.clear()
            sink.buffer_bytes = buffer_bytes
            for kind in kinds:
                cupti.activity_enable(kind)
                enabled.append(kind)
        except Exception as e:
            for kind in enabled:
                try:
                    cupti.activity_disable(kind)
                except Exception:
                    pass
            raise KernelClockUnavailable(f"CUPTI activity tracing failed to start ({type(e).__name__}: {e})") from e
        return cls(cupti, sink, enabled, attribution)

    def begin(self, call_id: int) -> None:
        """Just before call ``call_id`` is launched (ids unique within the session)."""
        if self.failed:
            return
        try:
            if self.attribution == "correlation":
                self._cupti.activity_push_external_correlation_id(self._custom, call_id)
            else:
                self._call_starts[call_id] = self._cupti.get_timestamp()
        except Exception as e:
            self.failed = f"begin: {type(e).__name__}: {e}"

    def end(self) -> None:
        """Just after the call's launches returned (before synchronizing)."""
        if self.failed or self.attribution != "correlation":
            return
        try:
            self._cupti.activity_pop_external_correlation_id(self._custom)
        except Exception as e:
            self.failed = f"end: {type(e).__name__}: {e}"

    def take(self, call_id: int) -> CallSpan | None:
        """Call ``call_id``'s span now, while the session goes on (offline cold samples, one call at
        a time): call after it synchronized. Flushes CUPTI's buffer; the records of operations that
        began before the call are then dropped, so each take reads only what came since. None when
        no record of the call arrived or the session failed."""
        if self.failed:
            return None
        cupti, sink = self._cupti, self._sink
        for wait_s in (0.0, 0.001, 0.01):  # as in close: a buffer can arrive just after the flush returns
            time.sleep(wait_s)
            try:
                cupti.activity_flush_all(1)
            except Exception as e:
                self.failed = f"flush: {type(e).__name__}: {e}"
                return None
            if sink.errors:
                self.failed = f"reading records: {sink.errors[0]}"
                return None
            span = call_spans({call_id: self._ops_by_call().get(call_id, [])}, sink.ops).get(call_id)
            if span is not None:
                sink.ops = [op for op in sink.ops if op.start_ns >= span.start_ns]
                self._call_starts = {call_id: self._call_starts[call_id]} if call_id in self._call_starts else {}
                return span
        return None

    def close(self) -> dict[int, CallSpan]:
        """Deliver the records (call after the last call synchronized), turn tracing off, and map
        operations to calls. Empty when the session failed."""
        cupti, sink = self._cupti, self._sink
        for wait_s in (0.0, 0.05, 0.2):  # a buffer delivered after the flush returned: ask again, briefly
            time.sleep(wait_s)
            try:
                cupti.activity_flush_all(1)  # forced: also a buffer that is not full
            except Exception as e:
                self.failed = self.failed or f"flush: {type(e).__name__}: {e}"
            if sink.ops or self.failed:
                break
        self.dropped = _dropped(cupti)
        for kind in self._kinds:
            try:
                cupti.activity_disable(kind)
            except Exception:
                pass
        if sink.errors:
            self.failed = self.failed or f"reading records: {sink.errors[0]}"
        if self.failed:
            return {}
        return call_spans(self._ops_by_call(), sink.ops)

    def _ops_by_call(self) -> dict[int, list[GpuOp]]:
        """The records delivered so far, grouped by call under the session's attribution."""
        if self.attribution == "correlation":
            return ops_by_correlation(self._sink.ops, self._sink.call_of_api)
        return ops_by_window(self._sink.ops, self._call_starts)

    def summary(self) -> str:
        """The session's record counts, for a note beside a fallback."""
        s = self._sink
        parts = [f"{len(s.ops)} GPU operation records", f"{len(s.call_of_api)} external correlations",
                 f"attribution {self.attribution}"]
        if self.dropped:
            parts.append(f"{self.dropped} records dropped")
        if self.failed:
            parts.append(f"failed: {self.failed}")
        return ", ".join(parts)


class CallTimes:
    """Each tagged call's device time from one ``window`` session: for a caller that makes the calls anyway and
    wants their GPU time without calling again (cuBLASLt autotune's validation pass, one eager call of each
    candidate, screens the candidates for ``time_candidates``). The calls need not be isolated: ``call``
    synchronizes before and after the call and opens a window for it and one after it, so what the caller runs
    between calls (filling an output, checking it) falls in no call's window. Windows, not correlation ids: the
    driver and runtime API records that correlation needs cost about 1.8 ms a torch.matmul call (H100,
    ``lab/throughput/ab-h100.md``), two synchronizations a call some tens of microseconds. Where CUPTI cannot trace,
    ``unavailable`` says why and ``close`` returns {}; the caller then screens by graph rounds as before.
    """

    def __init__(self) -> None:
        self.unavailable: str | None = None
        self._clock: KernelClock | None = None
        try:
            self._clock = KernelClock.open("window")
        except KernelClockUnavailable as e:
            self.unavailable = str(e)

    def call(self, call_id: int, fn, *args):
        """``fn(*args)`` in a window of its own (``call_id`` >= 0, unique within the session)."""
        if self._clock is None:
            return fn(*args)
        if call_id < 0:
            raise ValueError(f"call ids are >= 0 (the windows between calls take the negative ones): {call_id}")
        _synchronize()  # what ran before starts before the window
        self._clock.begin(call_id)
        try:
            result = fn(*args)
        except BaseException:
            # the call's own error is the one to raise: after a sticky CUDA error the synchronization raises too
            with contextlib.suppress(Exception):
                _synchronize()
            raise
        else:
            _synchronize()  # the call ends inside its window
        finally:
            self._clock.begin(-1 - call_id)  # what the caller runs next is no call's
        return result

    def close(self) -> dict[int, float]:
        """Device microseconds of each call that launched GPU work (synchronizes first); tracing ends."""
        if self._clock is None:
            return {}
        clock, self._clock = self._clock, None
        try:
            _synchronize()
        finally:
            spans = clock.close()
        if clock.failed:
            self.unavailable = clock.summary()
        return {i: span.device_us for i, span in spans.items() if i >= 0}


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _dropped(cupti: Any) -> int | None:
    """Records CUPTI dropped for want of buffer space (None: it would not say)."""
    try:
        import numpy as np

        out = np.zeros(1, dtype=np.uint64)
        cupti.activity_get_num_dropped_records(0, 0, out.ctypes.data)
        return int(out[0])
    except Exception:
        return None
