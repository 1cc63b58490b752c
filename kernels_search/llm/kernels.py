"""Where LLM-written kernels live so that an evaluator worker (another process) can load them.

Each accepted source is written once, content-addressed, to ``<dir>/<hash12>.cu`` (temporary
name, then an atomic rename). Its method spec is ``llm:<hash12>``; importing
``kernels_search.llm.plugin`` in the worker (``Evaluator(plugins=["kernels_search.llm.plugin"])``)
makes such specs resolvable through ``harness.registry``. The directory comes from
``$HGEMM_LLM_KERNELS`` (set it in the evaluator's ``env`` too), default
``~/.cache/hgemm-bench/llm-kernels``.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path

ENV = "HGEMM_LLM_KERNELS"
PREFIX = "llm"
STEM_LEN = 12
_STEM_RE = re.compile(r"^[0-9a-f]{%d}$" % STEM_LEN)


def kernels_dir(path: str | os.PathLike | None = None) -> Path:
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV)
    return Path(env) if env else Path.home() / ".cache" / "hgemm-bench" / "llm-kernels"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def spec_for(source: str) -> str:
    return f"{PREFIX}:{source_hash(source)[:STEM_LEN]}"


class KernelStore:
    def __init__(self, path: str | os.PathLike | None = None):
        self.root = kernels_dir(path)

    def path(self, stem: str) -> Path:
        if not _STEM_RE.match(stem):
            raise ValueError(f"not an LLM kernel id: {stem!r} (want {STEM_LEN} hex digits)")
        return self.root / f"{stem}.cu"

    def put(self, source: str) -> str:
        """Store ``source``; returns its spec ``llm:<hash12>``. Idempotent."""
        spec = spec_for(source)
        final = self.path(spec.split(":", 1)[1])
        if not final.is_file():
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
            tmp.write_text(source)
            os.replace(tmp, final)
        return spec

    def get(self, spec_or_stem: str) -> str:
        stem = spec_or_stem.split(":", 1)[1] if ":" in spec_or_stem else spec_or_stem
        p = self.path(stem)
        if not p.is_file():
            raise KeyError(f"no LLM kernel {stem} in {self.root}")
        return p.read_text()

    def stems(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.cu") if _STEM_RE.match(p.stem))
