"""A Method around one ``triton`` family config (Python-launched, no C ABI library).

``plan()`` turns (problem, knobs, SM count) into the launch: kernel, grid, strides, constexprs.
``launch()`` performs one GEMM with a plan; the Method's call is exactly that, so the same
code runs in the CPU interpreter tests (TRITON_INTERPRET=1) and on the GPU.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Mapping

from harness.method import Prepared, PrepareContext, Support, unsupported
from harness.problem import Problem
from kernels_search.family import Family, FamilyMethod


@dataclass
class Plan:
    m: int
    n: int
    k: int
    persistent: bool
    tma: bool
    split: int
    grid: tuple[int, ...]
    strides: tuple[int, ...]  # am, ak, bk, bn, cm, cn
    consts: dict[str, Any]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def plan(problem: Problem, knobs: Mapping[str, Any], num_sms: int) -> Plan:
    m, n, k = problem.m, problem.n, problem.k
    # B strides as a K x N view: "nn" stores K x N, "tn" stores N x K.
    sbk, sbn = (n, 1) if problem.layout == "nn" else (1, k)
    split = int(knobs["split_k"])
    tiles = _cdiv(m, knobs["block_m"]) * _cdiv(n, knobs["block_n"])
    consts = dict(BLOCK_M=knobs["block_m"], BLOCK_N=knobs["block_n"], BLOCK_K=knobs["block_k"],
                  GROUP_M=knobs["group_m"], num_warps=knobs["num_warps"], num_stages=knobs["num_stages"])
    if knobs["persistent"]:
        progs = max(1, min(num_sms * knobs["per_sm"], tiles))
        consts["NUM_PROGRAMS"] = progs
        grid: tuple[int, ...] = (progs,)
    else:
        consts["SPLIT_K"] = split
        grid = (tiles, split)
    if knobs["tma"]:
        consts.update(B_KN=problem.layout == "nn", EPI_SPLIT=knobs["epi_split"])
    return Plan(m, n, k, bool(knobs["persistent"]), bool(knobs["tma"]), split, grid,
                (k, 1, sbk, sbn, n, 1), consts)


def tma_descriptors(p: Plan, a, b, c) -> tuple:
    """Host TMA descriptors for A (M x K), B (K x N for "nn", N x K for "tn") and C, with the
    plan's block shapes (C's block is one epilogue slice). Cheap host objects: Triton's launcher
    encodes the tensor maps at each launch, so a call with other tensors needs new ones."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk = p.consts["BLOCK_M"], p.consts["BLOCK_N"], p.consts["BLOCK_K"]
    b_block = [bk, bn] if p.consts["B_KN"] else [bn, bk]
    return (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, b_block),
            TensorDescriptor.from_tensor(c, [bm, bn // p.consts["EPI_SPLIT"]]))


def launch(p: Plan, a, b, c, ws=None) -> None:
    """One GEMM on the current stream: kernel, plus zero-fill and cast around it for split-K."""
    from kernels_search.triton_kernels import gemm_kernel, gemm_persistent_kernel, gemm_tma_kernel

    if p.tma:
        gemm_tma_kernel[p.grid](*tma_descriptors(p, a, b, c), p.m, p.n, p.k, **p.consts)
        return
    kern = gemm_persistent_kernel if p.persistent else gemm_kernel
    if p.split == 1:
        kern[p.grid](a, b, c, p.m, p.n, p.k, *p.strides, **p.consts)
    else:
        ws.zero_()
        kern[p.grid](a, b, ws, p.m, p.n, p.k, *p.strides, **p.consts)
        c.copy_(ws)  # fp32 -> fp16 cast, inside the call


class TritonMethod(FamilyMethod):
    def __init__(self, family: Family, knobs: Mapping[str, Any]):
        super().__init__(family, knobs)
        self.source_hash = hashlib.sha256(family.render(self.knobs).encode()).hexdigest()

    def supports(self, problem: Problem, device: str) -> Support:
        if not str(device).startswith("cuda"):
            return unsupported("triton kernels run on CUDA devices only")
        return self._family.supports(self.knobs, problem)

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        t0 = time.perf_counter()
        device = torch.device(ctx.device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        p = plan(problem, self.knobs, sms)
        ws = torch.empty((p.m, p.n), dtype=torch.float32, device=device) if p.split > 1 else None

        def fn(a, b, c) -> None:
            launch(p, a, b, c, ws)

        a, b, c = ctx.inputs
        fn(a, b, c)  # compile now: setup, not timed
        torch.cuda.synchronize(device)
        return Prepared(fn=fn, setup_s=time.perf_counter() - t0,
                        info={"workspace_bytes": 0 if ws is None else ws.numel() * 4, "grid": list(p.grid)},
                        capturable=True)
