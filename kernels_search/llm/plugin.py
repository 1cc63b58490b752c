"""Evaluator plug-in: importing this module makes ``llm:<hash12>`` specs resolvable.

``Evaluator(device, env={"HGEMM_LLM_KERNELS": dir, ...}, plugins=["kernels_search.llm.plugin"])``:
the worker (and the parent, which resolves names and trust without running anything) import it;
the factory builds the stored source through the same cached nvcc pipeline as any C-ABI kernel
(``raw_source.source_method``). LLM kernels are never baselines (untrusted: sandboxed, gated,
anti-cheat checked).
"""

from __future__ import annotations

from harness.registry import register
from kernels_search.llm.kernels import PREFIX, KernelStore


def method(spec_or_stem: str, store: KernelStore | None = None):
    from kernels_search.raw_source import source_method

    store = store or KernelStore()
    stem = spec_or_stem.split(":", 1)[1] if ":" in spec_or_stem else spec_or_stem
    try:
        text = store.get(stem)
    except KeyError as e:
        raise ValueError(str(e)) from None
    return source_method(text, f"{PREFIX}:{stem}")


def _factory(args: str | None):
    store = KernelStore()
    if not args:
        return [method(s, store) for s in store.stems()]
    return method(args, store)


register(PREFIX, _factory, default=False,
         help="LLM-written C-ABI kernels stored in $HGEMM_LLM_KERNELS (llm:<source hash prefix>)")
