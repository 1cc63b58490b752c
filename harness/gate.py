"""Correctness gate: run before any timing, for every method and shape, baselines included.

For each of several input draws (uniform [-1, 1], standard normal, small integers; the seed is
fresh per run) the inputs are rewritten *in place*, so every draw after the first also checks
"same pointers, new values". Per method and draw:

* C is pre-filled with NaN and embedded between guard bands: every element must be written and
  nothing outside C may change;
* A and B must be unchanged afterwards (no scribbling on inputs);
* the output is compared with a high-precision reference (float64 up to ``FP64_MAX_MNK``
  multiply-adds, else float32 with TF32 off): relative Frobenius error and max normalized
  error (max |out - ref| / max |ref|);
* if the output is bit-identical to the previous draw's while the reference moved, the method
  is caching by pointer.

Tolerances are derived from the anchors' own error on the same inputs (the cuBLAS-family
baselines): ``tol = TOL_FACTOR x worst anchor error``, never below ``TOL_FACTOR x`` the error of
rounding an exact result to fp16 once. An anchor must itself be sane (``ANCHOR_SANITY``) to
count. fp16 accumulation at large K lands far above these tolerances and fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence

import torch

from harness.method import Unsupported, check_cuda_context
from harness.problem import Problem
from harness.tensors import DISTRIBUTIONS, empty_inputs, fill_, generator, guarded_output

TOL_FACTOR = 4.0
# Rounding an exact result to fp16 costs up to 2^-11 relative per element (rms ~2^-11/sqrt(3)):
# the tolerance floor, so anchors that are exact on small integers do not demand exactness.
FP16_ROUNDING = 2.0**-11
ANCHOR_SANITY = 2e-3  # rel. Frobenius; ~7x fp16 rounding: an anchor worse than this is broken, not a tolerance source
FP64_MAX_MNK = 2**33


@dataclass
class GateResult:
    passed: bool
    reason: str = ""
    rel_fro_err: float = math.nan
    max_norm_err: float = math.nan
    tol_rel_fro: float = math.nan
    tol_max_norm: float = math.nan
    per_draw: list[dict] = field(default_factory=list)
    unsupported: bool = False  # the call declined the problem (harness.method.Unsupported)

    def columns(self) -> dict:
        return {
            "gate_passed": self.passed,
            "gate_rel_fro_err": _finite_or_none(self.rel_fro_err),
            "gate_max_norm_err": _finite_or_none(self.max_norm_err),
            "gate_tol_rel_fro": _finite_or_none(self.tol_rel_fro),
            "gate_tol_max_norm": _finite_or_none(self.tol_max_norm),
        }


def _finite_or_none(x: float):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


@dataclass
class GateCandidate:
    key: Hashable
    fn: Callable
    anchor: bool = False  # a cuBLAS-family baseline whose error sets the tolerance


def reference(a: torch.Tensor, b: torch.Tensor, layout: str) -> torch.Tensor:
    """High-precision C for row-major A and B in ``layout``."""
    m, k = a.shape
    n = b.shape[1] if layout == "nn" else b.shape[0]
    dt = torch.float64 if m * n * k <= FP64_MAX_MNK else torch.float32
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        bb = b.to(dt) if layout == "nn" else b.to(dt).t()
        return a.to(dt) @ bb
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(relative Frobenius error, max |out-ref| / max |ref|), both 0 for an exact match."""
    diff = out.to(ref.dtype) - ref
    ref_norm = float(torch.linalg.vector_norm(ref))
    ref_max = float(ref.abs().max())
    rel = float(torch.linalg.vector_norm(diff)) / ref_norm if ref_norm > 0 else float(torch.linalg.vector_norm(diff))
    mx = float(diff.abs().max()) / ref_max if ref_max > 0 else float(diff.abs().max())
    return rel, mx


