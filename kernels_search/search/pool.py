"""The pool: the kernel configs the search and the library draw from, and the binaries they need.

``specs(settings)`` lists the pool's configs (``PoolSettings``: every preset of every CUDA family and
every kernel spec of the packaged library, canonical specs, each once); ``binaries(specs)`` groups the
CUDA ones by the binary they build to (``CudaKernelMethod.build_job``: configs that differ only in
runtime options share one); ``build(binaries)`` compiles them on every core into the build cache
(``build.cache_dir``), where ``search``, ``tune`` and ``compare`` find them. A binary already there is a
cache hit, so an interrupted build resumes. It must not measure anything.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from kernels_search import build as build_mod
from kernels_search.family import Family, KnobError
from kernels_search.search.settings import PoolSettings


@dataclass(frozen=True)
class Binary:
    """One binary of the pool: what building it takes and the pool's specs it serves (first: the
    one it is built and named by)."""

    job: build_mod.BuildJob
    specs: tuple[str, ...]

    @property
    def spec(self) -> str:
        return self.specs[0]

    @property
    def family(self) -> str:
        return self.spec.partition(":")[0]


def cuda_families(names: Sequence[str] | None = None) -> dict[str, Family]:
    """The built-in families that compile with nvcc (``names``: only those; an unknown or non-CUDA
    name raises ValueError)."""
    from kernels_search.families import ALL

    cuda = {n: f for n, f in ALL.items() if f.backend == "cuda"}
    if names is None:
        return cuda
    bad = [n for n in names if n not in cuda]
    if bad:
        raise ValueError(f"not a CUDA family: {', '.join(bad)}; CUDA families: {', '.join(cuda)}")
    return {n: cuda[n] for n in names}


def library_specs(path: Path | None = None) -> list[str]:
    """The kernel specs of a library file (default: the packaged one), in file order, each once."""
    from kernels_search.search.library import DEFAULT_PATH

    doc = json.loads(Path(path or DEFAULT_PATH).read_text())
    return list(dict.fromkeys(e["spec"] for e in doc.get("entries", []) if e.get("kind") == "kernel"))


def canonical(spec: str, families: Mapping[str, Family]) -> str | None:
    """``spec`` with every knob named (the family's defaults filled in), or None where its family is
    not in ``families`` or the knobs are no longer valid."""
    fam_name, _, body = spec.partition(":")
    fam = families.get(fam_name)
    if fam is None:
        return None
    try:
        return fam.spec(fam.parse(body))
    except KnobError:
        return None


def specs(settings: PoolSettings = PoolSettings(), families: Mapping[str, Family] | None = None,
          library: Path | None = None) -> list[str]:
    """The pool's configs as canonical specs, each once: the presets of ``families`` (default: the
    CUDA families ``settings.families`` names, all of them by default), then the kernels of
    ``library`` (default: the packaged library) of those families."""
    fams = dict(families) if families is not None else cuda_families(settings.families)
    if families is not None and settings.families is not None:
        fams = {n: f for n, f in fams.items() if n in settings.families}
    out: list[str] = []
    if settings.presets:
        for fam in fams.values():
            out += [fam.spec(k) for k in fam.preset_configs()]
    if settings.library:
        out += [c for c in (canonical(s, fams) for s in library_specs(library)) if c]
    return list(dict.fromkeys(out))


def binaries(pool_specs: Sequence[str]) -> list[Binary]:
    """The binaries the CUDA specs among ``pool_specs`` build to, in first-use order; specs of other
    backends (Triton compiles in process) have none."""
    from kernels_search.cuda_method import CudaKernelMethod
    from kernels_search.families import ALL

    groups: dict[tuple, tuple[build_mod.BuildJob, list[str]]] = {}
    for spec in pool_specs:
        fam = ALL.get(spec.partition(":")[0])
        if fam is None or fam.backend != "cuda":
            continue
        job = CudaKernelMethod(fam, fam.parse(spec.partition(":")[2])).build_job()
        groups.setdefault((job.source, job.extra_flags, job.extra_key), (job, []))[1].append(spec)
    return [Binary(job, tuple(sp)) for job, sp in groups.values()]


def is_built(binary: Binary) -> bool:
    """Whether the build cache holds this binary (False where no compiler is found to key it)."""
    try:
        entry = build_mod.cache_entry(binary.job.source, binary.job.extra_flags, binary.job.extra_key)
    except Exception:
        return False
    return (entry / build_mod.LIB).is_file()


def build(pool: Sequence[Binary], workers: int | None = None,
          done: Callable[[Binary, build_mod.BuildResult], None] = lambda b, r: None) -> list[build_mod.BuildResult]:
    """Compile ``pool`` into the build cache, ``workers`` compilers at a time (default: every core
    this process may use); ``done(binary, result)`` as each finishes (in the calling thread).
    Results in ``pool`` order; a failed build is a result, never an exception."""
    workers = workers or build_mod.default_workers()
    results: dict[int, build_mod.BuildResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pool) or 1))) as ex:
        futs = {ex.submit(build_mod.build, b.job.source, b.job.extra_flags, extra_key=b.job.extra_key): i
                for i, b in enumerate(pool)}
        try:
            for f in as_completed(futs):
                i = futs[f]
                results[i] = f.result()
                done(pool[i], results[i])
        except BaseException:  # Ctrl-C: what finished is cached; stop the compilers still running
            ex.shutdown(wait=False, cancel_futures=True)
            build_mod.kill_running()
            raise
    return [results[i] for i in range(len(pool))]
