"""What made a row: the code's git commit and the toolchain versions, recorded on every row.

A number can be checked only if the code and tools that produced it can be found again, so each
run records the commit of the hgemm-bench source it ran from and the versions of nvcc, the CUTLASS
headers and Triton. Every lookup here is read-only, bounded in time, and answers None (or
"unknown" for the commit) rather than raise: a missing tool never stops a run.

The commit is that of the tree holding this package (not of the working directory):
* ``$HGEMM_GIT_COMMIT`` as given, when set: a driver that copies a checkout to another machine sets
  it from ``git rev-parse HEAD`` (the copy may carry no ``.git``, or a stale one);
* ``<sha>``: a git checkout whose tracked files match the commit;
* ``<sha>-dirty``: tracked files differ from it, or an untracked file sits in a product package
  (``PRODUCT_PACKAGES``); the folders of measured results and the generated leaderboard
  (``DATA_DIRS``) hold data, not code, and are not looked at;
* ``dirty``: a git tree with no commit yet;
* an installer's record of the commit (``pip install git+...``), when there is no checkout;
* ``unknown`` otherwise (an installed copy without git).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from importlib import metadata, util
from pathlib import Path

COMMIT_ENV = "HGEMM_GIT_COMMIT"
DIST_NAME = "hgemm-bench"  # the distribution pip records a VCS install's commit for
PRODUCT_PACKAGES = ("harness", "baselines", "kernels_search", "reports")
DATA_DIRS = ("results", "site")  # tracked data: a new run or a regenerated report does not make the code dirty
_GIT_TIMEOUT_S = 10.0

_SOURCE_ROOT = Path(__file__).resolve().parent.parent  # the folder holding the harness package


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                             timeout=_GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _dirty(root: Path) -> bool:
    status = _git(root, "status", "--porcelain=v1", "--untracked-files=all")
    if status is None:
        return True  # a tree git cannot describe is not vouched for
    for line in status.splitlines():
        code, path = line[:2], line[3:].strip('"')
        top = path.split("/", 1)[0]
        if top in DATA_DIRS:
            continue
        if code == "??" and top not in PRODUCT_PACKAGES:
            continue
        return True
    return False


def _installed_commit() -> str | None:
    """The commit pip recorded for a VCS install (PEP 610 ``direct_url.json``), if any."""
    try:
        text = metadata.distribution(DIST_NAME).read_text("direct_url.json")
        return (json.loads(text or "{}").get("vcs_info") or {}).get("commit_id")
    except (metadata.PackageNotFoundError, ValueError, AttributeError):
        return None


def git_commit(root: Path = _SOURCE_ROOT) -> str:
    """The commit of the code at ``root`` (default: this package's tree); see the module doc."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is not None and Path(top.strip()).resolve() == Path(root).resolve():
        head = _git(root, "rev-parse", "HEAD")
        if head is None:
            return "dirty"
        return head.strip() + ("-dirty" if _dirty(root) else "")
    return _installed_commit() or "unknown"


def find_nvcc() -> str | None:
    """nvcc from $HGEMM_NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, then PATH
    (the order the kernel builds look in)."""
    env = os.environ.get("HGEMM_NVCC")
    if env:
        return env
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


@functools.lru_cache(maxsize=4)
def _nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    m = re.search(r"release [\d.]+, V(\S+)", out.stdout)
    if m:
        return m.group(1)
    lines = out.stdout.strip().splitlines()
    return lines[-1].strip() if lines else None


def nvcc_version() -> str | None:
    """``13.0.88`` from ``nvcc --version`` ("... release 13.0, V13.0.88"); None without nvcc."""
    nvcc = find_nvcc()
    return _nvcc_version(nvcc) if nvcc else None


def _version_h(include_dir: Path) -> str | None:
    h = include_dir / "cutlass" / "version.h"
    if not h.is_file():
        return None
    vals = dict(re.findall(r"^\s*#define\s+(CUTLASS_(?:MAJOR|MINOR|PATCH))\s+(\d+)", h.read_text(), re.M))
    if "CUTLASS_MAJOR" not in vals:
        return None
    return ".".join(vals.get(k, "?") for k in ("CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"))


def cutlass_version() -> str | None:
    """Version of the CUTLASS headers a kernel build would use: ``$HGEMM_CUTLASS_INCLUDE``'s
    ``cutlass/version.h``, else that of the ``nvidia-cutlass`` wheel's headers (found without
    importing it), else the wheel's version; None when there is none."""
    env = os.environ.get("HGEMM_CUTLASS_INCLUDE")
    if env:
        for d in env.split(os.pathsep):
            v = d and _version_h(Path(d))
            if v:
                return v
    try:
        spec = util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        v = _version_h(Path(spec.origin).parent / "source" / "include")
        if v:
            return v
    try:
        return metadata.version("nvidia-cutlass")
    except metadata.PackageNotFoundError:
        return None


def triton_version() -> str | None:
    """The installed Triton's version (read from its metadata: importing Triton is slow); None
    when absent."""
    for dist in ("triton", "pytorch-triton"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def collect() -> dict:
    """The provenance columns of a results row."""
    return {
        "git_commit": git_commit(),
        "nvcc_version": nvcc_version(),
        "cutlass_version": cutlass_version(),
        "triton_version": triton_version(),
    }
