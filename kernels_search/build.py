"""Build pipeline: CUDA source -> nvcc -> shared library with the hgemm C ABI, content-addressed.

``build(source)`` compiles one translation unit for sm_90a and returns a ``BuildResult``; it never
raises for a compiler problem (a failed or timed-out compile is a result with ``ok=False`` and the
log). Artifacts are cached under ``cache_dir()``: ``$HGEMM_BUILD_CACHE`` if set, else ``build/`` in the
per-user cache (``user_dirs.cache_root()``: ``$XDG_CACHE_HOME/hgemm-bench``, default
``~/.cache/hgemm-bench``), the one cache ``hgemm-bench build``, ``search``, ``tune`` and ``compare`` use,
keyed by sha256(source, flags, extra key, ``nvcc --version``), so an unchanged config costs one
file read. ``build_many`` compiles a batch on a thread pool sized to the cores this process may use (each
worker just waits on an nvcc process); ``kill_running`` stops every compiler this process started
(a search at its deadline).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from kernels_search import ptxas, toolchain, user_dirs

META = "meta.json"
LIB = "kernel.so"
DEFAULT_TIMEOUT_S = 1800.0
_RUNNING: set[subprocess.Popen] = set()  # compilers in flight (each in its own process group)
_RUNNING_LOCK = threading.Lock()


def cache_dir() -> Path:
    """Where builds are cached: ``$HGEMM_BUILD_CACHE``, else ``<user cache>/build`` (module docstring)."""
    env = os.environ.get("HGEMM_BUILD_CACHE")
    return Path(env) if env else user_dirs.cache_root() / "build"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass
class BuildResult:
    """What one compile produced. ``ok`` False means ``lib_path`` is None and ``log`` says why."""

    ok: bool
    key: str
    source_hash: str
    lib_path: str | None = None
    log: str = ""
    compile_s: float = 0.0  # seconds nvcc took when it was built (not this lookup)
    cached: bool = False  # served from the cache by this call
    flags: list[str] = field(default_factory=list)
    kernels: list[dict] = field(default_factory=list)  # ptxas figures per entry function
    resources: dict = field(default_factory=dict)  # ptxas.summarize() of kernels

    @property
    def spill_bytes(self) -> int:
        return int(self.resources.get("spill_bytes", 0))


def _portable(flag: str) -> str:
    """An include flag as the key sees it: the path inside site-packages, not where that is.

    Header identity comes from ``extra_key`` (e.g. the CUTLASS version), so the same build made
    in another environment (a CI machine, the GPU host) hits the same cache entry."""
    if flag.startswith("-I") and "site-packages/" in flag:
        return "-I" + flag.rsplit("site-packages/", 1)[1]
    return flag


def cache_key(source: str, flags: Sequence[str], extra_key: str = "", nvcc: str | None = None) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(map(_portable, flags)), extra_key, toolchain.nvcc_version(nvcc)):
        h.update(part.encode())
        h.update(b"\x01")
    return h.hexdigest()


def entry_path(key: str) -> Path:
    """The cache folder of a build key (``<key[:2]>/<key>`` under ``cache_dir()``)."""
    return cache_dir() / key[:2] / key


def cache_entry(source: str, extra_flags: Sequence[str] = (), extra_key: str = "", nvcc: str | None = None) -> Path:
    """The cache folder ``build`` uses for these arguments, without building: its ``LIB`` exists once
    a build of them succeeded. Raises what ``cache_key`` raises for a broken toolchain."""
    nvcc = nvcc or toolchain.find_nvcc()
    return entry_path(cache_key(source, [*toolchain.BASE_FLAGS, *extra_flags], extra_key, nvcc))


def _load_cached(entry: Path) -> tuple[BuildResult | None, str]:
    """The entry as a result, or None and why not ("" when there is no entry at all)."""
    if not entry.exists():
        return None, ""
    try:
        meta = json.loads((entry / META).read_text())
        res = BuildResult(**meta)
    except (OSError, ValueError, TypeError) as e:
        return None, f"{META}: {type(e).__name__}: {e}"
    if res.ok:
        lib = entry / LIB
        if not lib.is_file():
            return None, f"{LIB} missing" + (" (a dangling link)" if lib.is_symlink() else "")
        res.lib_path = str(lib)
    res.cached = True
    return res, ""


def _set_aside(entry: Path, why: str) -> None:
    """Move an unusable entry out of the way, so the fresh build can be published in its place.

    ``os.rename`` onto a non-empty directory fails, so before this an entry that existed but
    could not be read (seen on the H200 host) made every later build of its key
    fail after compiling. It is kept, renamed, for a look at what broke it."""
    stale = Path(tempfile.mkdtemp(prefix=f".stale-{entry.name[:12]}-", dir=entry.parent.parent))
    try:
        os.rename(entry, stale / entry.name)
        (stale / "why.txt").write_text(why + "\n")
    except OSError:
        pass  # a concurrent build moved or replaced it: publishing decides


def _niced(cmd: list[str]) -> list[str]:
    """``cmd`` under ``nice -n $HGEMM_BUILD_NICE`` (default 10): a search compiles on every core
    while the same host times kernels and runs the search loop; builds yield the CPU to both.
    HGEMM_BUILD_NICE=0 or no ``nice`` on PATH: unchanged."""
    level = os.environ.get("HGEMM_BUILD_NICE", "10").strip()
    nice = shutil.which("nice")
    if not nice or level in ("", "0"):
        return cmd
    return [nice, "-n", level, *cmd]


def build(
    source: str,
    extra_flags: Sequence[str] = (),
    *,
    extra_key: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    use_cache: bool = True,
    nvcc: str | None = None,
) -> BuildResult:
    """Compile ``source`` to a shared library (or fetch it from the cache)."""
    nvcc = nvcc or toolchain.find_nvcc()
    shash = source_hash(source)
    flags = [*toolchain.BASE_FLAGS, *extra_flags]
    if not nvcc:
        return BuildResult(False, "", shash, log="nvcc not found (set HGEMM_NVCC or CUDA_HOME)", flags=flags)
    try:
        key = cache_key(source, flags, extra_key, nvcc)
    except (toolchain.ToolchainError, OSError, subprocess.SubprocessError) as e:
        return BuildResult(False, "", shash, log=f"toolchain error: {e}", flags=flags)
    root = cache_dir()
    entry = entry_path(key)
    if use_cache:
        hit, why = _load_cached(entry)
        if hit is not None:
            return hit
        if why:
            _set_aside(entry, why)

    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=root))
    try:
        (work / "kernel.cu").write_text(source)
        cmd = [nvcc, *flags, "kernel.cu", "-o", LIB]
        t0 = time.perf_counter()
        rc, log, interrupted = _compile(_niced(cmd), work, timeout_s)
        compile_s = time.perf_counter() - t0
        ok = rc == 0 and (work / LIB).is_file()
        kernels = ptxas.parse_ptxas(log)
        res = BuildResult(
            ok=ok,
            key=key,
            source_hash=shash,
            log=(" ".join(cmd) + "\n" + log) if not ok else log,
            compile_s=compile_s,
            flags=flags,
            kernels=ptxas.as_dicts(kernels),
            resources=ptxas.summarize(kernels),
        )
        if interrupted:  # timed out or killed: not the compiler's verdict, never cached
            return res
        meta = asdict(res)
        meta.pop("lib_path"), meta.pop("cached")
        (work / META).write_text(json.dumps(meta, indent=1))
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(work, entry)  # atomic publish; loses to a concurrent identical build
        except OSError:
            if not entry.exists():
                raise
        else:
            work = None  # type: ignore[assignment]
        got, why = _load_cached(entry)
        if got is None:
            # Never an ok result without a library: ctypes would dlopen the main program instead
            # (seen on the H200 host as rows failing with "python3: undefined symbol: hgemm_run").
            # Say so, and leave the entry to the next build.
            res.ok = False
            res.log = f"cache entry {entry} unreadable right after it was published ({why})\n" + res.log
            return res
        got.cached = False
        return got
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def run_compiler(cmd: list[str], cwd: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
                 env: dict[str, str] | None = None) -> tuple[int, str, bool]:
    """(return code, output, interrupted) of a compiler command run as ``build`` runs nvcc: niced,
    in its own process group, with a timeout, stopped by ``kill_running``. For builds that are not
    one nvcc call (a torch extension's, ``kernels_search.extern_build``)."""
    return _compile(_niced(cmd), cwd, timeout_s, env)


def _compile(cmd: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> tuple[int, str, bool]:
    """(return code, output, interrupted: timed out or killed by a signal) of one compiler run,
    registered for ``kill_running`` while it runs. Its own process group, so a kill reaches nvcc's
    children (cicc, ptxas) too."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            killed = proc.returncode < 0
            return proc.returncode, (out or "") + ("\nnvcc killed" if killed else ""), killed
        except subprocess.TimeoutExpired:
            _kill(proc)
            out, _ = proc.communicate()
            return -1, (out or "") + f"\nnvcc timed out after {timeout_s:.0f} s", True
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_running() -> int:
    """Kill every compiler this process is running (and its children); returns how many. Their
    builds return failed results that are not cached."""
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for p in procs:
        _kill(p)
    return len(procs)


@dataclass
class BuildJob:
    source: str
    extra_flags: tuple[str, ...] = ()
    extra_key: str = ""


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def build_many(
    jobs: Sequence[BuildJob], *, workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[BuildResult]:
    """Build every job, ``workers`` nvcc processes at a time; results in job order.

    Identical jobs are compiled once.
    """
    uniq: dict[tuple, BuildJob] = {}
    for j in jobs:
        uniq.setdefault((j.source, tuple(j.extra_flags), j.extra_key), j)
    n = min(workers or default_workers(), max(1, len(uniq)))
    with ThreadPoolExecutor(max_workers=n) as pool:
        futs = {
            k: pool.submit(build, j.source, j.extra_flags, extra_key=j.extra_key, timeout_s=timeout_s)
            for k, j in uniq.items()
        }
        done = {k: f.result() for k, f in futs.items()}
    return [done[(j.source, tuple(j.extra_flags), j.extra_key)] for j in jobs]
