"""Shape classes: the coarse groups the cross-run leaderboard scores a method on.

A GEMM's cost profile is set by its smallest output side and its work: with few rows or columns
(decode, GEMV-like shapes) a kernel is bound by reading B; otherwise small problems are bound by
launch and latency, large ones by tensor-core throughput. One class per shape, the first that
matches, so a method's classes partition its shapes.
"""

from __future__ import annotations

SKINNY_MAX = 64  # min(M, N) at or under this: a few rows or columns of output
SMALL_FLOP = 1e9  # 2·M·N·K under this: a few microseconds of work at most on an H200
LARGE_FLOP = 1e11  # 2·M·N·K at or over this: throughput-bound

CLASSES: list[tuple[str, str]] = [
    ("skinny", f"min(M, N) ≤ {SKINNY_MAX}: decode-like, bound by reading B"),
    ("small", "2·M·N·K < 1 GFLOP"),
    ("medium", "1 GFLOP ≤ 2·M·N·K < 100 GFLOP"),
    ("large", "2·M·N·K ≥ 100 GFLOP"),
]


def shape_class(m: int, n: int, k: int) -> str:
    """The class of one M x N x K GEMM (see CLASSES)."""
    if min(m, n) <= SKINNY_MAX:
        return "skinny"
    flop = 2.0 * m * n * k
    if flop < SMALL_FLOP:
        return "small"
    return "medium" if flop < LARGE_FLOP else "large"
