"""The Method protocol: the one interface that joins baselines, searched kernels and the harness.

A Method says whether it can serve a problem (``supports``) and, once per problem, does its
one-time setup (``prepare``: handles, descriptors, autotuning, compilation) and returns a
``Prepared`` call ``fn(a, b, c)`` that does only the GEMM on the current CUDA stream. The harness
times the call, never the setup; the setup's seconds go in their own column.

Methods never time anything themselves: one that must choose among candidates by speed (cuBLASLt
autotune, a searched kernel) receives ``PrepareContext.time_candidates`` from the harness, so every
number in the product comes from one timing core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from harness.problem import Problem

GemmFn = Callable[[Any, Any, Any], None]


@dataclass(frozen=True)
class Support:
    """A method's answer to "can you serve this problem?", with the reason when it cannot."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


SUPPORTED = Support(True)


def unsupported(reason: str) -> Support:
    return Support(False, reason)


@dataclass
class Prepared:
    """A ready-to-time call plus what its preparation cost and decided.

    ``info`` holds extra result columns the method wants recorded (for example the chosen
    cuBLASLt algorithm or the autotune candidate count). ``compile_s`` is the part of the setup
    spent compiling for this problem (None: nothing compiled). ``capturable`` is False for calls
    that cannot be captured in a CUDA graph; the timing core then uses events behind a
    blocking kernel instead.
    """

    fn: GemmFn
    setup_s: float = 0.0
    compile_s: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    capturable: bool = True
    close: Callable[[], None] | None = None


@dataclass
class PrepareContext:
    """What the harness lends a method while it prepares.

    ``inputs`` is one (a, b, c) set of the problem's tensors on the target device.
    ``time_candidates(fns)`` times a list of GEMM callables on those inputs, interleaved, and
    returns each one's median device microseconds (inf for a call that raised); with
    ``warmed=True`` the caller says every callable has just run on inputs of this shape.
    ``call_times()`` (None where the device has no kernel clock) opens a ``CallTimes``: the device time
    of calls the method makes anyway, passed back as ``time_candidates(..., screened=...)`` so that
    those calls screen the candidates instead of timing rounds of their own.
    """

    device: str
    inputs: tuple[Any, Any, Any]
    time_candidates: Callable[..., list[float]]  # (fns, *, warmed=False, screened=None) -> medians
    call_times: Callable[[], Any] | None = None  # () -> harness.timing.kernel_clock.CallTimes


@runtime_checkable
class Method(Protocol):
    """What every baseline and kernel provides. See module docstring."""

    name: str  # unique, stable across runs: it is a result column and a resume key
    family: str  # "baseline", or a kernel family name
    config: dict[str, Any]  # every knob as a column (CUTLASS profiler style)
    source_hash: str  # "" for library calls
    is_baseline: bool  # counts as a cuBLAS-family baseline ("best-of" and gate anchors)
    devices: tuple[str, ...]  # "cuda" and/or "cpu"

    def supports(self, problem: Problem, device: str) -> Support: ...

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared: ...


class Unsupported(Exception):
    """Raised by ``prepare`` or by a prepared call when the method turns out not to serve this
    problem after all (a kernel's own run-time refusal, e.g. CUTLASS ``can_implement``). The
    row says ``unsupported`` with the reason; it is not a wrong result."""


class ContextLost(RuntimeError):
    """A method's call left the CUDA context unusable; nothing else can run in this process."""

    def __init__(self, key, reason: str):
        super().__init__(f"CUDA context lost after {key}: {reason}")
        self.key = key
        self.reason = reason


def check_cuda_context(key, what: str) -> None:
    """After a method raised on CUDA: raise ContextLost if the context is no longer usable
    (an illegal address poisons it for the whole process)."""
    import torch

    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
    except Exception as e:
        raise ContextLost(key, f"{what} ({type(e).__name__}: {e})") from e
