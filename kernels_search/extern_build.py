"""Builds of ``--kernels-dir`` kernels: one PyTorch extension (``ExtBuild``, ``load_extension``), and
every file of a directory at once, on every core, before anything is measured (``prebuild``).

A compare prepares its methods one at a time in its sandbox worker, so a directory of PyTorch-extension
kernels built there compiles one extension after another (a CuTe kernel with torch's headers takes a
minute or more of one core) while the rest of the host idles. ``prebuild`` compiles them all in
parallel into the places a prepare looks first: the build cache for C-ABI files, ``ExtBuild.build_dir``
for extensions. A prepare then only loads (under 2 s).

An extension builds in a child process (``python -m kernels_search.extern_build SPEC.json``):
``torch.utils.cpp_extension`` imports the module it built, and a kernel's code is loaded only where a
crash costs nothing (this throwaway child, or the sandbox worker), never in the process that drives a
run. The child runs under the build cache's rules for compilers (``build.run_compiler``: niced, its
own process group, a timeout, stopped by ``build.kill_running``). A failed build is a result with the
compiler's last lines, never an exception; a compile error is recorded next to the build
(``ExtBuild.failure``), so the prepare reports it without compiling again.

It builds; it must not measure anything or decide what to measure.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from kernels_search import build as build_mod

REASON_LINES = 30  # of the compiler's output kept as a failed build's reason


def _tail(text: str, lines: int = REASON_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class ExtBuildError(RuntimeError):
    """A PyTorch-extension kernel did not build; the message holds the compiler's last lines."""


# ---- loading one extension -------------------------------------------------------------------

_EXT_MODULES: dict[str, Any] = {}
_EXT_LOCK = threading.Lock()


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True when written.

    ninja rebuilds whatever is newer than its outputs: a source rewritten unchanged would cost a
    full extension compile in every new process (measured on an H200 host: ~33 s per kernel)."""
    if path.is_file() and path.read_text() == text:
        return False
    path.write_text(text)
    return True


def load_extension(name: str, build_dir: Path, files: dict[str, str], cuda_flags: Sequence[str] = ()) -> Any:
    """The torch extension module ``name`` built from ``files`` (file name -> text) in ``build_dir``,
    through ``torch.utils.cpp_extension.load``: built once, then loaded from ``build_dir`` by any
    later process without compiling (sources are written only when their text changed, so ninja
    finds everything up to date), and once per process (later calls return the loaded module)."""
    from torch.utils import cpp_extension

    with _EXT_LOCK:
        mod = _EXT_MODULES.get(name)
        if mod is None:
            build_dir.mkdir(parents=True, exist_ok=True)
            for fname, text in files.items():
                write_if_changed(build_dir / fname, text)
            mod = cpp_extension.load(name=name, sources=[str(build_dir / f) for f in files],
                                     extra_cuda_cflags=list(cuda_flags), extra_cflags=["-O3"],
                                     build_directory=str(build_dir), verbose=False)
            _EXT_MODULES[name] = mod
    return mod


FAILED_FILE = "build-failed.txt"  # in a build dir: why the build of exactly that content failed
BATON = "lock"  # the file torch.utils.cpp_extension holds in a build dir while it builds there


@dataclass(frozen=True)
class ExtBuild:
    """One PyTorch-extension build, everything ``load_extension`` needs (``TorchExtMethod.ext_build``):
    its directory is named by the content key, so whichever process builds it (a sandbox worker's
    prepare, or ``prebuild``) leaves what any later process loads without compiling."""

    name: str  # the Python module
    build_dir: Path
    files: dict[str, str]  # file name -> text
    cuda_flags: tuple[str, ...]
    arch_list: str  # TORCH_CUDA_ARCH_LIST the build runs under

    def library(self) -> Path:
        from torch.utils.cpp_extension import LIB_EXT

        return self.build_dir / f"{self.name}{LIB_EXT}"

    def is_built(self) -> bool:
        return self.library().is_file()

    def failure(self) -> str | None:
        """The compiler's output of an earlier build of exactly this that failed, or None."""
        p = self.build_dir / FAILED_FILE
        return p.read_text() if p.is_file() else None

    def load(self) -> Any:
        """The built module (compiled first unless built). ExtBuildError with the compiler's last
        lines when it does not build; a compile error is recorded (``failure``), so a later call,
        in this process or another, reports it without compiling again."""
        failed = self.failure()
        if failed is not None:
            raise ExtBuildError(f"{failed}\n(recorded in {self.build_dir / FAILED_FILE}: delete it to build again)")
        os.environ["TORCH_CUDA_ARCH_LIST"] = self.arch_list
        try:
            return load_extension(self.name, self.build_dir, self.files, self.cuda_flags)
        except Exception as e:
            msg = _tail(str(e))
            if str(e).startswith("Error building extension"):  # the compiler's verdict, not a crash around it
                write_if_changed(self.build_dir / FAILED_FILE, msg)
            raise ExtBuildError(msg) from e

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "build_dir": str(self.build_dir), "files": self.files,
                           "cuda_flags": list(self.cuda_flags), "arch_list": self.arch_list})

    @classmethod
    def from_json(cls, text: str) -> "ExtBuild":
        d = json.loads(text)
        return cls(d["name"], Path(d["build_dir"]), dict(d["files"]), tuple(d["cuda_flags"]), d["arch_list"])


# ---- building many at once ---------------------------------------------------------------------


@dataclass
class Prebuilt:
    """One method's build. ``ok`` False: ``reason`` holds the compiler's (or loader's) last lines."""

    method: str
    ok: bool
    cached: bool  # nothing compiled: built before, or a failure recorded before
    seconds: float
    reason: str = ""


