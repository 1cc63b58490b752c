"""Statistics on synthetic samples with known answers."""

import math

import numpy as np
import pytest

from harness.timing.stats import (geomean, geomean_ci, median_ci, median_ci_ranks, min_samples_for_ci, paired_speedup,
                                  rel_half_width, speedup, summarize)


def test_median_ci_covers_and_shrinks():
    rng = np.random.default_rng(1)
    small = rng.normal(100, 5, 20)
    large = rng.normal(100, 5, 2000)
    m1, lo1, hi1 = median_ci(small)
    m2, lo2, hi2 = median_ci(large)
    assert lo1 <= m1 <= hi1 and lo2 <= 100 <= hi2
    assert (hi2 - lo2) < (hi1 - lo1) / 4  # ~sqrt(100) narrower
    assert rel_half_width(large) < 0.01 < rel_half_width(small)


def test_median_ci_coverage_is_about_95_percent():
    rng = np.random.default_rng(2)
    hits = sum(lo <= 0 <= hi for lo, hi in (median_ci(rng.standard_normal(31))[1:] for _ in range(800)))
    assert 0.92 <= hits / 800 <= 0.99


def test_median_ci_is_scipys_order_statistic_interval():
    """The cached ranks give exactly scipy.stats.quantile_test's interval, at every n and level."""
    from scipy.stats import quantile_test

    rng = np.random.default_rng(4)
    for confidence in (0.9, 0.95, 0.99):
        for n in range(1, 80):
            x = rng.normal(size=n)
            want = quantile_test(x, q=0.0, p=0.5).confidence_interval(confidence)
            _, lo, hi = median_ci(x, confidence)
            np.testing.assert_equal((lo, hi), (want.low, want.high))


def test_too_few_samples_give_no_ci_not_min_max():
    """At 95 % the median needs 6 samples: [min, max] of 5 covers it only 93.75 % of the time."""
    assert min_samples_for_ci(0.95) == 6 and min_samples_for_ci(0.99) == 8
    assert median_ci_ranks(5) is None and median_ci_ranks(6) == (0, 5)
    assert all(math.isnan(x) for x in median_ci([]))
    med, lo, hi = median_ci([3.0, 1.0, 2.0, 5.0, 4.0])
    assert med == 3.0 and math.isnan(lo) and math.isnan(hi)
    assert median_ci([3.0, 1.0, 2.0, 5.0, 4.0, 6.0]) == (3.5, 1.0, 6.0)
    assert rel_half_width([]) == math.inf and rel_half_width([1.0] * 5) == math.inf
    assert rel_half_width([1.0] * 6) == 0.0
    sp = paired_speedup([2.0] * 5, [1.0] * 5)
    assert sp.ratio == 2.0 and math.isnan(sp.lo) and math.isnan(sp.hi) and sp.n_pairs == 5
    s = summarize([1.0, 2.0, 3.0])
    assert s["median"] == 2.0 and math.isnan(s["ci_lo"]) and math.isnan(s["ci_hi"])


def test_offline_loop_stops_on_the_ci_once_it_exists():
    """rel_half_width is infinite below 6 rounds, so a tight group stops at round 6, not 5."""
    from harness.tensors import InputSet
    from harness.timing.offline import Entry, OfflineSettings, measure_offline

    calls = []
    entry = Entry("k", lambda a, b, c: calls.append(1), [InputSet(None, None, None)])
    settings = OfflineSettings(ci_target=10.0, min_rounds=2, max_rounds=50, budget_s=60, host_rounds=0)
    out = measure_offline([entry], "cpu", settings)["k"]
    assert out.stop_reason == "ci" and len(out.device_us) == min_samples_for_ci()


def test_paired_speedup_known_ratio_and_pairing():
    rng = np.random.default_rng(3)
    drift = rng.normal(0, 10, 60)  # round-to-round drift shared by both methods
    base = 100 + drift + rng.normal(0, 0.5, 60)
    fast = 80 + drift + rng.normal(0, 0.5, 60)
    sp = paired_speedup(base, fast)
    assert sp.ratio == pytest.approx(np.median(base) / np.median(fast))
    assert sp.lo <= sp.ratio <= sp.hi and sp.lo > 1.1 and sp.n_pairs == 60
    unpaired = paired_speedup(base, fast, paired=False)
    assert (unpaired.hi - unpaired.lo) > (sp.hi - sp.lo)  # pairing removes the shared drift
    same = paired_speedup(base, base)
    assert same.ratio == 1.0 and same.lo == same.hi == 1.0
    assert paired_speedup(base, fast) == sp  # a fixed seed: the same data give the same interval


def test_paired_speedup_without_ci_is_the_same_ratio_with_no_interval():
    """A caller that shows no interval (the summary of a run too large for its per-row table) skips
    the bootstrap and gets the very ratio the interval would have come with."""
    rng = np.random.default_rng(4)
    base, meth = 10 + rng.normal(0, 1, 41), 8 + rng.normal(0, 1, 37)
    for paired in (True, False):
        full, bare = paired_speedup(base, meth, paired=paired), paired_speedup(base, meth, paired=paired, ci=False)
        assert bare.ratio == full.ratio and bare.n_pairs == full.n_pairs and full.lo < full.ratio < full.hi
        assert math.isnan(bare.lo) and math.isnan(bare.hi)


def test_paired_speedup_ci_is_scipys_percentile_bootstrap_over_rounds():
    from scipy.stats import bootstrap

    rng = np.random.default_rng(5)
    base, meth = rng.normal(10, 1, 40), rng.normal(8, 1, 40)
    sp = paired_speedup(base, meth, seed=7)
    want = bootstrap((base, meth), lambda b, m, axis=-1: np.median(b, axis=axis) / np.median(m, axis=axis),
                     paired=True, vectorized=True, n_resamples=2000, method="percentile",
                     rng=np.random.default_rng(7)).confidence_interval
    assert (sp.lo, sp.hi) == pytest.approx((want.low, want.high))


def test_speedup_is_one_ratio_for_scalars_and_columns():
    assert speedup(10.0, 8.0) == 1.25
    np.testing.assert_equal(speedup([10.0, 10.0, np.nan, 10.0], [5.0, 0.0, 1.0, 20.0]), [2.0, np.nan, np.nan, 0.5])


def test_geomean_ci_brackets_narrows_and_needs_enough_shapes():
    rng = np.random.default_rng(6)
    few, many = np.exp(rng.normal(0.1, 0.3, 12)), np.exp(rng.normal(0.1, 0.3, 400))
    lo_f, hi_f = geomean_ci(few)
    lo_m, hi_m = geomean_ci(many)
    assert lo_f < geomean(few) < hi_f and lo_m < geomean(many) < hi_m
    assert (hi_m - lo_m) < (hi_f - lo_f) / 3
    assert geomean_ci(many) == (lo_m, hi_m)  # fixed seed
    assert all(math.isnan(v) for v in geomean_ci(few[:5]))  # 5 shapes: the tails would be min and max
    assert all(math.isnan(v) for v in geomean_ci([1.0] * 8 + [0.0]))
    assert geomean_ci([1.5] * 8) == (1.5, 1.5)
    assert math.isnan(geomean([])) and math.isnan(geomean([1.0, -1.0])) and geomean([2.0, 8.0]) == 4.0


def test_summarize_columns():
    s = summarize(list(range(1, 101)))
    assert s["median"] == 50.5 and s["mean"] == 50.5 and s["p10"] == pytest.approx(10.9) and s["p99"] > s["p90"]
