"""Any CUDA source that already exposes the hgemm C ABI, as a Method (no knobs).

For kernels written outside the families (a ``--kernels-dir`` of ``.cu`` files, the
adversarial test kernels): the source goes through the same build cache, ptxas metadata and
ctypes loader as a family config. The method name is ``cu:<stem>``; its source hash names the
exact code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from kernels_search.cuda_method import CudaKernelMethod
from kernels_search.family import Family


class RawSource(Family):
    """A one-point family whose 'render' is the given text."""

    def __init__(self, name: str, text: str, flags: tuple[str, ...] = ()):
        super().__init__(name=name, knobs=())
        self._text = text
        self._flags = tuple(flags)

    def render(self, k: Mapping) -> str:
        return self._text

    def extra_flags(self, k: Mapping) -> tuple[str, ...]:
        return self._flags

    def spec(self, knobs: Mapping) -> str:
        return self.name


def source_method(text: str, name: str, flags: tuple[str, ...] = ()) -> CudaKernelMethod:
    """A Method for CUDA source ``text`` exposing ``hgemm_run``/``hgemm_workspace``."""
    return CudaKernelMethod(RawSource(name, text, flags), {})


def file_method(path: str | Path, flags: tuple[str, ...] = ()) -> CudaKernelMethod:
    p = Path(path)
    return source_method(p.read_text(), f"cu:{p.stem}", flags)
