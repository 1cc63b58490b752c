"""The ``hgemm-bench build`` command, ready to mount: ``register(app)`` adds it to a Typer app.

It compiles the pool (``search.pool``: every CUDA family preset and every packaged library kernel,
one build per binary) into the build cache that ``search``, ``tune`` and ``compare`` read
(``build.cache_dir``), on every core by default. Binaries already cached are skipped, so a rerun
resumes. A terminal gets a progress bar; a pipe gets one line per finished binary. Exit code 1 when a
binary failed to compile (its log's tail is printed), 2 for bad input. Nothing heavy is imported
before the command runs.

``--kernels-dir DIR`` builds every kernel file of DIR instead (``kernels_search.extern_build``: C-ABI
files into the build cache, PyTorch extensions into theirs), where ``compare --kernels-dir DIR`` then
only loads them; a failed build is recorded, and compare reports it as that kernel's error row.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape


def build(
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="Compilers at a time (default: every core this process may use)."),
    families: str = typer.Option("", help="Comma list of CUDA families to build (default: all)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compile nothing: list the pool's binaries, which are "
                                                          "cached, and where the cache is."),
    kernels_dir: List[Path] = typer.Option([], "--kernels-dir", help="Build every .cu kernel of this directory "
                                           "(as compare --kernels-dir loads them) instead of the pool; repeatable."),
):
    """Compile the kernel pool once into the per-user build cache (resumable)."""
    from harness.console import console, echo, err_console, fail
    from kernels_search import build as build_mod
    from kernels_search import toolchain
    from kernels_search.search import pool
    from kernels_search.search.settings import PoolSettings

    if kernels_dir:
        if families:
            fail("--families narrows the pool; --kernels-dir builds a directory instead: give one of them")
        _build_dirs(kernels_dir, jobs or build_mod.default_workers(), dry_run)
        return
    try:
        settings = PoolSettings(families=tuple(f.strip() for f in families.split(",") if f.strip()) or None)
        binaries = pool.binaries(pool.specs(settings))
    except ValueError as e:
        fail(str(e))
    workers = jobs or build_mod.default_workers()
    cached = [b for b in binaries if pool.is_built(b)]
    todo = [b for b in binaries if b not in cached]
    echo(f"pool: {len(binaries)} binaries ({sum(len(b.specs) for b in binaries)} configs); {len(cached)} cached in "
         f"{build_mod.cache_dir()}, {len(todo)} to build with {min(workers, max(1, len(todo)))} compilers")
    if dry_run:
        for b in binaries:
            more = f" (+{len(b.specs) - 1} configs sharing it)" if len(b.specs) > 1 else ""
            echo(f"  {'cached' if b in cached else 'build '}  {b.spec}{more}")
        return
    if not todo:
        return
    if not toolchain.find_nvcc():
        fail("nvcc not found (set HGEMM_NVCC or CUDA_HOME)")
    import signal

    def stop(signum, frame):  # a kill stops the compilers too (pool.build's interrupt path)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, stop)
    failed: list[tuple] = []
    t0 = time.perf_counter()
    count = {"n": 0}

    def line(b, res) -> str:
        count["n"] += 1
        what = "built" if res.ok else "FAILED"
        return (f"[{count['n']}/{len(todo)}] {what} {b.spec} in {res.compile_s:.0f}s "
                f"({time.perf_counter() - t0:.0f}s elapsed)")

    try:
        results = _run(todo, workers, console, echo, line, failed)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted:[/] binaries built so far are cached; rerun to resume")
        raise typer.Exit(130)
    finally:
        signal.signal(signal.SIGTERM, before)
    wall = time.perf_counter() - t0
    ok = sum(1 for r in results if r.ok)
    echo(f"built {ok} of {len(todo)} binaries in {wall:.0f}s with {min(workers, len(todo))} compilers "
         f"(nvcc time {sum(r.compile_s for r in results):.0f}s); {len(cached)} were cached")
    for b, res in failed:
        tail = "\n".join(res.log.strip().splitlines()[-10:])
        err_console.print(f"[bold red]failed:[/] {escape(b.spec)}\n{escape(tail)}", markup=True, highlight=False)
    if failed:
        raise typer.Exit(1)


def _build_dirs(dirs: list[Path], workers: int, dry_run: bool) -> None:
    """``build --kernels-dir``: every kernel file of ``dirs``, ``workers`` builds at a time, one line
    per finished build; exit code 1 when one failed (its reason printed), 2 for an unusable file."""
    from harness.console import echo, err_console, fail
    from kernels_search import build as build_mod
    from kernels_search import extern, toolchain
    from kernels_search.extern_build import is_cached, prebuild, progress_lines

    methods = []
    for d in dirs:
        try:
            methods += extern.load_kernels_dir(d)
        except extern.ExternError as e:
            fail(str(e))
    cached = {m.name for m in methods if is_cached(m)}
    n = min(workers, max(1, len(methods) - len(cached)))
    echo(f"kernels dir{'s' if len(dirs) > 1 else ''}: {len(methods)} files; {len(cached)} built (or recorded as "
         f"failed) before under {build_mod.cache_dir()}, {len(methods) - len(cached)} to build with {n} builders")
    if dry_run:
        for m in methods:
            echo(f"  {'cached' if m.name in cached else 'build '}  {m.name}  ({getattr(m, 'path', '')})")
        return
    if len(cached) < len(methods) and not toolchain.find_nvcc():
        fail("nvcc not found (set HGEMM_NVCC or CUDA_HOME)")
    import signal

    def stop(signum, frame):  # a kill stops the compilers too (prebuild's interrupt path)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, stop)
    t0 = time.perf_counter()
    try:  # every file, the cached ones too: a failure recorded before is reported (and exits 1) again
        results = prebuild(methods, n, progress_lines(len(methods), echo))
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted:[/] kernels built so far are kept; rerun to resume")
        raise typer.Exit(130)
    finally:
        signal.signal(signal.SIGTERM, before)
    failed = [r for r in results if not r.ok]
    built = sum(1 for r in results if r.ok and not r.cached)
    echo(f"built {built} of {len(methods) - len(cached)} kernels in {time.perf_counter() - t0:.0f}s with {n} "
         f"builders; {len(cached)} were built before; {len(failed)} failed")
    for r in failed:
        tail = "\n".join(r.reason.strip().splitlines()[-10:])
        err_console.print(f"[bold red]failed:[/] {escape(r.method)}\n{escape(tail)}", markup=True, highlight=False)
    if failed:
        raise typer.Exit(1)


def _run(todo, workers, console, echo, line, failed):
    """Build ``todo`` with a bar on a terminal, one plain line per binary elsewhere."""
    from kernels_search.search import pool

    if console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("building the pool"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as bar:
            task = bar.add_task("build", total=len(todo))

            def done(b, res):
                bar.console.print(line(b, res), markup=False, highlight=False)
                bar.advance(task)
                if not res.ok:
                    failed.append((b, res))
            results = pool.build(todo, workers, done)
    else:
        def done(b, res):
            echo(line(b, res))
            if not res.ok:
                failed.append((b, res))
        results = pool.build(todo, workers, done)
    return results


def register(app: typer.Typer) -> None:
    """Mount ``build`` on the ``hgemm-bench`` app."""
    app.command("build")(build)
