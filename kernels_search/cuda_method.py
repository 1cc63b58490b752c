"""A Method around a family config compiled to an hgemm C-ABI shared library.

``prepare`` renders and builds the source (through the content-addressed cache), loads the
library with ctypes, asks it for the workspace size of the problem, allocates that workspace once
(zero-filled: split-K arrival counters start at zero and every call leaves them at zero) and
returns ``fn(a, b, c)``, which only calls ``hgemm_run`` on torch's current CUDA stream. No host
synchronisation and no allocation happen in the call, so it can be captured in a CUDA graph.
One Prepared call must not run concurrently with itself on two streams (it owns one workspace).
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any, Mapping

from harness.method import Prepared, PrepareContext, Support, Unsupported, unsupported
from harness.problem import Problem
from kernels_search import build as build_mod
from kernels_search.family import Family, FamilyMethod

ERR_UNSUPPORTED = 3  # HGEMM_ERR_UNSUPPORTED in templates/hgemm_abi.cuh
ERRORS = {
    1: "bad arguments",
    2: "unknown layout",
    3: "shape or alignment not supported by this kernel",
    4: "workspace too small",
    5: "CUDA launch failed",
    6: "runtime option out of range",
}
LAYOUT_CODE = {"nn": 0, "tn": 1}


class BuildError(RuntimeError):
    """The family config did not compile; ``result`` holds the BuildResult with the log."""

    def __init__(self, result: build_mod.BuildResult):
        tail = "\n".join(result.log.strip().splitlines()[-20:])
        super().__init__(f"build failed ({result.key[:12] or 'no key'}):\n{tail}")
        self.result = result


class HgemmError(RuntimeError):
    """hgemm_run returned a nonzero code."""


class KernelDeclined(HgemmError, Unsupported):
    """hgemm_run returned HGEMM_ERR_UNSUPPORTED: the kernel itself refused this shape or these
    options at run time (e.g. CUTLASS can_implement): an unsupported row, not a wrong one."""


_LIBS: dict[str, ctypes.CDLL] = {}
_LIBS_LOCK = threading.Lock()


def load_library(path: str) -> ctypes.CDLL:
    """dlopen an hgemm library once per process and declare the ABI's argument types."""
    with _LIBS_LOCK:
        lib = _LIBS.get(path)
        if lib is None:
            lib = ctypes.CDLL(path)
            lib.hgemm_run.restype = ctypes.c_int
            lib.hgemm_run.argtypes = [
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
            ]
            lib.hgemm_workspace.restype = ctypes.c_size_t
            lib.hgemm_workspace.argtypes = [
                ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(ctypes.c_int), ctypes.c_int,
            ]
            _LIBS[path] = lib
        return lib


def build_config(family: Family, knobs: Mapping[str, Any], **kw) -> build_mod.BuildResult:
    """Render and build one config (cached). Never raises for a compile error."""
    return build_mod.build(
        family.render(knobs), family.extra_flags(knobs), extra_key=family.extra_key(knobs), **kw
    )


class CudaKernelMethod(FamilyMethod):
    """One family config as a Method; the name is the canonical ``family:k=v,...`` spec."""

    def __init__(self, family: Family, knobs: Mapping[str, Any]):
        super().__init__(family, knobs)
        self._source: str | None = None
        self._source_hash: str | None = None

    @property
    def source(self) -> str:
        if self._source is None:
            self._source = self._family.render(self.knobs)
        return self._source

    @property
    def source_hash(self) -> str:
        if self._source_hash is None:
            self._source_hash = build_mod.source_hash(self.source)
        return self._source_hash

    def supports(self, problem: Problem, device: str) -> Support:
        if not str(device).startswith("cuda"):
            return unsupported(f"{self.family} kernels run on CUDA devices only")
        if problem.dtype != "float16":
            return unsupported("fp16 only")
        return self._family.supports(self.knobs, problem)

    def build_job(self) -> build_mod.BuildJob:
        """What building this config takes: configs with equal jobs share one binary (runtime options)."""
        return build_mod.BuildJob(self.source, tuple(self._family.extra_flags(self.knobs)),
                                  self._family.extra_key(self.knobs))

    def build(self) -> build_mod.BuildResult:
        job = self.build_job()
        return build_mod.build(job.source, job.extra_flags, extra_key=job.extra_key)

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        t0 = time.perf_counter()
        res = self.build()
        if not res.ok or not res.lib_path:
            raise BuildError(res)
        lib = load_library(res.lib_path)
        m, n, k = problem.m, problem.n, problem.k
        layout = LAYOUT_CODE[problem.layout]
        device = torch.device(ctx.device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        opts_list = self._family.opts(self.knobs, problem, sms)  # "opts" in info: what the kernel ran
        opts = (ctypes.c_int * max(1, len(opts_list)))(*opts_list)
        n_opts = len(opts_list)
        with torch.cuda.device(device):
            ws_bytes = int(lib.hgemm_workspace(m, n, k, layout, opts, n_opts))
        # Zero-filled once: split-K arrival counters start at zero; each call leaves them so.
        ws = torch.zeros(max(ws_bytes, 1), dtype=torch.uint8, device=device)
        ws_ptr = ws.data_ptr() if ws_bytes else None
        torch.cuda.synchronize(device)  # the zero fill is done before any stream uses it
        run = lib.hgemm_run

        def fn(a, b, c) -> None:
            ws  # noqa: B018  (referenced so the workspace lives as long as fn)
            rc = run(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, layout, opts, n_opts,
                     ws_ptr, ws_bytes, torch.cuda.current_stream().cuda_stream)
            if rc:
                err = KernelDeclined if rc == ERR_UNSUPPORTED else HgemmError
                raise err(f"{self.name}: hgemm_run returned {rc} ({ERRORS.get(rc, 'unknown')})")

        info = {
            "build_key": res.key,
            "build_cached": res.cached,
            "compile_s": round(res.compile_s, 3),
            "workspace_bytes": ws_bytes,
            "opts": list(opts_list),
            **{f"ptxas_{k2}": v for k2, v in res.resources.items()},
        }
        return Prepared(fn=fn, setup_s=time.perf_counter() - t0, info=info, capturable=True)


def prebuild(methods, workers: int | None = None) -> list[build_mod.BuildResult]:
    """Compile many CudaKernelMethods at once on the build pool (cache hits cost nothing).

    Returns one BuildResult per method, in order; failures are results, not exceptions.
    """
    return build_mod.build_many([m.build_job() for m in methods], workers=workers)
