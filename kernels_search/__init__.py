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


def _library(args: str | None):
    from kernels_search.search.library import make_method

    return make_method(args)


def _register_all() -> None:
    for name, fam in FAMILIES.items():
        knobs = ", ".join(f"{k.name}{'*' if k.runtime else ''}" for k in fam.knobs)
        register(
            name,
            lambda args, _n=name: make_method(_n, args),
            default=False,
            help=f"{name} kernel family; knobs: {knobs} (* = runtime option)",
        )
    # searched kernels as data, with a dispatcher; imported when resolved (it needs torch)
    register("library", _library, default=False,
             help="searched-kernel library: exact shape, else the nearest tuned shape's kernel (within "
                  "max_distance in log2 M, N, K), else cuBLASLt autotune, labelled as a fallback "
                  "(library:path=lib.json,nearest=4,verify=1,max_distance=1)")


_register_all()
