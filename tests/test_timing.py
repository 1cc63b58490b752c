"""The timing core on the CPU path, with calls whose cost we control."""

import random
import time

import pytest

from harness.tensors import InputSet
from harness.timing import Entry, OfflineSettings, measure_offline, measure_server, time_candidates
from harness.timing.server import poisson_arrivals


def busy(us):
    def fn(a, b, c):
        end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < end:
            pass
    return fn


SETS = [InputSet(None, None, None)]


def test_offline_ratio_order_and_stop_rule():
    calls = []

    def tagged(tag, us):
        f = busy(us)
        def fn(a, b, c):
            calls.append(tag)
            f(a, b, c)
        return fn

    entries = [Entry("slow", tagged("slow", 400), SETS), Entry("fast", tagged("fast", 200), SETS)]
    res = measure_offline(entries, "cpu", OfflineSettings(ci_target=0.05, min_rounds=5, max_rounds=60, budget_s=20,
                                                          target_batch_us=2000, seed=3))
    slow, fast = res["slow"], res["fast"]
    # busy-waits on a shared 2-core CI machine get preempted, which only ever adds time, and on a
    # busy machine in more than half the rounds (the medians' ratio once came out 3.3): the
    # fastest round of each is the clean one. Bounds stay loose, but a harness that mixed up
    # entries or batches would land at 1.0 or 0.5.
    ratio = min(slow.device_us) / min(fast.device_us)
    assert 1.5 < ratio < 2.6
    assert slow.stop_reason in ("ci", "max_rounds") and 5 <= len(slow.device_us) <= 60
    # a host sample in each of the first host_rounds rounds
    assert len(slow.device_us) == len(fast.device_us) and len(slow.host_us) == min(len(slow.device_us), 10)
    assert slow.timing_method == "host-clock" and fast.calls_per_batch > slow.calls_per_batch >= 2
    # interleaving: the order of first calls differs between rounds (not always slow-then-fast)
    firsts = [calls[i] for i in range(len(calls)) if i == 0 or calls[i] != calls[i - 1]]
    assert firsts.count("slow") > 1 and firsts.count("fast") > 1


def test_offline_budget_stops_and_errors_are_isolated():
    def broken(a, b, c):
        raise RuntimeError("boom")

    entries = [Entry("ok", busy(100), SETS), Entry("bad", broken, SETS)]
    t0 = time.monotonic()
    res = measure_offline(entries, "cpu", OfflineSettings(ci_target=0.0, min_rounds=3, max_rounds=10**6, budget_s=0.3))
    assert time.monotonic() - t0 < 3
    assert res["ok"].stop_reason == "budget" and res["ok"].device_us
    assert res["bad"].error and "boom" in res["bad"].error and res["bad"].stop_reason == "error"


def test_time_candidates_ranks_and_scores_failures_inf():
    def broken(a, b, c):
        raise ValueError("bad algo")
    t = time_candidates([busy(300), busy(100), broken], (None, None, None), "cpu", rounds=3)
    assert t[1] < t[0] and t[2] == float("inf")


