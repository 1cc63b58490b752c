"""Server mode's GPU clock on the CPU: CUPTI records -> per-call spans and idle gaps, the fallback
to CUDA events and its label, and a CUPTI that cannot trace (fake modules; no GPU here)."""

import json
import math
import sys
import types
from types import SimpleNamespace as NS

import pytest

from harness.timing.kernel_clock import (CallSpan, GpuOp, KernelClock, KernelClockUnavailable, _Sink, call_spans,
                                         ops_by_correlation, ops_by_window)
from harness.timing.offline import Measurement
from harness.timing.server import _device_times


def op(start, end, corr, kind="kernel"):
    return GpuOp(start, end, corr, kind)


# Three calls: call 7 launches a split-K GEMM and its reduction (API calls 11, 12), call 8 a memset
# and a GEMM (13, 14), call 9 launches nothing the GPU records. API call 15 is untagged work.
OPS = [op(1_000, 3_000, 11), op(3_500, 4_000, 12),
       op(10_000, 10_800, 13, "memset"), op(11_000, 15_000, 14),
       op(6_000, 7_000, 15)]
CALL_OF_API = {12: 7, 11: 7, 14: 8, 13: 8, 99: 9}  # as the external-correlation records arrive: any order


def test_ops_of_one_call_are_one_span_and_its_busy_time():
    spans = call_spans(ops_by_correlation(OPS, CALL_OF_API), OPS)
    assert set(spans) == {7, 8}  # call 9 had no operation: no span, never a zero
    assert spans[7] == CallSpan(1_000, 4_000, 2, None)  # nothing ran before the session's first call
    assert spans[7].span_us == 3.0 and spans[7].idle_us is None
    assert spans[7].device_us == 2.5  # 2 us GEMM + 0.5 us reduction; the 0.5 us between is dispatch
    assert spans[8].span_us == 5.0 and spans[8].device_us == 4.8 and spans[8].ops == 2


def test_idle_gap_runs_from_the_last_operation_before_the_call_tagged_or_not():
    spans = call_spans(ops_by_correlation(OPS, CALL_OF_API), OPS)
    assert spans[8].idle_ns == 10_000 - 7_000  # the untagged op at 6-7 us, not call 7's end at 4 us
    assert spans[8].idle_us == 3.0
    without_untagged = [o for o in OPS if o.correlation_id != 15]
    assert call_spans(ops_by_correlation(without_untagged, CALL_OF_API), without_untagged)[8].idle_ns == 6_000


def test_interleaved_records_map_by_correlation_not_by_order():
    shuffled = [OPS[3], OPS[0], OPS[4], OPS[2], OPS[1]]
    assert call_spans(ops_by_correlation(shuffled, CALL_OF_API), shuffled) == \
        call_spans(ops_by_correlation(OPS, CALL_OF_API), OPS)


def test_unstamped_operations_are_ignored():
    ops = [op(1_000, 2_000, 11), op(0, 0, 12), op(5_000, 4_000, 14)]  # CUPTI: zeros, end before start
    spans = call_spans(ops_by_correlation(ops, CALL_OF_API), ops)
    assert spans == {7: CallSpan(1_000, 2_000, 1, None)}  # call 8's only op is invalid: no span


def test_window_attribution_gives_each_call_the_operations_that_started_in_its_window():
    starts = {7: 500, 8: 9_000, 9: 20_000}
    grouped = ops_by_window(OPS + [op(100, 200, 0)], starts)  # 0.1 us: before every call, no one's
    assert sorted(o.correlation_id for o in grouped[7]) == [11, 12, 15]  # the window also holds untagged work
    assert sorted(o.correlation_id for o in grouped[8]) == [13, 14] and 9 not in grouped
    assert call_spans(grouped, OPS)[7].span_us == 6.0 and call_spans(grouped, OPS)[7].device_us == 3.5


def test_sink_copies_records_inside_the_callback_and_never_raises():
    sink = _Sink(op_kinds={10: "kernel", 2: "memset"}, external_kind=39, custom_kind=3)
    sink.completed([NS(kind=10, start=5, end=9, correlation_id=4), NS(kind=39, external_kind=3, correlation_id=4,
                                                                         external_id=77),
                    NS(kind=39, external_kind=1, correlation_id=5, external_id=1),  # another tool's id kind
                    NS(kind=5)])
    assert sink.ops == [GpuOp(5, 9, 4, "kernel")] and sink.call_of_api == {4: 77} and sink.other_records == 1
    sink.completed([NS(kind=10)])  # a record without timestamps: noted, not raised into CUPTI
    assert sink.errors and "AttributeError" in sink.errors[0]


