"""Compile ahead every CUDA config that ``compare --plan`` files name, or list the ones not built yet.

Why: a device call's budget clock runs while the GPU host compiles, and a CUTLASS sm90 binary takes
1-3 minutes of one core. Plans are written before their call (lab/studies/*.txt, registered first), so
their binaries can be built here (nvcc only, no GPU) into ``$HGEMM_BUILD_CACHE`` and carried; on the
GPU host the same command builds whatever is still missing on all its cores at once, before the
compare's prepares would build them one at a time. Cache hits cost nothing.

    python3 scripts/plan_prebuild.py PLAN [PLAN ...] [--missing] [-j N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def plan_methods(paths) -> dict[Path, object]:
    """{binary path in the build cache: a CUDA-family method the plans name that it serves}, one entry
    per binary (runtime-option variants share it; kernels_search.build.cache_entry)."""
    from harness.cli import _split_methods
    from harness.plan import read_plan
    from harness.registry import resolve
    from kernels_search import build
    from kernels_search.cuda_method import CudaKernelMethod

    by_binary: dict[Path, object] = {}
    for path in paths:
        for _, text in read_plan(Path(path)):
            for m in resolve(_split_methods([text])):
                if isinstance(m, CudaKernelMethod):
                    job = m.build_job()
                    by_binary.setdefault(build.cache_entry(job.source, job.extra_flags, job.extra_key) / build.LIB, m)
    return by_binary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plans", nargs="+", help="compare --plan files")
    ap.add_argument("--missing", action="store_true", help="list the binaries not built yet; build nothing")
    ap.add_argument("-j", type=int, default=None, help="parallel builds (default: the build pool's)")
    a = ap.parse_args(argv)
    from kernels_search.cuda_method import prebuild

    methods = plan_methods(a.plans)
    todo = [m for lib, m in methods.items() if not lib.exists()]
    print(f"{len(methods)} CUDA binaries in {len(a.plans)} plan(s), {len(todo)} not built yet", flush=True)
    if a.missing:
        for m in todo:
            print(" ", m.name)
        return 0
    t0 = time.perf_counter()
    failed = [(m, r) for m, r in zip(todo, prebuild(todo, workers=a.j)) if not r.ok]
    print(f"built {len(todo) - len(failed)} in {time.perf_counter() - t0:.0f} s; {len(failed)} failed")
    for m, r in failed:
        print(f"FAILED {m.name}\n{r.log[-1500:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
