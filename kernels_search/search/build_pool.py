"""The search's background compiles: one build per candidate spec, every core busy, which are done.

The loop submits the candidates of the shapes it will measure next and measures those already
built while the rest compile (``ready``/``wait_any``); a build that failed is a reason, which the
loop records as the candidate's one failed row instead of sending it to the GPU. ``close`` at the
search's end (or its deadline) cancels builds not started and kills the compilers still running,
so a search ends on time. It must not measure anything or decide what to build.
"""

from __future__ import annotations

import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable, Sequence

from kernels_search import build as build_mod

THREAD_NAME = "hgemm-search-build"


class BuildPool:
    """``build([spec])`` for each submitted spec, ``workers`` at a time (default: every core this
    process may run on). Each worker only waits on its compiler process (nvcc), so threads are enough
    to keep that many compilers running. ``build`` returns anything on success and raises on failure
    (the exception's text is the reason)."""

    def __init__(self, build: Callable[[Sequence[str]], object], workers: int | None = None):
        self.workers = workers or build_mod.default_workers()
        self._build = build
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=THREAD_NAME)
        self._futs: dict[str, Future] = {}

    def submit(self, specs: Iterable[str]) -> None:
        for spec in specs:
            if spec not in self._futs:
                self._futs[spec] = self._pool.submit(self._one, spec)

    def _one(self, spec: str) -> tuple[float, str]:
        t0 = time.perf_counter()
        try:
            self._build([spec])
            why = ""
        except Exception as e:  # a compile error, a timeout, a spec that no longer resolves
            why = f"{type(e).__name__}: {e}".strip() or traceback.format_exc(limit=1)
        return time.perf_counter() - t0, why

    def ready(self, spec: str) -> bool:
        """Built (or failed): nothing left to wait for. A spec never submitted is ready."""
        f = self._futs.get(spec)
        return f is None or f.done()

    def failure(self, spec: str) -> str:
        """Why the build of a ready spec failed ('' when it did not)."""
        f = self._futs.get(spec)
        return "" if f is None or not f.done() or f.cancelled() else f.result()[1]

    def seconds(self, spec: str) -> float:
        f = self._futs.get(spec)
        return f.result()[0] if f is not None and f.done() and not f.cancelled() else 0.0

    def wait_any(self, specs: Sequence[str], timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until one of ``specs`` is ready; whether one is."""
        futs = [self._futs[s] for s in specs if s in self._futs]
        if len(futs) < len(specs) or any(f.done() for f in futs):
            return True
        if timeout <= 0:
            return False
        done, _ = wait(futs, timeout=timeout, return_when=FIRST_COMPLETED)
        return bool(done)

    def pending(self) -> int:
        return sum(1 for f in self._futs.values() if not f.done())

    def close(self) -> int:
        """Cancel the builds not started and kill the running compilers; returns how many builds
        were left unfinished."""
        left = self.pending()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if left:
            build_mod.kill_running()
        return left