def test_entry_is_cupti_only_when_every_call_has_a_span():
    clock = NS(summary=lambda: "5 GPU operation records")
    spans = {0: CallSpan(0, 2_000, 1, None), 3: CallSpan(9_000, 10_500, 2, 4_000)}
    m = Measurement()
    _device_times(m, [0, 3], [120.0, 130.0], spans, clock, "")
    assert m.timing_method == "cupti" and m.device_us == [2.0, 1.5] and m.timing_note == ""
    assert math.isnan(m.idle_us[0]) and m.idle_us[1] == 4.0

    m = Measurement()
    _device_times(m, [0, 3, 5], [120.0, 130.0, 140.0], spans, clock, "")
    assert m.timing_method == "events" and m.device_us == [120.0, 130.0, 140.0] and m.idle_us == []
    assert "1 of 3 calls had no GPU operation record" in m.timing_note and "5 GPU operation records" in m.timing_note


def test_no_clock_falls_back_to_events_with_the_reason():
    m = Measurement()
    _device_times(m, [0, 1], [120.0, 130.0], {}, None, "CUPTI unavailable: no driver")
    assert (m.timing_method, m.device_us, m.timing_note) == ("events", [120.0, 130.0], "CUPTI unavailable: no driver")


def test_open_without_cupti_python_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)  # import fails as if not installed
    with pytest.raises(KernelClockUnavailable, match="not importable"):
        KernelClock.open()


def _fake_cupti(fail_on=None):
    enabled, calls = [], []

    def enable(kind):
        if kind == fail_on:
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
        enabled.append(kind)

    kinds = types.SimpleNamespace(CONCURRENT_KERNEL=10, KERNEL=3, MEMSET=2, MEMCPY=1, EXTERNAL_CORRELATION=39,
                                  DRIVER=4, RUNTIME=5)
    mod = NS(ActivityKind=kinds, ExternalCorrelationKind=NS(CUSTOM0=3), enabled=enabled, calls=calls,
             activity_register_callbacks=lambda req, done: calls.append(("register", req, done)),
             activity_enable=enable, activity_disable=lambda k: enabled.remove(k),
             activity_push_external_correlation_id=lambda kind, i: calls.append(("push", i)),
             activity_pop_external_correlation_id=lambda kind: calls.append(("pop",)),
             activity_flush_all=lambda flag: calls.append(("flush", flag)),
             activity_get_num_dropped_records=lambda ctx, stream, ptr: None,
             get_timestamp=lambda: 123)
    return mod


@pytest.fixture
def fake_cupti(monkeypatch):
    import harness.timing.kernel_clock as kc

    def install(fail_on=None):
        mod = _fake_cupti(fail_on)
        monkeypatch.setitem(sys.modules, "cupti", NS(cupti=mod))
        monkeypatch.setattr(kc, "_SINK", None)
        return mod
    return install


def test_a_kind_that_will_not_enable_leaves_nothing_enabled(fake_cupti):
    mod = fake_cupti(fail_on=39)
    with pytest.raises(KernelClockUnavailable, match="NOT_INITIALIZED"):
        KernelClock.open("correlation")  # kind 39 (external correlation) is enabled by it alone
    assert mod.enabled == []


def test_a_session_tags_calls_and_maps_what_the_flush_delivers(fake_cupti):
    mod = fake_cupti()
    clock = KernelClock.open("correlation")
    assert set(mod.enabled) == {10, 2, 1, 39, 4, 5}
    done = next(c[2] for c in mod.calls if c[0] == "register")
    for i in (7, 8):
        clock.begin(i)
        clock.end()
    assert [c for c in mod.calls if c[0] in ("push", "pop")] == [("push", 7), ("pop",), ("push", 8), ("pop",)]
    mod.activity_flush_all = lambda flag: done([NS(kind=10, start=1_000, end=3_000, correlation_id=11),
                                                NS(kind=39, external_kind=3, correlation_id=11, external_id=7)])
    spans = clock.close()
    assert spans == {7: CallSpan(1_000, 3_000, 1, None)} and mod.enabled == []  # tracing off after the session
    assert "1 GPU operation records" in clock.summary()


def test_a_failure_inside_the_session_yields_no_spans(fake_cupti):
    mod = fake_cupti()
    clock = KernelClock.open("window")
    assert set(mod.enabled) == {10, 2, 1}  # windows need no API records
    mod.get_timestamp = lambda: (_ for _ in ()).throw(RuntimeError("lost"))
    clock.begin(0)
    assert clock.close() == {} and "begin: RuntimeError: lost" in clock.summary() and mod.enabled == []


