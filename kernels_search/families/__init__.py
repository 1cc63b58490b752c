"""Kernel families. Each module defines one Family instance, ``FAMILY``."""

from kernels_search.families import (gemv, gemv_rows, hopper, hopper_swap, skinny, smalltile, splitk, splitk_dsmem,
                                     splitk_regs, splitk_tma, triton_gemm, triton_splitk,
                                     triton_streamk)

ALL = {f.name: f for f in (splitk.FAMILY, smalltile.FAMILY, hopper.FAMILY, splitk_tma.FAMILY, splitk_tma.SWAP,
                           hopper_swap.FAMILY, triton_gemm.FAMILY, triton_splitk.FAMILY, triton_streamk.FAMILY,
                           skinny.FAMILY, gemv.FAMILY, gemv_rows.FAMILY, splitk_regs.FAMILY, splitk_dsmem.FAMILY)}
