"""Parse ``ptxas -v`` output into per-kernel resource figures (registers, spills, smem, stack)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass
class KernelResources:
    name: str
    arch: str = ""
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    smem_bytes: int = 0  # static shared memory; dynamic smem is decided at launch


def parse_ptxas(log: str) -> list[KernelResources]:
    """Every entry function ptxas reported, in order. Device functions' frames are ignored."""
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    props_for: str | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = kernels.setdefault(m.group(1), KernelResources(m.group(1), m.group(2)))
            props_for = None
            continue
        m = _PROPS.search(line)
        if m:
            props_for = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and props_for is not None:
            k = kernels.get(props_for)
            if k is not None:
                k.stack_bytes, k.spill_stores, k.spill_loads = (int(g) for g in m.groups())
            props_for = None
            continue
        m = _USED.search(line)
        if m and current is not None:
            current.registers = int(m.group(1))
            s = _SMEM.search(line)
            if s:
                current.smem_bytes = int(s.group(1))
    return list(kernels.values())


def summarize(kernels: list[KernelResources]) -> dict:
    """Worst case over kernels: what a result row records."""
    return {
        "max_registers": max((k.registers for k in kernels), default=0),
        "spill_bytes": sum(k.spill_stores + k.spill_loads for k in kernels),
        "max_smem_static": max((k.smem_bytes for k in kernels), default=0),
        "max_stack_bytes": max((k.stack_bytes for k in kernels), default=0),
        "n_kernels": len(kernels),
    }


def as_dicts(kernels: list[KernelResources]) -> list[dict]:
    return [asdict(k) for k in kernels]