def test_call_times_give_each_call_a_window_and_return_its_device_time(fake_cupti):
    """``CallTimes``: each ``call`` opens a window (also when the call raises) and one after it, so work the
    caller runs between calls is no call's; no API records are asked for; ``close`` gives device microseconds per
    call and turns tracing off."""
    from harness.timing.kernel_clock import CallTimes

    mod = fake_cupti()
    clock = iter(range(1_000, 100_000, 1_000))  # CUPTI's timestamps at each window: 1, 2, 3 ... us
    mod.get_timestamp = lambda: next(clock)
    times = CallTimes()
    assert times.unavailable is None and set(mod.enabled) == {10, 2, 1}
    done = next(c[2] for c in mod.calls if c[0] == "register")
    assert times.call(0, lambda x, y: x + y, 2, 3) == 5  # window 1-2 us, then the gap from 2 us

    def boom():
        raise RuntimeError("candidate failed")
    with pytest.raises(RuntimeError, match="candidate failed"):
        times.call(1, boom)  # 3-4 us
    times.call(2, lambda: None)  # 5-6 us
    with pytest.raises(ValueError):
        times.call(-1, lambda: None)
    mod.activity_flush_all = lambda flag: done([
        NS(kind=10, start=1_100, end=1_600, correlation_id=11), NS(kind=10, start=1_700, end=1_900, correlation_id=12),
        NS(kind=2, start=2_100, end=2_900, correlation_id=13),  # a fill between calls: the gap's window
        NS(kind=10, start=5_200, end=5_600, correlation_id=14)])
    assert times.close() == {0: 0.7, 2: 0.4} and mod.enabled == []
    assert times.close() == {}  # closed once


def test_call_times_raise_the_calls_own_error_when_the_synchronization_after_it_fails(fake_cupti, monkeypatch):
    """A call that raised leaves the device in an error state the synchronization after it reports again (a sticky
    CUDA error): the caller gets the call's own error, and the window after the call still opens."""
    from harness.timing import kernel_clock
    from harness.timing.kernel_clock import CallTimes

    mod = fake_cupti()
    mod.get_timestamp = iter(range(1_000, 100_000, 1_000)).__next__
    times = CallTimes()
    opened = []
    real_begin = times._clock.begin
    monkeypatch.setattr(times._clock, "begin", lambda i: (opened.append(i), real_begin(i)))
    broken = [False]

    def sync():
        if broken[0]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(kernel_clock, "_synchronize", sync)

    def candidate():
        broken[0] = True
        raise ValueError("candidate 3 failed")
    with pytest.raises(ValueError, match="candidate 3 failed"):
        times.call(3, candidate)
    assert opened == [3, -4]
    with pytest.raises(RuntimeError, match="illegal memory access"):  # the next call: the error before its window
        times.call(4, lambda: None)
    assert opened == [3, -4]


def test_call_times_without_cupti_call_straight_through_and_say_why(monkeypatch):
    from harness.timing.kernel_clock import CallTimes

    monkeypatch.setitem(sys.modules, "cupti", None)
    times = CallTimes()
    assert "not importable" in times.unavailable
    assert times.call(0, lambda: 7) == 7 and times.close() == {}


def test_real_cupti_python_without_a_gpu_is_unavailable_not_a_crash():
    pytest.importorskip("cupti")
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: CUPTI may trace here")
    with pytest.raises(KernelClockUnavailable):
        KernelClock.open()


def test_server_rows_carry_idle_samples_and_the_fallback_note():
    from harness.evaluate import ShapeEvaluator
    from harness.results import SAMPLE_SCHEMA, rows_to_table

    row = dict(run_id="r", gpu_uuid="GPU-1", shape="64_64_64", layout="nn", method="torch", mode="server",
               cache="warm", m=64, n=64, k=64, info='{"algo": 3}')
    m = Measurement(device_us=[2.0, 2.5], host_us=[40.0, 45.0], idle_us=[math.nan, 4000.0], timing_method="cupti",
                    calls_per_batch=1, round_sm_mhz=[1980.0, 1980.0])
    samples = ShapeEvaluator._sample_rows(m, row)
    assert ([(s["metric"], s["round"], s["value"]) for s in samples if s["metric"] == "idle_us"]
            == [("idle_us", 1, 4000.0)])
    assert rows_to_table(samples, SAMPLE_SCHEMA).num_rows == 5
    cols = ShapeEvaluator._timing_columns(None, m, row, 1)
    assert cols["timing_method"] == "cupti" and "info" not in cols  # nothing to note
    assert cols["idle_us_median"] == 4000.0  # the session's first call has no idle gap: left out

    m = Measurement(device_us=[150.0], host_us=[160.0], timing_method="events", timing_note="CUPTI unavailable: x")
    cols = ShapeEvaluator._timing_columns(None, m, row, 1)
    info = json.loads(cols["info"])
    assert info["algo"] == 3 and info["timing_note"] == "CUPTI unavailable: x" and "idle_us_median" not in cols
    # compare prints a row warning for it (harness.summary.row_warnings)
    assert info["warnings"] == ["server device_us from CUDA events, host dispatch included (CUPTI unavailable: x)"]


