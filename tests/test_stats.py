"""Statistics on synthetic samples with known answers."""

import math

import numpy as np
import pytest

from harness.timing.stats import median_ci, paired_speedup, rel_half_width, summarize


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


def test_tiny_samples():
    assert all(math.isnan(x) for x in median_ci([]))
    assert median_ci([3.0, 1.0]) == (2.0, 1.0, 3.0)
    assert rel_half_width([]) == math.inf


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


def test_summarize_columns():
    s = summarize(list(range(1, 101)))
    assert s["median"] == 50.5 and s["mean"] == 50.5 and s["p10"] == pytest.approx(10.9) and s["p99"] > s["p90"]
