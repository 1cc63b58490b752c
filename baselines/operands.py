"""Checks on the tensors a prepared call receives, and pointer alignment.

Raw cuBLAS calls trust their pointers: a wrongly shaped or strided tensor is silent memory
corruption, not an error. So every raw call checks, cheaply, that it got exactly the problem's
contract (row-major, contiguous, the right shapes and dtype, one device) and raises otherwise.
"""

from __future__ import annotations

from harness.problem import Problem

MAX_ALIGNMENT = 256  # cuBLASLt's largest (and default) alignment preference, in bytes
INT32_MAX = 2**31 - 1  # cublasGemmEx takes m, n, k and leading dimensions as int


def torch_dtype(problem: Problem):
    import torch

    return {"float16": torch.float16}[problem.dtype]


def expected_shapes(problem: Problem) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Storage shapes of (A, B, C) for this problem."""
    return (problem.m, problem.k), problem.b_shape, (problem.m, problem.n)


def check_operands(problem: Problem, a, b, c) -> None:
    """Raise ValueError unless (a, b, c) are exactly what ``problem`` promises."""
    dtype = torch_dtype(problem)
    for name, t, shape in zip("abc", (a, b, c), expected_shapes(problem)):
        if tuple(t.shape) != shape:
            raise ValueError(f"{problem}: {name} has shape {tuple(t.shape)}, expected {shape}")
        if t.dtype != dtype:
            raise ValueError(f"{problem}: {name} has dtype {t.dtype}, expected {dtype}")
        if not t.is_contiguous():
            raise ValueError(f"{problem}: {name} must be contiguous (row-major)")
    if not (a.device == b.device == c.device):
        raise ValueError(f"{problem}: operands on different devices {a.device}, {b.device}, {c.device}")


def alignment(ptr: int) -> int:
    """Largest power of two (capped at 256 bytes) that divides ``ptr``; 256 for a null pointer."""
    if ptr == 0:
        return MAX_ALIGNMENT
    return min(MAX_ALIGNMENT, ptr & -ptr)


def fits_int32(problem: Problem) -> bool:
    return max(problem.m, problem.n, problem.k) <= INT32_MAX


def cublas_supports(problem: Problem, device: str):
    """What every cuBLAS-library baseline can serve: CUDA, a mapped dtype, int32 dimensions."""
    from baselines.cuda_handles import DATA_TYPES
    from harness.method import SUPPORTED, unsupported

    if device.split(":")[0] != "cuda":
        return unsupported(f"unsupported on {device}")
    if problem.dtype not in DATA_TYPES:
        return unsupported(f"dtype {problem.dtype} not implemented")
    if not fits_int32(problem):
        return unsupported("a dimension exceeds cuBLAS's int32 arguments")
    return SUPPORTED


def make_checker(problem: Problem):
    """A fast ``check_operands`` for the timed call: one combined test, details only on failure.

    It runs inside every timed call, so it avoids building tuples and device objects on the
    passing path (about 1 us instead of 2-3 us of host time per call).
    """
    import torch

    sa, sb, sc = (torch.Size(s) for s in expected_shapes(problem))
    dt = torch_dtype(problem)

    def check(a, b, c) -> None:
        if not (
            a.shape == sa
            and b.shape == sb
            and c.shape == sc
            and a.dtype == dt
            and b.dtype == dt
            and c.dtype == dt
            and a.is_contiguous()
            and b.is_contiguous()
            and c.is_contiguous()
            and a.get_device() == b.get_device() == c.get_device()
        ):
            check_operands(problem, a, b, c)  # raises with the reason
            raise ValueError(f"{problem}: operands on different devices")

    return check