def test_device_time_is_the_ops_union_not_the_span_with_a_dispatch_gap():
    """A split-K call: GEMM 0-10 us, the host launches the reduction late, it runs 30-33 us. The
    GPU's own time is 13 us; the span (33 us) holds the host's dispatch gap."""
    from harness.timing.kernel_clock import GpuOp, call_spans

    ops = [GpuOp(1_000, 11_000, 1), GpuOp(31_000, 34_000, 2), GpuOp(32_000, 33_500, 3, "memset")]
    span = call_spans({0: ops}, ops)[0]
    assert span.device_us == pytest.approx(13.0) and span.span_us == pytest.approx(33.0) and span.ops == 3


def test_the_default_session_traces_operations_only(fake_cupti):
    """The default attribution enables no API records (they cost the caller host time)."""
    mod = fake_cupti()
    KernelClock.open()
    assert set(mod.enabled) == {10, 2, 1}


def test_take_reads_each_call_while_the_session_goes_on(fake_cupti):
    """Offline cold samples: a flush in a window no call owns, then the call; ``take`` returns the
    call's span from what the flush delivered and forgets the records before it."""
    mod = fake_cupti()
    clock = KernelClock.open()
    done = next(c[2] for c in mod.calls if c[0] == "register")
    stamps = iter([100, 1_000, 20_000, 30_000])
    mod.get_timestamp = lambda: next(stamps)
    delivered = []
    mod.activity_flush_all = lambda flag: (done(delivered[:]), delivered.clear())
    clock.begin(-1)  # flush window
    clock.begin(1)
    delivered += [NS(kind=2, start=200, end=900, correlation_id=5),  # the flush's memset
                  NS(kind=10, start=1_500, end=3_900, correlation_id=6)]
    assert clock.take(1) == CallSpan(1_500, 3_900, 1, 600)
    clock.begin(-2)
    clock.begin(2)
    delivered += [NS(kind=2, start=20_100, end=29_000, correlation_id=7),
                  NS(kind=10, start=30_500, end=31_000, correlation_id=8),
                  NS(kind=10, start=31_200, end=32_000, correlation_id=9)]  # split-K and its reduction
    span = clock.take(2)
    assert (span.start_ns, span.end_ns, span.ops, span.device_us) == (30_500, 32_000, 2, 1.3)
    assert [o.start_ns for o in clock._sink.ops] == [30_500, 31_200]  # the records before the call are dropped


def test_a_session_read_call_by_call_asks_cupti_for_small_buffers(fake_cupti):
    """CUPTI zero-fills each buffer it requests, and ``take`` flushes after every call: offline cold's
    session asks for 1 MB buffers, a whole-session one (server mode) for 64 MB."""
    from harness.timing.kernel_clock import BUFFER_BYTES, TAKE_BUFFER_BYTES
    from harness.timing.offline import OfflineSettings, _cold_clock

    mod = fake_cupti()
    clock = KernelClock.open()
    requested = next(c[1] for c in mod.calls if c[0] == "register")
    assert requested() == (BUFFER_BYTES, 0)
    clock.close()
    cold, note = _cold_clock("cuda", OfflineSettings(flush_bytes=1 << 20, cold_by_cupti=True))
    assert note == "" and requested() == (TAKE_BUFFER_BYTES, 0) and TAKE_BUFFER_BYTES <= 1 << 20
    cold.close()


def test_take_without_a_record_of_the_call_is_none(fake_cupti):
    mod = fake_cupti()
    clock = KernelClock.open()
    clock.begin(1)
    assert clock.take(1) is None and sum(c == ("flush", 1) for c in mod.calls) == 3  # asked three times
    mod.activity_flush_all = lambda flag: (_ for _ in ()).throw(RuntimeError("gone"))
    assert clock.take(1) is None and "flush: RuntimeError: gone" in clock.summary()


def test_offline_cold_asks_cupti_only_for_flushed_cuda_groups(monkeypatch):
    from harness.timing.offline import OfflineSettings, _cold_clock

    assert _cold_clock("cpu", OfflineSettings(flush_bytes=1 << 20, cold_by_cupti=True)) == (None, "")
    assert _cold_clock("cuda", OfflineSettings(cold_by_cupti=True)) == (None, "")
    assert _cold_clock("cuda", OfflineSettings(flush_bytes=1 << 20, cold_by_cupti=False)) == (None, "")  # events
    monkeypatch.setitem(sys.modules, "cupti", None)
    clock, note = _cold_clock("cuda", OfflineSettings(flush_bytes=1 << 20, cold_by_cupti=True))
    assert clock is None and note.startswith("CUPTI unavailable (cupti-python not importable")
