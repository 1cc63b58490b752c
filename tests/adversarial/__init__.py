"""Adversarial test kernels as a method plug-in: ``adv:<stem>`` for every ``.cu`` here.

Each kernel exposes the hgemm C ABI and cheats (or faults) in exactly one way; ``control`` is
honest. ``EXPECTED`` says which check must catch each one and with which reason, so the GPU test
and the sandbox test read the same table. Importing this module registers the factory ``adv``
with ``harness.registry``: ``plugins=["tests.adversarial"]`` makes ``adv:side_stream`` etc.
resolvable inside an evaluator worker process.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from harness.registry import register

HERE = Path(__file__).resolve().parent


class Expect(NamedTuple):
    stage: str  # "gate", an anti-cheat check name, "sandbox" (kills its process) or "none" (control)
    needle: str  # a substring of the reason that must appear; "a|b" accepts either
    shape: str  # the problem it is exposed on (M_N_K)
    # A gate reason that also counts as the right catch on that shape: fp16 accumulation already
    # fails the gate at K = 1024; the large-K probe is what must catch it at any K.
    or_gate: str = ""

    def matches(self, reason: str) -> bool:
        return any(n.lower() in (reason or "").lower() for n in self.needle.split("|"))


EXPECTED: dict[str, Expect] = {
    "control": Expect("none", "", "256_256_1024"),
    "side_stream": Expect("side_stream", "another stream", "256_256_1024"),
    "pointer_cache": Expect("gate", "cached results", "256_256_1024"),
    "skip_repeat": Expect("skipped_work", "skipped", "256_256_1024"),
    "fp16_accum": Expect("precision", "large-K probe", "256_256_1024", or_gate="wrong values"),
    "oob_write": Expect("gate", "outside C", "256_256_1024"),
    "unwritten": Expect("gate", "unwritten (NaN)", "250_250_1000"),  # M not a multiple of the 16-row tile
    "uninit_read": Expect("gate", "unwritten (NaN)", "256_256_1024"),
    "input_mutation": Expect("gate", "modified its inputs", "256_256_1024"),
    "hang": Expect("sandbox", "timeout", "256_256_1024"),
    # the worker either dies or reports the sticky CUDA error before it is restarted
    "illegal_address": Expect("sandbox", "worker died|illegal|cuda error", "256_256_1024"),
}


def kernel_paths() -> dict[str, Path]:
    return {p.stem: p for p in sorted(HERE.glob("*.cu"))}


def method(stem: str):
    """The Method for one adversarial kernel, named ``adv:<stem>`` (built on first prepare)."""
    from kernels_search.extern import load_file

    paths = kernel_paths()
    if stem not in paths:
        raise ValueError(f"no adversarial kernel {stem!r}; known: {', '.join(paths)}")
    return load_file(paths[stem], c_abi_prefix="adv", any_shape=True)  # written for any M, N, K


def _factory(args: str | None):
    if not args:
        return [method(s) for s in kernel_paths()]
    return method(args)


register("adv", _factory, default=False,
         help="adversarial test kernels (one cheat each; control is honest): " + ", ".join(kernel_paths()))
