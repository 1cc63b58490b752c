"""How much error fp32 and fp16 accumulation make at a given K, and the precision verdict from it.

The problem contract accumulates in fp32 (``harness.problem``). A kernel that accumulates in fp16
rounds its running sum to fp16 as it goes; how visible that is depends on K:

* Every rounding to fp16 costs a relative error of rms ``RHO x 2^-11`` (``ROUNDING_RMS``;
  ``RHO`` ~ 0.42 is what one rounding of a dot product's result measures on zero-mean uniform or
  normal inputs).
* fp32 accumulation rounds once, at the output: its relative Frobenius error is that one
  rounding, ``ROUNDING_RMS``, plus a K-dependent fp32 term ``RHO x 2^-24 x sqrt(K / 2)`` that
  stays under a tenth of it up to K ~ 10^6.
* fp16 accumulation rounds the partial sum after every ``chunk`` products. The partial sum after
  j products has rms ``sigma x sqrt(j)``, so the K / chunk rounding errors add up (a random walk)
  to ``ROUNDING_RMS x sigma x K / sqrt(2 chunk)``, against a result of rms ``sigma x sqrt(K)``:
  a relative error of ``ROUNDING_RMS x sqrt(K / (2 chunk))``, growing like sqrt(K) (like K for
  sums that do not cancel, e.g. all-positive inputs, so the figure is a lower bound).
  ``FP16_CHUNK`` = 16 products per rounding (one tensor-core MMA's K step) is the coarsest fp16
  accumulation the check is sized to catch; finer rounding only errs more.

Measured on the CPU (64 x 128 outputs, uniform and normal draws): fp32 accumulation 2.1e-4 at
every K from 64 to 8192; fp16 accumulation every 16 products 3.9e-4, 1.2e-3, 3.3e-3 at K = 64,
1024, 8192 (the formula: 2.9e-4, 1.2e-3, 3.3e-3).

The tolerance is ``TOL_FACTOR`` x the larger of the fp32 expectation and the anchor's measured
error on the same draws: fp32 accumulation stays a factor ~4 under it. The check can tell the two
apart (is *decisive*) only where fp16 accumulation is expected at ``SEPARATION`` x the tolerance
or more, i.e. ``sqrt(K / (2 chunk)) >= SEPARATION x TOL_FACTOR``: K above ~2048 for the chunk of 16.
Below that a pass says nothing about the accumulator, and the verdict says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FP16_UNIT_ROUNDOFF = 2.0**-11
FP32_UNIT_ROUNDOFF = 2.0**-24
RHO = 0.42  # rms relative error of one rounding, in units of the unit roundoff (measured, see above)
ROUNDING_RMS = RHO * FP16_UNIT_ROUNDOFF
FP16_CHUNK = 16  # products per fp16 rounding of the accumulator that the check is sized to catch
TOL_FACTOR = 4.0  # tolerance over the fp32 expectation: what the gate allows its anchors too
SEPARATION = 2.0  # fp16 accumulation must be expected this far over the tolerance to be told apart


def fp32_accumulation_error(k: int) -> float:
    """Expected relative Frobenius error of an fp32-accumulated, fp16-stored product with K terms."""
    return math.hypot(ROUNDING_RMS, RHO * FP32_UNIT_ROUNDOFF * math.sqrt(k / 2))


def fp16_accumulation_error(k: int, chunk: int = FP16_CHUNK) -> float:
    """Expected relative Frobenius error when the accumulator is rounded to fp16 every ``chunk``
    products (never below the one rounding of the output)."""
    return ROUNDING_RMS * max(1.0, math.sqrt(k / (2 * chunk)))


def tolerance(k: int, anchor_err: float | None = None) -> float:
    """The precision check's tolerance on the relative Frobenius error at this K."""
    base = fp32_accumulation_error(k)
    if anchor_err is not None and math.isfinite(anchor_err):
        base = max(base, anchor_err)
    return TOL_FACTOR * base


@dataclass(frozen=True)
class AccumulationVerdict:
    k: int
    rel_err: float
    tol: float
    fp32_expected: float
    fp16_expected: float

    @property
    def passed(self) -> bool:
        return math.isfinite(self.rel_err) and self.rel_err <= self.tol

    @property
    def decisive(self) -> bool:
        """Whether this K can tell fp16 from fp32 accumulation at all (module docstring)."""
        return self.fp16_expected >= SEPARATION * self.tol

    def figures(self) -> dict:
        return {"tol_rel_fro": self.tol, "fp32_acc_expected": self.fp32_expected,
                "fp16_acc_expected": self.fp16_expected, "decisive": self.decisive}

    def describe(self) -> str:
        """The verdict in words, with the figures."""
        ratio = self.rel_err / self.tol if self.tol > 0 else math.inf
        head = (f"rel. Frobenius error {self.rel_err:.3g} at K={self.k}, {ratio:.3g}x the tolerance {self.tol:.3g} "
                f"(fp32 accumulation expected {self.fp32_expected:.2g}, fp16 accumulation every {FP16_CHUNK} "
                f"products {self.fp16_expected:.2g})")
        if self.passed:
            return head
        return head + (": accumulates in reduced precision" if self.decisive else ": too large for fp32 accumulation")


def accumulation_verdict(k: int, rel_err: float, anchor_err: float | None = None) -> AccumulationVerdict:
    """The precision verdict on a measured relative Frobenius error at this K."""
    return AccumulationVerdict(k, rel_err, tolerance(k, anchor_err), fp32_accumulation_error(k),
                               fp16_accumulation_error(k))
