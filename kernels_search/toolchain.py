"""Where the CUDA compiler and the CUTLASS headers are, and which versions they are.

Everything here is looked up once per process and memoized: the build cache calls these on every
build, and a cache hit must stay well under a second.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from harness.provenance import find_nvcc  # one lookup order for builds and for the rows' nvcc version

ARCH_FLAGS = ("-gencode=arch=compute_90a,code=sm_90a",)
BASE_FLAGS = (
    *ARCH_FLAGS,
    "-O3",
    "-std=c++17",
    "--shared",
    "-Xcompiler",
    "-fPIC",
    "-Xptxas",
    "-v",
)


class ToolchainError(RuntimeError):
    """A compiler or header set the build needs is missing."""


@functools.lru_cache(maxsize=8)
def _nvcc_version_cached(nvcc: str, mtime: float) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise ToolchainError(f"{nvcc} --version failed: {out.stderr.strip()}")
    return out.stdout.strip()


def nvcc_version(nvcc: str | None = None) -> str:
    """Full ``nvcc --version`` text (part of every cache key)."""
    nvcc = nvcc or find_nvcc()
    if not nvcc:
        raise ToolchainError("nvcc not found (set HGEMM_NVCC or CUDA_HOME)")
    try:
        mtime = os.stat(nvcc).st_mtime
    except OSError:
        mtime = 0.0
    return _nvcc_version_cached(nvcc, mtime)


@functools.lru_cache(maxsize=1)
def cutlass_include_dirs() -> tuple[str, ...]:
    """CUTLASS/CuTe include directories.

    ``HGEMM_CUTLASS_INCLUDE`` (os.pathsep-separated) wins; otherwise the headers shipped inside the
    installed ``nvidia-cutlass`` wheel (``cutlass_library/source/include``). Raises ToolchainError
    when neither exists.
    """
    env = os.environ.get("HGEMM_CUTLASS_INCLUDE")
    if env:
        dirs = [d for d in env.split(os.pathsep) if d]
    else:
        try:
            import cutlass_library  # the nvidia-cutlass wheel
        except ImportError as e:
            raise ToolchainError(
                "CUTLASS headers not found: install nvidia-cutlass or set HGEMM_CUTLASS_INCLUDE"
            ) from e
        root = Path(cutlass_library.__file__).parent / "source"
        dirs = [str(root / "include"), str(root / "tools" / "util" / "include")]
    dirs = [d for d in dirs if Path(d).is_dir()]
    if not dirs or not any((Path(d) / "cutlass" / "cutlass.h").is_file() for d in dirs):
        raise ToolchainError(f"no cutlass/cutlass.h under {dirs or env}")
    return tuple(dirs)


@functools.lru_cache(maxsize=1)
def cutlass_version() -> str:
    """Version string of the CUTLASS headers in use (part of the hopper family's cache key)."""
    for d in cutlass_include_dirs():
        h = Path(d) / "cutlass" / "version.h"
        if h.is_file():
            vals = {}
            for line in h.read_text().splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("CUTLASS_"):
                    vals[parts[1]] = parts[2]
            return ".".join(vals.get(k, "?") for k in ("CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"))
    return "unknown"


def find_cuobjdump() -> str | None:
    """cuobjdump (to read SASS) from $HGEMM_CUOBJDUMP, next to nvcc, CUDA homes, the
    nvidia-cuda-cuobjdump wheel (a test dependency, so CI reads SASS too), then PATH."""
    env = os.environ.get("HGEMM_CUOBJDUMP")
    if env:
        return env
    nvcc = find_nvcc()
    cands = [Path(nvcc).resolve().parent / "cuobjdump"] if nvcc else []
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(Path(home) / "bin" / "cuobjdump")
    try:
        import nvidia  # namespace package of NVIDIA's wheels (nvidia/cu13/bin/...)

        cands += [Path(p) / cu / "bin" / "cuobjdump" for p in nvidia.__path__ for cu in ("cu13", "cu12")]
    except ImportError:
        pass
    for c in cands:
        if c.is_file():
            return str(c)
    return shutil.which("cuobjdump")


def dump_sass(lib_path: str, timeout_s: float = 300.0) -> str:
    """SASS of every kernel in a built library (raises ToolchainError when cuobjdump is absent)."""
    tool = find_cuobjdump()
    if not tool:
        raise ToolchainError("cuobjdump not found (set HGEMM_CUOBJDUMP)")
    env = dict(os.environ)  # cuobjdump runs nvdisasm: look next to cuobjdump first
    env["PATH"] = str(Path(tool).resolve().parent) + os.pathsep + env.get("PATH", "")
    out = subprocess.run(
        [tool, "--dump-sass", lib_path], capture_output=True, text=True, timeout=timeout_s, env=env
    )
    if out.returncode != 0:
        raise ToolchainError(f"cuobjdump failed: {out.stderr.strip()}")
    return out.stdout
