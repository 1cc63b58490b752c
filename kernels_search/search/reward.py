"""Reward of a measured candidate: clipped log speedup over the strongest baseline of its shape.

The strongest baseline is the fastest correct row of any cuBLAS-family method (``is_baseline``:
torch.matmul, cuBLAS, cuBLASLt, cuBLASLt autotune) over *both* layouts, by median device time,
measured in the same ``evaluate_shape`` call as the candidate (paired: same process, same
interleaved rounds). A candidate that failed to compile, gave a wrong result (gate or anti-cheat
failed), crashed or timed out (status ``error``) gets -1; an ``unsupported`` one too (a wasted
evaluation the learner should learn to avoid). Rewards are clipped to [-1, 1].
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

FAIL = -1.0
CLIP = 1.0


def strongest_baseline(rows: Iterable[Mapping]) -> tuple[float | None, str | None]:
    """(device_us, "method|layout") of the fastest correct baseline row, or (None, None)."""
    best, who = None, None
    for r in rows:
        if not r.get("is_baseline") or r.get("status") != "ok":
            continue
        us = r.get("device_us_median")
        if us is None or not (us > 0) or math.isnan(us):
            continue
        if best is None or us < best:
            best, who = float(us), f"{r['method']}|{r['layout']}"
    return best, who


def failure_kind(row: Mapping) -> str:
    """'' for a correct timed row, else compile | wrong | crash | timeout | unsupported | error."""
    status = row.get("status")
    reason = str(row.get("status_reason") or "")
    if status == "ok":
        us = row.get("device_us_median")
        return "" if us is not None and us > 0 and not math.isnan(us) else "error"
    if status == "unsupported":
        return "unsupported"
    if status == "gate_failed":
        return "wrong"
    if "BuildError" in reason or "build failed" in reason:
        return "compile"
    if "timeout" in reason:
        return "timeout"
    if "died" in reason or "CUDA context" in reason:
        return "crash"
    return "error"


def reward(row: Mapping, baseline_us: float | None) -> float | None:
    """-1 for any failure; clip(log(baseline_us / device_us), -1, 1) for a correct row;
    None when there is no baseline to compare with (the row teaches nothing about speed)."""
    if failure_kind(row):
        return FAIL
    if baseline_us is None:
        return None
    return max(-CLIP, min(CLIP, math.log(baseline_us / float(row["device_us_median"]))))
