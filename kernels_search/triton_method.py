"""A Method around one ``triton`` family config (Python-launched, no C ABI library).

``plan()`` turns (problem, knobs, SM count) into the launch: kernel, grid, strides, constexprs.
``launch()`` performs one GEMM with a plan; the Method's call is exactly that, so the same
code runs in the CPU interpreter tests (TRITON_INTERPRET=1) and on the GPU.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
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
    fixup: bool = False  # triton_splitk: partials reduced in the launch (a zeroed accumulator a tile + counters)
    iters_per: int = 0  # triton_streamk: k-tiles a program (its run); 0 for the other kernels
    dp_tiles: int = 0  # triton_streamk: the tiles computed whole before the runs start


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _strides(problem: Problem) -> tuple[int, ...]:
    # B strides as a K x N view: "nn" stores K x N, "tn" stores N x K.
    sbk, sbn = (problem.n, 1) if problem.layout == "nn" else (1, problem.k)
    return (problem.k, 1, sbk, sbn, problem.n, 1)


def _fixup_tiles(problem: Problem, knobs: Mapping[str, Any]) -> tuple[int, int, dict[str, Any]]:
    """(output tiles, k-tiles a tile, constexprs) of the in-launch-sum kernels' tile knobs."""
    bm, bn, bk = knobs["block_m"], knobs["block_n"], knobs["block_k"]
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=knobs["num_warps"], num_stages=knobs["num_stages"])
    return _cdiv(problem.m, bm) * _cdiv(problem.n, bn), _cdiv(problem.k, bk), consts


def splitk_plan(problem: Problem, knobs: Mapping[str, Any], num_sms: int) -> Plan:
    """The ``triton_splitk`` launch: a (tiles, slices) grid, slices from the knob or ``auto_split``."""
    from kernels_search.families.triton_splitk import auto_split

    tiles, k_tiles, consts = _fixup_tiles(problem, knobs)
    split = int(knobs["split_k"]) or auto_split(tiles, k_tiles, num_sms)
    tma = bool(knobs["tma"])
    if tma:
        consts.update(TMA=True, B_KN=problem.layout == "nn")
    return Plan(problem.m, problem.n, problem.k, False, tma, split, (tiles, split), _strides(problem), consts,
                fixup=True)


def streamk_plan(problem: Problem, knobs: Mapping[str, Any], num_sms: int) -> Plan:
    """The ``triton_streamk`` launch: one program per equal run of k-tiles (``triton_streamk.partition``);
    ``split`` is the most parts any tile is summed from (1: no tile is cut; ``workspace`` gives placeholders)."""
    from kernels_search.families.triton_streamk import partition

    tiles, k_tiles, consts = _fixup_tiles(problem, knobs)
    programs, per, parts, dp_tiles = partition(tiles, k_tiles, num_sms, knobs["per_sm"])
    return Plan(problem.m, problem.n, problem.k, False, False, parts, (programs,), _strides(problem), consts,
                fixup=True, iters_per=per, dp_tiles=dp_tiles)


def plan(problem: Problem, knobs: Mapping[str, Any], num_sms: int) -> Plan:
    m, n, k = problem.m, problem.n, problem.k
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
    return Plan(m, n, k, bool(knobs["persistent"]), bool(knobs["tma"]), split, grid, _strides(problem), consts)


def tma_descriptors(p: Plan, a, b, c) -> tuple:
    """Host TMA descriptors for A (M x K), B (K x N for "nn", N x K for "tn") and C, with the
    plan's block shapes (C's block is one epilogue slice). Cheap host objects: Triton's launcher
    encodes the tensor maps at each launch, so a call with other tensors needs new ones."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn = p.consts["BLOCK_M"], p.consts["BLOCK_N"]
    return (*ab_descriptors(p, a, b), TensorDescriptor.from_tensor(c, [bm, bn // p.consts["EPI_SPLIT"]]))


def ab_descriptors(p: Plan, a, b) -> tuple:
    """Host TMA descriptors for A and B alone (``triton_splitk``'s tma=1 stores C by pointer)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk = p.consts["BLOCK_M"], p.consts["BLOCK_N"], p.consts["BLOCK_K"]
    b_block = [bk, bn] if p.consts["B_KN"] else [bn, bk]
    return TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, b_block)