def run_gate(
    problem: Problem,
    candidates: Sequence[GateCandidate],
    device: str,
    seed: int,
    distributions: Sequence[str] = DISTRIBUTIONS,
    on_candidate: Callable[[Hashable], None] | None = None,
) -> dict[Hashable, GateResult]:
    """Check every candidate on the same draws; see module docstring for the checks.

    ``on_candidate(key)`` is called before each candidate runs, so a supervisor (the sandbox)
    knows which untrusted call was in flight if the process dies or hangs."""
    gen = generator(device, seed)
    a, b = empty_inputs(problem, device)
    outs = {c.key: guarded_output(problem, device) for c in candidates}
    failed: dict[Hashable, str] = {}
    declined: set[Hashable] = set()
    errs: dict[Hashable, list[tuple[float, float]]] = {c.key: [] for c in candidates}
    tols: list[tuple[float, float]] = []
    prev_out: dict[Hashable, torch.Tensor] = {}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    for d_i, dist in enumerate(distributions):
        fill_(a, dist, gen)
        fill_(b, dist, gen)
        a0, b0 = a.clone(), b.clone()
        ref = reference(a, b, problem.layout)
        draw_errs: dict[Hashable, tuple[float, float]] = {}
        for c in candidates:
            if c.key in failed:
                continue
            if on_candidate:
                on_candidate(c.key)
            g = outs[c.key]
            try:
                g.poison_()
                sync()
                c.fn(a, b, g.c)
                sync()
            except Unsupported as ex:
                failed[c.key] = str(ex)
                declined.add(c.key)
                continue
            except Exception as ex:
                failed[c.key] = f"raised {type(ex).__name__}: {ex}"
                if device == "cuda":
                    check_cuda_context(c.key, failed[c.key])  # raises ContextLost if it is gone
                continue
            if not g.guards_intact():
                failed[c.key] = "wrote outside C (guard band changed)"
            elif not (torch.equal(a, a0) and torch.equal(b, b0)):
                failed[c.key] = "modified its inputs A or B"
                a.copy_(a0)
                b.copy_(b0)
            elif bool(torch.isnan(g.c).any()):
                nan = int(torch.isnan(g.c).sum())
                failed[c.key] = f"left {nan} of {g.c.numel()} output elements unwritten (NaN)"
            elif c.key in prev_out and torch.equal(prev_out[c.key], g.c):
                failed[c.key] = (f"output unchanged after new input values in the same buffers ({dist} draw): "
                                 "cached results")
            else:
                draw_errs[c.key] = errors(g.c, ref)
                prev_out[c.key] = g.c.clone()
        # Tolerance for this draw from the sane anchors' errors.
        anchor = [draw_errs[c.key] for c in candidates if c.anchor and c.key in draw_errs]
        anchor = [e for e in anchor if e[0] <= ANCHOR_SANITY]
        worst_rel = max([e[0] for e in anchor], default=0.0)
        worst_max = max([e[1] for e in anchor], default=0.0)
        tol = (TOL_FACTOR * max(worst_rel, FP16_ROUNDING / 2), TOL_FACTOR * max(worst_max, FP16_ROUNDING))
        tols.append(tol)
        for key, (rel, mx) in draw_errs.items():
            errs[key].append((rel, mx))
            if key not in failed and (not math.isfinite(rel) or rel > tol[0] or mx > tol[1]):
                failed[key] = (
                    f"wrong values on the {dist} draw: rel. Frobenius error {rel:.3g} (tolerance {tol[0]:.3g}), "
                    f"max normalized error {mx:.3g} (tolerance {tol[1]:.3g})"
                )
        del ref

    results = {}
    for c in candidates:
        e = errs[c.key]
        results[c.key] = GateResult(
            passed=c.key not in failed,
            reason=failed.get(c.key, ""),
            rel_fro_err=max((x[0] for x in e), default=math.nan),
            max_norm_err=max((x[1] for x in e), default=math.nan),
            tol_rel_fro=min((t[0] for t in tols), default=math.nan),
            tol_max_norm=min((t[1] for t in tols), default=math.nan),
            per_draw=[{"rel_fro": x[0], "max_norm": x[1]} for x in e],
            unsupported=c.key in declined,
        )
    return results
