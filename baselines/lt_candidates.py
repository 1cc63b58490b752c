"""Which cuBLASLt algorithms the autotuner times: enumerate, merge, de-duplicate, validate.

Why not just "ask the heuristic for 100"? Measured on the H200 (REFERENCES.md), a request for 100
BEST_FIT results returned only 3 to 8 per shape, with nvmath's default workspace limit, which is
80% of device memory: so the workspace was *not* what limited the count. The count depends on:

* the workspace limit (MAX_WORKSPACE_BYTES): split-K / stream-K configurations that need more
  than the limit are dropped; at 0 bytes most split-K variants disappear;
* the alignment preferences (MIN_ALIGNMENT_*): lower alignment excludes algorithms (TMA needs
  16 bytes); the 256-byte default keeps the most;
* REDUCTION_SCHEME_MASK and IMPL_MASK: filters, default "everything";
* above all, the search mode: BEST_FIT returns the heuristic's own short ranked list, not every
  applicable configuration. LIMITED_BY_ALGO_ID asks for configurations of one algorithm id
  (tiles, stages, split-K, swizzle, cluster shapes) and is how a wider set is reached.

So the autotuner takes the BEST_FIT list (top-1 first), then round-robin over further lists so
that no single list crowds out the rest: BEST_FIT restricted to each reduction scheme (none,
in-place, compute-type, output-type), and for every algorithm id that
``cublasLtMatmulAlgoGetIds`` lists for fp16/32F, that id's configurations; de-duplicated by the
64-byte algo struct, up to 100.
Non-tensor-core (FMA) ids are left out of that expansion for problems above ``FMA_MAX_FLOP``: such
kernels cannot win there, and one call of them at 16384^3 costs seconds of timing each.
"""

from __future__ import annotations

import numpy as np

# Above this many FLOPs (about a 1024^3 GEMM) SIMT FMA kernels are not worth timing: even at the
# H200's fp32 FMA rate (~60 TFLOP/s) they run >30 us where tensor-core kernels run a few us.
FMA_MAX_FLOP = 2.0 * 1024**3

# Relative Frobenius distance from the heuristic top-1's output above which a candidate is
# rejected. Two correct fp32-accumulating kernels differ by fp16 output rounding (2^-11 relative
# per element, ~3e-4 in Frobenius norm) plus reduction-order effects; 8 units (3.9e-3) leaves room
# for split-K reductions while rejecting fp16 accumulation at large K and garbage. The harness's
# correctness gate still judges the winner against an fp32 reference.
REL_TOL = 8 * 2.0**-11


def algo_key(record) -> bytes:
    """Identity of one candidate: the bytes of its cublasLtMatmulAlgo_t."""
    return np.asarray(record["algo"]).tobytes()


def merge_candidates(best_fit: np.ndarray, per_id: list[np.ndarray], limit: int) -> np.ndarray:
    """BEST_FIT results first (rank order), then round-robin over ids; unique; at most ``limit``."""
    chosen: list[np.ndarray] = []
    seen: set[bytes] = set()

    def take(rec: np.ndarray) -> None:
        key = algo_key(rec[0])
        if key not in seen and len(chosen) < limit:
            seen.add(key)
            chosen.append(rec)

    for i in range(len(best_fit)):
        take(best_fit[i : i + 1])
    depth = max((len(r) for r in per_id), default=0)
    for j in range(depth):
        for r in per_id:
            if j < len(r):
                take(r[j : j + 1])
    if not chosen:
        return best_fit[:0]
    return np.concatenate(chosen)


def relative_error(out, ref) -> float:
    """||out - ref||_F / ||ref||_F in float32 (absolute norm when ref is all zero); inf if not finite."""
    return relative_errors(iter([out]), ref)[0]


def relative_errors(outputs, ref) -> list[float]:
    """``relative_error`` of each output against ``ref`` with one host read for all of them.

    ``outputs`` yields, per candidate, the output tensor just written (read on the stream before the next is
    written, so one buffer can serve every candidate) or None for a candidate that raised (inf). The errors are
    computed on the device as the outputs are produced and copied to the host once at the end: validating 25
    candidates with three host reads each kept the GPU waiting on the host between candidates."""
    import torch

    ref32 = ref.float()
    ref_norm = torch.linalg.vector_norm(ref32)
    denom = torch.where(ref_norm > 0, ref_norm, torch.ones_like(ref_norm))
    inf = torch.tensor(float("inf"), device=ref.device)
    errs = []
    for out in outputs:
        if out is None:
            errs.append(inf)
            continue
        err = torch.linalg.vector_norm(out.float() - ref32) / denom
        errs.append(torch.where(torch.isfinite(out).all(), err, inf))
    return [float(e) for e in torch.stack(errs).cpu()] if errs else []


def output_ok(out, ref, tol: float = REL_TOL) -> bool:
    return relative_error(out, ref) <= tol
