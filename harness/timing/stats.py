"""Statistics on timing samples: median CIs, quantiles, speedups and geometric means with CIs.

The one home of these definitions: the runner's summary columns, the offline stopping rule,
the terminal summary and the report all call them.

* Medians, not means: GPU timing noise is one-sided (preemption, clock dips), so the median is
  the robust centre. Its CI is the distribution-free order-statistic interval (the one
  ``scipy.stats.quantile_test(...).confidence_interval()`` gives, its ranks computed here once
  per sample count). With too few samples no pair of order statistics reaches the asked level
  (fewer than 6 at 95 %): the bounds are NaN, never the min-max called a 95 % interval.
* A speedup is ``baseline median / method median`` measured in the same run (``speedup``).
  Its CI (``paired_speedup``) is a ``scipy.stats.bootstrap`` that resamples *rounds* jointly,
  so both methods keep the pairing interleaving gave them (a clock dip in round r hit both).
  Percentile intervals, not BCa: BCa's acceleration comes from a jackknife, which is
  inconsistent for a median (a non-smooth statistic); the percentile interval needs no such
  estimate. It is given only from as many rounds as the median CI needs.
* A method's score over shapes is the geometric mean of its per-shape speedups (``geomean``);
  its CI (``geomean_ci``) resamples shapes with BCa: the mean of logs is smooth, where BCa
  corrects the skew of the percentile interval. It too is given only from 6 shapes at 95 %.
Bootstraps use a fixed seed, so a summary or a site rebuilt from the same data is identical.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

CONFIDENCE = 0.95
N_RESAMPLES = 2000
SEED = 0


def quantile(xs: Sequence[float], q: float) -> float:
    return float(np.quantile(np.asarray(xs, dtype=float), q)) if len(xs) else math.nan


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the sorted samples that bound the median's two-sided CI
    (equal tails of Binomial(n, 1/2), as ``scipy.stats.quantile_test``); None when ``n``
    samples cannot reach ``confidence``. Exact binomial sums (no scipy import inside the timing
    loop, where the first call happens)."""
    tail = (1 - confidence) / 2
    total = 2**n
    cdf, cum = [], 0
    for i in range(n + 1):
        cum += math.comb(n, i)
        cdf.append(cum / total)
    lo = next(k for k in range(n + 1) if cdf[k] >= tail) - 1  # binom.ppf(tail) - 1
    hi = next(k for k in range(n + 1) if 1 - cdf[k] <= tail)  # binom.isf(tail)
    return (lo, hi) if lo >= 0 and hi < n else None


@lru_cache(maxsize=64)
def min_samples_for_ci(confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose order statistics give a median CI at ``confidence`` (6 at 95 %)."""
    n = 1
    while median_ci_ranks(n, confidence) is None:
        n += 1
    return n


def median_ci(xs: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(median, lo, hi): the order-statistic CI of the median; NaN bounds when there are fewer
    samples than ``min_samples_for_ci(confidence)``."""
    x = np.sort(np.asarray(xs, dtype=float))
    n = len(x)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    med = float(np.median(x))
    ranks = median_ci_ranks(n, confidence)
    if ranks is None:
        return (med, math.nan, math.nan)
    return (med, float(x[ranks[0]]), float(x[ranks[1]]))


def rel_half_width(xs: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """Half the CI width of the median over the median: the offline stopping statistic
    (infinite while there are too few samples for a CI)."""
    med, lo, hi = median_ci(xs, confidence)
    if not med or math.isnan(med) or math.isnan(lo):
        return math.inf
    return (hi - lo) / 2 / med


def speedup(baseline_us, method_us):
    """``baseline / method`` (> 1: the method is faster), for scalars or arrays alike; NaN where
    either time is missing or not positive."""
    b = np.asarray(baseline_us, dtype=float)
    m = np.asarray(method_us, dtype=float)
    ok = (b > 0) & (m > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(ok, b / np.where(ok, m, 1.0), np.nan)
    return float(r) if r.ndim == 0 else r


@dataclass(frozen=True)
class Speedup:
    ratio: float  # baseline median / method median (>1: method is faster)
    lo: float  # CI bounds; NaN when too few rounds for the level
    hi: float
    n_pairs: int


def _ratio_of_medians(b, m, axis=-1):
    return np.median(b, axis=axis) / np.median(m, axis=axis)


def paired_speedup(
    baseline: Sequence[float],
    method: Sequence[float],
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
    paired: bool = True,
    ci: bool = True,
) -> Speedup:
    """Speedup of ``method`` over ``baseline``: ratio of medians with a bootstrap CI.

    Offline samples are paired: ``baseline[i]`` and ``method[i]`` were measured in the same
    round (unequal lengths are truncated to the common rounds) and the bootstrap resamples
    round indices jointly. Server samples are single calls in a random interleaving, not
    pairs (``paired=False``): each side is resampled on its own. ``ci=False``: the ratio alone
    (the same ratio; ``lo``/``hi`` NaN), for callers that show no interval.
    """
    b = np.asarray(baseline, dtype=float)
    m = np.asarray(method, dtype=float)
    if paired:
        n = min(len(b), len(m))
        b, m = b[:n], m[:n]
    n = min(len(b), len(m))
    if n == 0:
        return Speedup(math.nan, math.nan, math.nan, 0)
    ratio = speedup(np.median(b), np.median(m))
    if not ci or n < min_samples_for_ci(confidence) or not math.isfinite(ratio):
        return Speedup(ratio, math.nan, math.nan, n)
    from scipy.stats import bootstrap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant sample is a valid, zero-width answer
        res = bootstrap((b, m), _ratio_of_medians, paired=paired, vectorized=True, n_resamples=n_resamples,
                        confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Speedup(ratio, lo, hi, n)


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean; NaN when ``xs`` is empty or holds a value <= 0 (a speedup never is)."""
    x = np.asarray(xs, dtype=float)
    if x.size == 0 or np.any(~(x > 0)):
        return math.nan
    return float(np.exp(np.mean(np.log(x))))


def geomean_ci(xs: Sequence[float], confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
               seed: int = SEED) -> tuple[float, float]:
    """BCa bootstrap CI of the geometric mean, resampling the values (shapes) with replacement.
    NaN bounds for a value <= 0 or fewer values than ``min_samples_for_ci`` (below that the
    bootstrap's tails sit on the smallest and largest value: min-max, not a CI at the level);
    equal values give a zero-width CI."""
    x = np.asarray(xs, dtype=float)
    if x.size < min_samples_for_ci(confidence) or np.any(~(x > 0)):
        return math.nan, math.nan
    logs = np.log(x)
    if np.ptp(logs) == 0:
        v = float(x[0])
        return v, v
    from scipy.stats import bootstrap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa on very few values may warn; its NaN is the answer then
        res = bootstrap((logs,), np.mean, vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
                        method="BCa", rng=np.random.default_rng(seed))
    return float(np.exp(res.confidence_interval.low)), float(np.exp(res.confidence_interval.high))


def summarize(xs: Sequence[float]) -> dict[str, float]:
    """The summary columns of a result row for one metric's samples."""
    med, lo, hi = median_ci(xs)
    arr = np.asarray(xs, dtype=float)
    return {
        "median": med,
        "ci_lo": lo,
        "ci_hi": hi,
        "mean": float(arr.mean()) if len(arr) else math.nan,
        "p10": quantile(xs, 0.10),
        "p90": quantile(xs, 0.90),
        "p99": quantile(xs, 0.99),
    }
