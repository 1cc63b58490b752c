"""Tensors for a problem: input draws, guarded output buffers, and cold-cache input rotation.

The harness owns all memory: every method of a layout gets the same tensors, the gate sees
outputs embedded between guard bands, and cold-cache timing rotates through enough input sets
that the working set is at least twice the L2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from harness.problem import Problem

DISTRIBUTIONS = ("uniform", "randn", "smallint")
GUARD_ELEMS = 256  # fp16 elements before and after C
GUARD_VALUE = -12345.0  # exactly representable in fp16, and no GEMM here produces it by chance


def fill_(t: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    """Fill ``t`` in place from ``dist``: uniform [-1, 1] (CUTLASS's choice for timing: power
    depends on data), standard normal, or small integers in [-3, 3] (exact products, so
    precision loss is visible)."""
    if dist == "uniform":
        tmp = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32) * 2 - 1
    elif dist == "randn":
        tmp = torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float32)
    elif dist == "smallint":
        tmp = torch.randint(-3, 4, t.shape, generator=gen, device=t.device).to(torch.float32)
    else:
        raise ValueError(f"unknown distribution {dist!r}; expected one of {DISTRIBUTIONS}")
    return t.copy_(tmp)


def generator(device: str, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def empty_inputs(problem: Problem, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    dt = getattr(torch, problem.dtype)
    a = torch.empty((problem.m, problem.k), dtype=dt, device=device)
    b = torch.empty(problem.b_shape, dtype=dt, device=device)
    return a, b


@dataclass
class GuardedOutput:
    """C as a contiguous (M, N) view inside a larger buffer whose ends hold a sentinel."""

    buf: torch.Tensor
    c: torch.Tensor

    def poison_(self) -> None:
        """Guards to the sentinel, C to NaN: an unwritten element or a stray write shows."""
        self.buf.fill_(GUARD_VALUE)
        self.c.fill_(float("nan"))

    def guards_intact(self) -> bool:
        g = GUARD_ELEMS
        return bool((self.buf[:g] == GUARD_VALUE).all()) and bool((self.buf[-g:] == GUARD_VALUE).all())


def guarded_output(problem: Problem, device: str) -> GuardedOutput:
    dt = getattr(torch, problem.dtype)
    n = problem.m * problem.n
    buf = torch.empty(n + 2 * GUARD_ELEMS, dtype=dt, device=device)
    return GuardedOutput(buf, buf[GUARD_ELEMS : GUARD_ELEMS + n].view(problem.m, problem.n))


@dataclass
class InputSet:
    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor


def set_bytes(problem: Problem) -> int:
    return int(problem.min_bytes)


def cold_set_count(problem: Problem, l2_bytes: int, max_sets: int = 256, mem_budget: int = 8 << 30) -> int:
    """Input sets to rotate so the working set is >= 2x L2; 0 when that would take more than
    ``max_sets`` sets or ``mem_budget`` bytes (the caller then flushes L2 instead)."""
    need = max(1, math.ceil(2 * l2_bytes / set_bytes(problem)))
    if need > max_sets or need * set_bytes(problem) > mem_budget:
        return 0
    return need


def timing_sets(problem: Problem, device: str, n_sets: int, seed: int) -> list[InputSet]:
    """``n_sets`` independent (a, b, c) sets drawn uniform [-1, 1], for timing."""
    gen = generator(device, seed)
    out = []
    for _ in range(n_sets):
        a, b = empty_inputs(problem, device)
        fill_(a, "uniform", gen)
        fill_(b, "uniform", gen)
        c = torch.empty((problem.m, problem.n), dtype=a.dtype, device=device)
        out.append(InputSet(a, b, c))
    return out