def workspace(p: Plan, device) -> tuple:
    """What a call with plan ``p`` needs besides A, B and C: (fp32 workspace or None, counters or None).
    ``triton`` split-K: an M x N fp32 accumulator; ``triton_splitk`` and ``triton_streamk`` (where a
    tile is cut): a zeroed fp32 accumulator and a zeroed counter per tile (the kernel leaves them at
    zero). Where no tile is cut they are one-element placeholders of the same dtypes: Triton compiles
    a kernel per argument dtype, and ``triton_streamk``'s sum branch is compiled even when no run
    reaches it (its run length is a runtime value), so an fp16 stand-in for the int32 counter does not
    compile."""
    import torch

    if p.fixup:
        if p.split == 1:
            return (torch.zeros(1, dtype=torch.float32, device=device),
                    torch.zeros(1, dtype=torch.int32, device=device))
        bm, bn = p.consts["BLOCK_M"], p.consts["BLOCK_N"]
        tiles = _cdiv(p.m, bm) * _cdiv(p.n, bn)
        return (torch.zeros(tiles * bm * bn, dtype=torch.float32, device=device),
                torch.zeros(tiles, dtype=torch.int32, device=device))
    if p.split > 1:
        return torch.empty((p.m, p.n), dtype=torch.float32, device=device), None
    return None, None


def launch(p: Plan, a, b, c, ws=None, counts=None) -> None:
    """One GEMM on the current stream: kernel, plus zero-fill and cast around it for ``triton``'s split-K."""
    if p.fixup:  # triton_streamk (its run length) or triton_splitk (its slice count); uncut: placeholders
        if p.iters_per:
            from kernels_search.triton_streamk_kernel import streamk_kernel

            streamk_kernel[p.grid](a, b, c, ws, counts, p.m, p.n, p.k, p.iters_per, p.dp_tiles, *p.strides, **p.consts)
        else:
            from kernels_search.triton_splitk_kernel import splitk_fixup_kernel

            if p.tma:
                a, b = ab_descriptors(p, a, b)
            splitk_fixup_kernel[p.grid](a, b, c, ws, counts, p.m, p.n, p.k, p.split, *p.strides, **p.consts)
        return
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


PLANS = {"triton_splitk": splitk_plan, "triton_streamk": streamk_plan}  # families with their own launch plan


def launch_rules_text(family: Family) -> str:
    """What decides a family's launch besides its kernel file, for families with their own plan: the plan
    function and the family's module (``auto_split``, ``partition`` and their constants). Part of the
    source hash, so a changed rule (what ``split_k=0`` launches, say) retires the evidence measured under
    the old one. Empty for the other Triton families, whose hash stays their kernel file's."""
    fn = PLANS.get(family.name)
    if fn is None:
        return ""
    module = sys.modules[type(family).__module__]
    return inspect.getsource(fn) + inspect.getsource(module)


class TritonMethod(FamilyMethod):
    def __init__(self, family: Family, knobs: Mapping[str, Any]):
        super().__init__(family, knobs)
        text = family.render(self.knobs) + launch_rules_text(family)
        self.source_hash = hashlib.sha256(text.encode()).hexdigest()

    def supports(self, problem: Problem, device: str) -> Support:
        if not str(device).startswith("cuda"):
            return unsupported("triton kernels run on CUDA devices only")
        return self._family.supports(self.knobs, problem)

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        t0 = time.perf_counter()
        device = torch.device(ctx.device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        p = PLANS.get(self._family.name, plan)(problem, self.knobs, sms)
        ws, counts = workspace(p, device)

        def fn(a, b, c) -> None:
            launch(p, a, b, c, ws, counts)

        a, b, c = ctx.inputs
        fn(a, b, c)  # compile now: setup, not timed
        torch.cuda.synchronize(device)
        return Prepared(fn=fn, setup_s=time.perf_counter() - t0,
                        info={"workspace_bytes": 0 if ws is None else ws.numel() * 4, "grid": list(p.grid),
                              "split_k": p.split},
                        capturable=True)