def test_poisson_arrivals_rate():
    arr = poisson_arrivals(20000, 200.0, random.Random(0))
    gaps = [b - a for a, b in zip([0.0] + arr, arr)]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(1 / 200, rel=0.03)
    assert sorted(gaps)[len(gaps) // 2] == pytest.approx(0.005 * 0.693, rel=0.05)  # exponential median


def test_server_mode_paces_calls_and_measures_latency():
    entries = [Entry("a", busy(50), SETS), Entry("b", busy(150), SETS)]
    t0 = time.perf_counter()
    res = measure_server(entries, "cpu", qps=400, calls_per_entry=40, seed=1)
    wall = time.perf_counter() - t0
    assert 80 / 400 * 0.6 < wall < 80 / 400 * 2.0  # paced by arrivals, not back to back
    for key, us in (("a", 50), ("b", 150)):
        m = res[key]
        assert len(m.device_us) == len(m.host_us) == 40 and m.stop_reason == "calls"
        med = sorted(m.device_us)[20]
        assert us <= med < us * 3
        assert all(h >= d * 0.9 for h, d in zip(m.host_us, m.device_us))  # latency includes the call
    with pytest.raises(ValueError, match="qps"):
        measure_server(entries, "cpu", qps=0, calls_per_entry=1)


def test_server_mode_interleaves_methods_within_a_layout_and_runs_layouts_in_blocks():
    """Entries that share operands (one B layout) are interleaved; another layout's entries run in
    their own block, so no call finds its matrices evicted by the other layout's (the L2 state of a
    32 MB weight matrix otherwise depended on the call before)."""
    order = []

    def tagged(tag):
        return lambda a, b, c: order.append(tag)

    nn_sets, tn_sets = [InputSet(None, None, None)], [InputSet(None, None, None)]
    entries = [Entry("x-nn", tagged("x-nn"), nn_sets), Entry("x-tn", tagged("x-tn"), tn_sets),
               Entry("y-nn", tagged("y-nn"), nn_sets), Entry("y-tn", tagged("y-tn"), tn_sets)]
    res = measure_server(entries, "cpu", qps=5000, calls_per_entry=12, seed=3)
    assert all(len(res[e.key].device_us) == 12 for e in entries)
    layouts = [t[-2:] for t in order]
    assert layouts == ["nn"] * 24 + ["tn"] * 24  # one block per layout
    first = order[:24]
    assert first != sorted(first) and 0 < first[:12].count("x-nn") < 12  # methods interleaved inside it


def test_time_candidates_successive_halving_times_finalists_longer():
    counts = {}

    def counted(i, us):
        f = busy(us)
        def fn(a, b, c):
            counts[i] = counts.get(i, 0) + 1
            f(a, b, c)
        return fn

    fns = [counted(i, 100 + 60 * i) for i in range(12)]
    t = time_candidates(fns, (None, None, None), "cpu", rounds=6, screen_rounds=2, keep_fraction=0.25)
    assert min(range(12), key=lambda i: t[i]) == 0
    assert counts[0] > counts[11] * 2  # the fastest was re-timed, the slowest only screened
    assert all(x < float("inf") for x in t)


def test_time_candidates_sizes_every_batch_from_one_call_and_screens_long_calls_once(monkeypatch):
    """One call's time sizes every candidate's batches (no per-candidate estimate calls), a call
    longer than a screening batch is screened in one round of one call, and ``screen_batch_us``
    sets the screening batch (the last candidate is never a finalist: only its screening calls).

    The samplers read a clock that advances only by each call's cost: the counts depend on the
    one sizing call's time, which a preempted busy-wait on a shared host would inflate."""
    import types

    from harness.timing import samplers
    from harness.timing.offline import SCREEN_BATCH_US

    now = [0.0]
    monkeypatch.setattr(samplers, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def run(us, **kw):
        counts = {}

        def counted(i):
            def fn(a, b, c):
                counts[i] = counts.get(i, 0) + 1
                now[0] += us * (1 + 0.5 * i) * 1e-6
            return fn

        time_candidates([counted(i) for i in range(12)], (None, None, None), "cpu", rounds=5, screen_rounds=2, **kw)
        return counts

    long = run(2 * SCREEN_BATCH_US)
    assert long[11] == 1  # screened by one call, never estimated on its own
    short = run(SCREEN_BATCH_US / 8)
    batch = SCREEN_BATCH_US / (SCREEN_BATCH_US / 8)
    assert short[11] == pytest.approx(2 * batch, abs=2)  # two screening rounds of one batch each
    quarter = run(SCREEN_BATCH_US / 8, screen_batch_us=SCREEN_BATCH_US / 4)
    assert quarter[11] == pytest.approx(2 * batch / 4, abs=1)  # a quarter of the batch
    assert run(SCREEN_BATCH_US / 2, screen_batch_us=SCREEN_BATCH_US / 4)[11] == 1  # now longer than a batch


def test_time_candidates_screened_by_the_callers_calls_runs_no_screening_and_times_only_finalists(monkeypatch):
    """With ``screened`` (one call each, timed by the caller) no candidate is screened again: the best quarter (at
    least 3) by those times are timed in the final rounds, the rest score inf (an eager call's kernel time is not
    comparable with the finals' medians), and a candidate that raised there is never a finalist."""
    import types

    from harness.timing import samplers

    now = [0.0]
    monkeypatch.setattr(samplers, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    counts: dict[int, int] = {}

    def counted(i):
        def fn(a, b, c):
            counts[i] = counts.get(i, 0) + 1
            now[0] += (50 + i) * 1e-6  # the finals rank by this, whatever the screen said
        return fn

    screened = [9.0, float("inf"), 1.0, 2.0, 8.0, 3.0, 7.0, 6.0, 5.0, 4.0, 10.0, 11.0]
    t = time_candidates([counted(i) for i in range(12)], (None, None, None), "cpu", rounds=4, screened=screened)
    assert sorted(counts) == [0, 2, 3, 5]  # the batch sizing (candidate 0), then the finalists 2, 3, 5
    assert counts[0] == 2  # estimate_call_us: a warm-up call and a timed one, no screening call
    assert min(counts[i] for i in (2, 3, 5)) >= 4  # one sample of at least one call a final round
    assert [i for i in range(12) if t[i] < float("inf")] == [2, 3, 5]
    assert min(range(12), key=lambda i: t[i]) == 2
    with pytest.raises(ValueError, match="screened has 2 times for 12 candidates"):
        time_candidates([counted(i) for i in range(12)], (None, None, None), "cpu", screened=[1.0, 2.0])


def test_time_candidates_drop_stops_timing_finalists_that_trail_on_one_call_samples(monkeypatch):
    """``drop_after``: where each final sample is one call, the finalists more than ``drop_margin`` behind the best
    after ``drop_after`` rounds get no more rounds and score their median so far; the rest run every round. On calls
    short enough to batch, every finalist runs every round (a new round set would cost graph captures there)."""
    import types

    from harness.timing import samplers
    from harness.timing.offline import FINAL_BATCH_US

    now = [0.0]
    monkeypatch.setattr(samplers, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def run(us, factors, **kw):
        counts: dict[int, int] = {}

        def counted(i):
            def fn(a, b, c):
                counts[i] = counts.get(i, 0) + 1
                now[0] += us * factors[i] * 1e-6
            return fn

        t = time_candidates([counted(i) for i in range(len(factors))], (None, None, None), "cpu", rounds=7,
                            screened=[float(f) for f in factors], keep_fraction=1.0, warmed=True, **kw)
        return counts, t

    factors = [1.0, 1.03, 1.2, 1.5]  # two within 5 % of the best, two behind it
    long_us = 2 * FINAL_BATCH_US
    full, t_full = run(long_us, factors)
    counts, t = run(long_us, factors, drop_after=3, drop_margin=0.05)
    assert counts[0] == full[0] == 2 + 7  # the batch-sizing calls, then every round
    assert counts[1] == full[1] == 7 and counts[2] == counts[3] == 3  # one call a sample: 7 rounds, or 3
    assert min(range(4), key=lambda i: t[i]) == 0 and t[2] == pytest.approx(t_full[2]) and t[3] < float("inf")
    short, _ = run(FINAL_BATCH_US / 10, factors, drop_after=3, drop_margin=0.05)
    assert short[2] == short[1] > 7  # batched samples: nobody dropped


def test_host_samples_stop_after_host_rounds():
    entries = [Entry("a", busy(30), SETS)]
    res = measure_offline(entries, "cpu", OfflineSettings(ci_target=0.0, min_rounds=12, max_rounds=12, budget_s=60,
                                                          target_batch_us=100, host_rounds=4))
    assert len(res["a"].device_us) == 12 and len(res["a"].host_us) == 4


def test_stream_cache_looks_the_stream_up_only_when_the_raw_stream_changes(monkeypatch):
    """Events go on the stream the batch runs on: the cached Stream object is reused while torch's raw
    current stream stays the same, and looked up again when it changes (a graph capture's stream)."""
    import torch

    from harness.timing import samplers

    class FakeStream:
        def __init__(self, ptr):
            self.cuda_stream = ptr

    raw = {"ptr": 111}
    lookups = []

    def current_stream():
        lookups.append(raw["ptr"])
        return FakeStream(raw["ptr"])

    monkeypatch.setattr(samplers, "current_stream_ptr", lambda: raw["ptr"])
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    cache = samplers._StreamCache()
    first = cache.current()
    assert cache.current() is first and cache.current() is first and lookups == [111]
    raw["ptr"] = 222
    second = cache.current()
    assert second is not first and second.cuda_stream == 222 and lookups == [111, 222]
    raw["ptr"] = 111
    assert cache.current().cuda_stream == 111 and lookups == [111, 222, 111]
