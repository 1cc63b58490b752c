"""The cuBLAS-family baselines and the ``inductor`` peer, registered as hgemm-bench methods when
this package is imported.

* ``torch``: ``torch.matmul(a, b, out=c)`` (CUDA and CPU);
* ``cublas``: ``cublasGemmEx``, default algorithm;
* ``cublaslt``: ``cublasLtMatmul`` with the heuristic's top-1;
* ``cublaslt-autotune``: the fastest correct of up to 100 cuBLASLt candidates, timed by the
  harness (args: ``cublaslt-autotune:max_candidates=20,max_workspace=33554432``; ``keep``,
  ``final_rounds`` and ``screen_us`` set its successive halving; by default calls of about a millisecond or more are
  screened by their validation calls and shorter ones by graph rounds, ``screen=validation`` or ``screen=graph``
  choose one way for all; ``drop`` stops timing finalists that trail; see ``cublaslt_autotune``);
* ``inductor``: ``torch.compile(torch.mm)`` in max-autotune, compiled per shape: a peer a user
  would try instead, not a baseline (not in the default set: its compile costs seconds per shape).

Each method serves both B layouts (``nn``, ``tn``): the layout is part of the Problem it is
prepared for. All raw calls go through nvmath-python's bindings (no hand-written prototypes).
"""

from __future__ import annotations

from harness.env import register_probe
from harness.registry import register


def _no_args(name: str, args: str | None) -> None:
    if args:
        raise ValueError(f"method {name!r} takes no arguments, got {args!r}")


def parse_kv(args: str | None, allowed: dict[str, type]) -> dict:
    """Parse ``k=v,k=v`` into typed kwargs; unknown keys and bad values are clear errors."""
    out: dict = {}
    for part in (args or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in allowed:
            raise ValueError(f"bad argument {part!r}; expected one of {sorted(allowed)} as key=value")
        try:
            out[key] = allowed[key](value.strip())
        except ValueError as e:
            raise ValueError(f"bad value for {key!r}: {value!r}") from e
    return out


def _torch(args: str | None):
    from baselines.torch_matmul import TorchMatmul

    _no_args("torch", args)
    return TorchMatmul()


def _cublas(args: str | None):
    from baselines.cublas_gemmex import CublasGemmEx

    _no_args("cublas", args)
    return CublasGemmEx()


def _cublaslt(args: str | None):
    from baselines.cublaslt import CublasLtHeuristic

    _no_args("cublaslt", args)
    return CublasLtHeuristic()


def _cublaslt_autotune(args: str | None):
    from baselines.cublaslt_autotune import CublasLtAutotune

    return CublasLtAutotune(**parse_kv(args, {"max_candidates": int, "max_workspace": int, "keep": float,
                                              "final_rounds": int, "screen_us": float, "screen": str,
                                              "drop": float}))


def _inductor(args: str | None):
    from baselines.inductor import Inductor

    _no_args("inductor", args)
    return Inductor()


register("torch", _torch, default=True, help="torch.matmul(a, b, out=c); CUDA and CPU")
register("cublas", _cublas, default=True, help="cublasGemmEx, fp32 compute, default algo")
register("cublaslt", _cublaslt, default=True, help="cublasLtMatmul, heuristic top-1")
register(
    "cublaslt-autotune",
    _cublaslt_autotune,
    default=True,
    help="cublasLtMatmul, fastest correct of up to 100 candidates (timed by the harness)",
)
register("inductor", _inductor, help="torch.compile(torch.mm, mode='max-autotune-no-cudagraphs'), compiled per "
         "shape (compile_s column); a peer, not a cuBLAS-family baseline; CUDA and CPU")


def _library_versions() -> dict:
    from baselines.versions import library_versions

    return library_versions()


# cuBLAS / cuBLASLt / nvmath versions become environment columns of every result row.
register_probe(_library_versions)
