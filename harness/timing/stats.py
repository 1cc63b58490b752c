"""Statistics on timing samples: median CIs, quantiles, and paired speedups with bootstrap CIs.

Medians, not means: GPU timing noise is one-sided (preemption, clock dips), so the median is
the robust centre. The median's CI uses order statistics (distribution-free). A speedup is the
ratio of two medians measured in the same run; its CI resamples *rounds* with replacement, so
both methods keep the pairing that interleaving gave them (a clock dip in round r hit both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


def quantile(xs: Sequence[float], q: float) -> float:
    return float(np.quantile(np.asarray(xs, dtype=float), q)) if len(xs) else math.nan


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, lo, hi): order-statistic CI of the median (normal approximation to the binomial).

    Fewer than 3 samples give (median, min, max): honest about knowing little.
    """
    x = np.sort(np.asarray(xs, dtype=float))
    n = len(x)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    med = float(np.median(x))
    if n < 3:
        return (med, float(x[0]), float(x[-1]))
    z = {0.90: 1.645, 0.95: 1.96, 0.99: 2.576}.get(confidence, 1.96)
    half = z * math.sqrt(n) / 2
    # 1-indexed ranks j = floor(n/2 - half), k = ceil(1 + n/2 + half); stored 0-indexed.
    lo = max(0, int(math.floor(n / 2 - half)) - 1)
    hi = min(n - 1, int(math.ceil(1 + n / 2 + half)) - 1)
    return (med, float(x[lo]), float(x[hi]))


def rel_half_width(xs: Sequence[float], confidence: float = 0.95) -> float:
    """Half the CI width of the median over the median: the offline stopping statistic."""
    med, lo, hi = median_ci(xs, confidence)
    if not med or math.isnan(med):
        return math.inf
    return (hi - lo) / 2 / med


@dataclass(frozen=True)
class Speedup:
    ratio: float  # baseline median / method median (>1: method is faster)
    lo: float
    hi: float
    n_pairs: int


def paired_speedup(
    baseline: Sequence[float],
    method: Sequence[float],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    paired: bool = True,
) -> Speedup:
    """Speedup of ``method`` over ``baseline``: ratio of medians with a bootstrap CI.

    Offline samples are paired: ``baseline[i]`` and ``method[i]`` were measured in the same
    round (unequal lengths are truncated to the common rounds) and the bootstrap resamples
    round indices jointly. Server samples are single calls in a random interleaving, not
    pairs (``paired=False``): each side is resampled on its own.
    """
    if paired:
        n = min(len(baseline), len(method))
        baseline, method = baseline[:n], method[:n]
    n = min(len(baseline), len(method))
    if n == 0:
        return Speedup(math.nan, math.nan, math.nan, 0)
    b = np.asarray(baseline, dtype=float)
    m = np.asarray(method, dtype=float)
    ratio = float(np.median(b) / np.median(m))
    if n < 2:
        return Speedup(ratio, ratio, ratio, n)
    rng = np.random.default_rng(seed)
    ib = rng.integers(0, len(b), size=(n_boot, len(b)))
    im = ib if paired else rng.integers(0, len(m), size=(n_boot, len(m)))
    boots = np.median(b[ib], axis=1) / np.median(m[im], axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Speedup(ratio, float(lo), float(hi), n)


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean; NaN when ``xs`` is empty or holds a value <= 0 (a speedup never is)."""
    x = np.asarray(xs, dtype=float)
    if x.size == 0 or np.any(~(x > 0)):
        return math.nan
    return float(np.exp(np.mean(np.log(x))))


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
