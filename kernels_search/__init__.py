"""Searched kernels: parametric kernel families, their build pipeline and Method wrappers.

Importing the package registers every family as a method factory: ``--methods
splitk:bm=64,splits=16`` resolves to one config (knobs not named take the family defaults).
No family is in the default method set.
"""

from __future__ import annotations

from harness.registry import register
from kernels_search.families import ALL as FAMILIES


def make_method(family_name: str, args: str | None):
    """The Method for ``<family>:<args>``; raises KnobError (a ValueError) for a bad spec."""
    family = FAMILIES[family_name]
    knobs = family.parse(args)
    if family.backend == "triton":
        from kernels_search.triton_method import TritonMethod

        return TritonMethod(family, knobs)
    from kernels_search.cuda_method import CudaKernelMethod

    return CudaKernelMethod(family, knobs)


def _register_all() -> None:
    for name, fam in FAMILIES.items():
        knobs = ", ".join(f"{k.name}{'*' if k.runtime else ''}" for k in fam.knobs)
        register(
            name,
            lambda args, _n=name: make_method(_n, args),
            default=False,
            help=f"{name} kernel family; knobs: {knobs} (* = runtime option)",
        )


_register_all()

# The `library` method (searched kernels as data, with a dispatcher) is resolvable by default.
import kernels_search.search.library  # noqa: E402,F401