def is_cached(method) -> bool:
    """Whether ``method`` needs no compile: built already, or its failure already recorded (False
    where the toolchain to key it is missing: its build then says why)."""
    try:
        if hasattr(method, "ext_build"):  # a PyTorch extension (kernels_search.extern.TorchExtMethod)
            b = method.ext_build()
            return b.is_built() or b.failure() is not None
        job = method.build_job()
        return (build_mod.cache_entry(job.source, job.extra_flags, job.extra_key) / build_mod.META).is_file()
    except Exception:
        return False


def build_ext(b: ExtBuild, timeout_s: float = build_mod.DEFAULT_TIMEOUT_S) -> tuple[bool, bool, str]:
    """(ok, cached, reason) of one extension build, compiled in a child process when not built yet."""
    if b.is_built():
        return True, True, ""
    failed = b.failure()
    if failed is not None:
        return False, True, failed
    root = str(Path(__file__).resolve().parents[1])  # the child imports this package from where we did
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix="hgemm-ext-") as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(b.to_json())
        rc, log, interrupted = build_mod.run_compiler([sys.executable, "-m", __name__, str(spec)], Path(tmp),
                                                      timeout_s, env=env)
    if interrupted:
        # cpp_extension's lock of the build dir outlives a killed build, and every later load of it
        # would wait on that lock for ever
        (b.build_dir / BATON).unlink(missing_ok=True)
        return False, False, _tail(log) or "build interrupted"
    if rc != 0:
        return False, False, _tail(log) or f"build process exited with {rc}"
    if not b.is_built():
        return False, False, f"the build reported success but left no {b.library()}\n{_tail(log)}"
    return True, False, ""


def _build_one(method, timeout_s: float) -> Prebuilt:
    t0 = time.perf_counter()
    if hasattr(method, "ext_build"):
        try:
            ok, cached, reason = build_ext(method.ext_build(), timeout_s)
        except Exception as e:  # no torch, no nvcc version: the spec itself could not be made
            ok, cached, reason = False, False, f"{type(e).__name__}: {e}"
    else:  # a C-ABI file: the build cache's own nvcc pipeline
        res = method.build()
        ok, cached, reason = res.ok, res.cached, "" if res.ok else _tail(res.log)
    return Prebuilt(method.name, ok, cached, time.perf_counter() - t0, reason)


def prebuild(methods: Sequence, workers: int | None = None, done: Callable[[Prebuilt], None] = lambda r: None,
             timeout_s: float = build_mod.DEFAULT_TIMEOUT_S) -> list[Prebuilt]:
    """Build ``methods`` (from ``kernels_search.extern``: C-ABI and PyTorch-extension files),
    ``workers`` at a time (default: every core this process may use; each worker only waits on its
    compiler); ``done(result)`` as each finishes, in the calling thread. Results in ``methods`` order.
    An interrupt (Ctrl-C) stops the compilers still running; what finished stays built."""
    workers = workers or build_mod.default_workers()
    results: dict[int, Prebuilt] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(methods) or 1))) as ex:
        futs = {ex.submit(_build_one, m, timeout_s): i for i, m in enumerate(methods)}
        try:
            for f in as_completed(futs):
                i = futs[f]
                results[i] = f.result()
                done(results[i])
        except BaseException:
            ex.shutdown(wait=False, cancel_futures=True)
            build_mod.kill_running()
            raise
    return [results[i] for i in range(len(methods))]


def progress_lines(total: int, report: Callable[[str], None]) -> Callable[[Prebuilt], None]:
    """A ``done`` for ``prebuild`` that reports one line per finished build: count, verdict, seconds,
    time since the first, and a failure's last line (the whole reason is the caller's to print)."""
    t0 = time.perf_counter()
    count = [0]

    def line(r: Prebuilt) -> None:
        count[0] += 1
        what = ("cached" if r.cached else "built") if r.ok else ("FAILED (recorded before)" if r.cached else "FAILED")
        last = "" if r.ok else ": " + (r.reason.strip().splitlines() or [""])[-1][:200]
        report(f"[{count[0]}/{total}] {what} {r.method} in {r.seconds:.0f}s "
               f"({time.perf_counter() - t0:.0f}s elapsed){last}")
    return line


def prebuild_specs(specs: Sequence[str], report: Callable[[str], None]) -> list[Prebuilt]:
    """``compare --kernels-dir``'s prebuild (the ``kernels-dir`` method source's hook): build the
    methods ``specs`` name on every core, one ``report`` line per finished build and one at the end.
    A failed build is a line here and the method's error row later, never an exception."""
    from harness.registry import resolve

    methods = resolve(list(specs))
    todo = [m for m in methods if not is_cached(m)]
    if not todo:
        return []
    workers = min(build_mod.default_workers(), len(todo))
    report(f"building {len(todo)} of {len(methods)} kernels-dir files with {workers} builders "
           f"({len(methods) - len(todo)} built, or recorded as failed, before)")
    t0 = time.perf_counter()
    results = prebuild(todo, workers, progress_lines(len(todo), report))
    failed = sum(1 for r in results if not r.ok)
    report(f"built {len(results) - failed} of {len(results)} in {time.perf_counter() - t0:.0f}s"
           + (f"; {failed} failed (each gets an error row with its compiler output)" if failed else ""))
    return results


def main(argv: Sequence[str]) -> int:
    """Child process: build (and import) the extension described by the JSON file ``argv[0]``."""
    b = ExtBuild.from_json(Path(argv[0]).read_text())
    try:
        b.load()
    except ExtBuildError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
