"""Contrastive prompts for the LLM proposer (as CUDA-L1/L2 do it).

A prompt for one (shape, layout) shows the model

* the task statement: the hgemm C ABI (the header text itself, so the model can paste it), the
  rules a candidate must keep (fp32 accumulation, all work on the given stream, no other streams,
  no allocation or caching across calls, write all of C and nothing else) and the reply format
  (one complete ``.cu`` file in one fenced block);
* the best kernel measured for this shape and layout, then some worse ones, each with its measured
  speedup over the baseline, its gate verdict and its ptxas report (registers, spills, smem);
* the best kernels of the nearest measured shapes (distance in log2 M/N/K space);
* the last compiler error, if the previous attempt did not build.

Everything is a pure function of its inputs: the same context gives the same text byte for byte
(examples are ordered by a total key, never by dict or set order, and no clock or randomness is
read), so a prompt hash identifies a prompt and the GRPO group of completions drawn from it.
Sources longer than the per-example budget are cut in the middle with a marker; examples that no
longer fit in the prompt budget are listed with their figures but without source.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

ABI_HEADER = Path(__file__).resolve().parent.parent / "templates" / "hgemm_abi.cuh"


def abi_header_text() -> str:
    return ABI_HEADER.read_text()


@dataclass(frozen=True)
class KernelExample:
    """One measured kernel: what the prompt shows about it.

    ``speedup`` is time(baseline) / time(kernel) for its shape and layout (> 1 is faster than the
    baseline); ``None`` when it was never timed (e.g. it failed the gate). ``verdict`` is the
    correctness gate's word ("pass", "fail: ...", "compile error", ...)."""

    name: str
    m: int
    n: int
    k: int
    layout: str = "nn"
    speedup: float | None = None
    source: str = ""
    spec: str = ""  # family spec, e.g. "smalltile:bm=32,bn=32", when it came from a family
    verdict: str = "pass"
    registers: int | None = None
    spill_bytes: int | None = None
    smem_bytes: int | None = None
    note: str = ""

    @property
    def shape_name(self) -> str:
        return f"{self.m}_{self.n}_{self.k}"

    @property
    def correct(self) -> bool:
        return self.verdict == "pass"

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> "KernelExample":
        """Build from a dict (e.g. a kernel DB row); unknown keys are ignored, resources may be
        given as a ptxas ``summarize()`` dict under ``resources``."""
        res = d.get("resources") or {}
        kw = {f: d[f] for f in cls.__dataclass_fields__ if f in d and d[f] is not None}
        kw.setdefault("registers", res.get("max_registers"))
        kw.setdefault("spill_bytes", res.get("spill_bytes"))
        kw.setdefault("smem_bytes", res.get("max_smem_static"))
        for f in ("m", "n", "k"):
            kw[f] = int(kw[f])
        if kw.get("speedup") is not None:
            kw["speedup"] = float(kw["speedup"])
            if not math.isfinite(kw["speedup"]):
                kw["speedup"] = None
        return cls(**kw)


@dataclass
class PromptContext:
    """What the search knows when it asks for a kernel: measured kernels (any shapes) and the
    last compiler error for this shape (log tail), if the last attempt failed to build."""

    examples: Sequence[KernelExample] = ()
    last_compile_error: str = ""
    baseline: str = "cuBLASLt autotune (best of layouts, device time)"
    gpu: str = "NVIDIA H200 (sm_90a, 132 SMs, CUDA 13, nvcc -O3 -std=c++17 -arch=sm_90a)"


@dataclass(frozen=True)
class PromptOptions:
    n_best: int = 1  # best correct kernels for this shape/layout
    n_worse: int = 2  # worse kernels for this shape/layout (contrast)
    n_nearby: int = 2  # nearest other shapes, best correct kernel of each
    max_nearby_distance: float = 4.0  # in log2(M, N, K) space: 1.0 = one dimension 2x apart
    max_source_chars: int = 24_000  # per example; longer sources are cut in the middle
    max_prompt_chars: int = 80_000  # examples beyond this are listed without source
    max_error_chars: int = 4_000  # tail of the last compiler log


@dataclass(frozen=True)
class Prompt:
    """The prompt as chat messages (system, user) and as one flat string for raw LMs."""

    system: str
    user: str
    m: int
    n: int
    k: int
    layout: str
    examples_shown: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        return f"{self.system}\n\n{self.user}"

    @property
    def messages(self) -> list[dict]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def shape_name(self) -> str:
        return f"{self.m}_{self.n}_{self.k}"


RULES = """\
Rules (a kernel that breaks one is rejected or scored as wrong, however fast it looks):
1. Define both functions with C linkage, exactly as in the header: `extern "C" int hgemm_run(...)`
   and `extern "C" size_t hgemm_workspace(...)`. The file is compiled alone with
   `nvcc -O3 -std=c++17 -arch=sm_90a --shared -Xcompiler -fPIC`: no local includes, paste what
   you need from the header above. CUDA runtime headers and cuda_fp16.h are available; no
   cuBLAS/cuBLASLt/CUTLASS.
2. Inputs are fp16, C is fp16, and products must be ACCUMULATED IN FP32 (e.g. mma/wgmma with an
   f32 accumulator, float registers); fp16 accumulation (__hfma, half accumulators, f16 mma
   accumulators) is wrong at large K and is rejected.
3. Every piece of device work of a call is enqueued on the `stream` argument and nothing else: no
   default-stream launches, no cudaStreamCreate or other streams, no events, no host
   synchronisation (the call is captured in CUDA graphs and timed with device-wide syncs).
4. No allocation inside hgemm_run (no cudaMalloc/malloc/new): use the workspace, whose size
   hgemm_workspace returns for the same arguments; leave whatever must be zero at zero.
5. No caching across calls: every call computes C from the current A and B. Inputs, pointers and
   values change between calls; do not keep static state keyed by pointers, shapes or results.
6. Write every element of C (the harness fills C with NaN before each call) and nothing outside
   C and the workspace; never modify A or B.
7. Return HGEMM_ERR_UNSUPPORTED for a shape or alignment the kernel cannot serve, rather than
   computing a wrong result; HGEMM_OK (0) on success.
"""

FORMAT = """\
Reply with ONE complete .cu file in a single fenced code block (```cuda ... ```), with
hgemm_run and hgemm_workspace, and nothing after the block. Keep any explanation short and
before the block."""


def _layout_text(layout: str) -> str:
    if layout == "tn":
        return 'layout 1 ("tn"): B is stored N x K row-major (B^T row-major, K contiguous)'
    return 'layout 0 ("nn"): B is stored K x N row-major (N contiguous)'


def system_text() -> str:
    return (
        "You are an expert CUDA performance engineer. You write fp16 GEMM kernels for NVIDIA "
        "Hopper GPUs that are correct and faster than cuBLASLt, under a strict benchmark that "
        "checks results on fresh random inputs and times all device work."
    )


def _dist(a: KernelExample, m: int, n: int, k: int) -> float:
    return math.sqrt(
        (math.log2(a.m) - math.log2(m)) ** 2
        + (math.log2(a.n) - math.log2(n)) ** 2
        + (math.log2(a.k) - math.log2(k)) ** 2
    )


def _speed_key(e: KernelExample) -> tuple:
    """Best first: correct before not, then speedup descending, then name (a total order)."""
    s = e.speedup if (e.speedup is not None and e.correct) else float("-inf")
    return (0 if e.correct else 1, -s, e.name, e.source)


def select_examples(
    examples: Iterable[KernelExample], m: int, n: int, k: int, layout: str | Sequence[str],
    opt: PromptOptions | None = None,
) -> tuple[list[KernelExample], list[KernelExample], list[KernelExample]]:
    """(best, worse, nearby) for the shape: best and worse from this shape in the given
    layout(s), nearby are the best correct kernel of each of the closest other (shape, layout)s
    (the given layouts first)."""
    opt = opt or PromptOptions()
    lays = _layouts(layout)
    exs = list(examples)
    here = sorted((e for e in exs if (e.m, e.n, e.k) == (m, n, k) and e.layout in lays), key=_speed_key)
    seen: set[str] = set()  # one entry per kernel (its best layout): no source shown twice
    here = [e for e in here if not (e.name in seen or seen.add(e.name))]
    best = [e for e in here if e.correct and e.speedup is not None][: opt.n_best]
    rest = [e for e in here if e not in best]
    # contrast: spread the worse ones over the remaining range (the worst, then the middle ...)
    worse: list[KernelExample] = []
    if rest and opt.n_worse > 0:
        picks = sorted({round(i * (len(rest) - 1) / max(1, opt.n_worse - 1)) for i in range(opt.n_worse)}
                       if opt.n_worse > 1 else {len(rest) - 1})
        worse = [rest[i] for i in picks][: opt.n_worse]
    by_shape: dict[tuple, KernelExample] = {}
    for e in sorted((e for e in exs if (e.m, e.n, e.k) != (m, n, k) and e.correct and e.speedup is not None),
                    key=_speed_key):
        by_shape.setdefault((e.m, e.n, e.k, e.layout), e)
    nearby = sorted((e for e in by_shape.values() if _dist(e, m, n, k) <= opt.max_nearby_distance),
                    key=lambda e: (e.layout not in lays, _dist(e, m, n, k), e.m, e.n, e.k, e.layout, e.name))
    return best, worse, nearby[: opt.n_nearby]


def clip_middle(text: str, limit: int) -> str:
    """``text`` if it fits, else its head and tail around a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    marker_room = 80
    keep = max(0, limit - marker_room)
    head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3:] if keep // 3 else ""
    cut_lines = text[len(head): len(text) - len(tail)].count("\n")
    return f"{head}\n/* ... {len(text) - len(head) - len(tail)} characters ({cut_lines} lines) omitted ... */\n{tail}"


def _figures(e: KernelExample) -> str:
    parts = [f"shape M={e.m} N={e.n} K={e.k} {e.layout}"]
    parts.append(f"speedup {e.speedup:.3f}x" if e.speedup is not None else "speedup n/a")
    parts.append(f"gate {e.verdict}")
    if e.registers is not None:
        parts.append(f"ptxas {e.registers} registers")
    if e.spill_bytes is not None:
        parts.append(f"{e.spill_bytes} bytes spilled")
    if e.smem_bytes:
        parts.append(f"{e.smem_bytes} bytes static smem")
    if e.spec:
        parts.append(f"config {e.spec}")
    if e.note:
        parts.append(e.note)
    return "; ".join(parts)


def _layouts(layout: str | Sequence[str]) -> tuple[str, ...]:
    lays = (layout,) if isinstance(layout, str) else tuple(layout)
    lays = tuple(dict.fromkeys(x.strip() for l in lays for x in l.split(",") if x.strip()))
    if not lays or any(x not in ("nn", "tn") for x in lays):
        raise ValueError(f"layouts must be 'nn' and/or 'tn', got {layout!r}")
    return lays


def build_prompt(m: int, n: int, k: int, layout: str | Sequence[str] = "nn",
                 context: PromptContext | None = None, options: PromptOptions | None = None) -> Prompt:
    """The contrastive prompt for shape (m, n, k), measured in ``layout`` ("nn", "tn", or both
    as a sequence or "nn,tn")."""
    lays = _layouts(layout)
    ctx = context or PromptContext()
    opt = options or PromptOptions()
    best, worse, nearby = select_examples(ctx.examples, m, n, k, lays, opt)

    out: list[str] = []
    lay_text = "; ".join(_layout_text(x) for x in lays)
    both = (" It is measured in each of these layouts and scored on each: hgemm_run must serve "
            "the `layout` argument for all of them.") if len(lays) > 1 else ""
    out.append(
        f"Task: write a CUDA kernel library computing C = A @ B for M={m}, N={n}, K={k}, "
        f"{lay_text}. A is M x K row-major, C is M x N row-major, all fp16.{both}\n"
        f"Target: {ctx.gpu}.\n"
        f"Score: speedup over {ctx.baseline}, measured on fresh random inputs after a correctness "
        "check against an fp32-accumulated reference; a wrong result, a crash, a timeout or a "
        "compile error scores -1.\n"
    )
    out.append("The C ABI (kernels_search/templates/hgemm_abi.cuh):\n```cuda\n" + abi_header_text().rstrip()
               + "\n```\n")
    out.append(RULES)

    shown: list[str] = []
    used = sum(len(s) for s in out)

    def section(title: str, exs: list[KernelExample], lead: str) -> None:
        nonlocal used
        if not exs:
            return
        out.append(f"## {title}\n{lead}\n")
        for i, e in enumerate(exs, 1):
            head = f"### {title.split()[0]} {i}: {e.name}\n{_figures(e)}\n"
            src = clip_middle(e.source, opt.max_source_chars) if e.source else ""
            if src and used + len(head) + len(src) <= opt.max_prompt_chars:
                block = head + "```cuda\n" + src.rstrip() + "\n```\n"
            else:
                block = head + ("(source omitted: prompt budget)\n" if src else "(no source recorded)\n")
            out.append(block)
            used += len(block)
            shown.append(e.name)

    section("Best kernel for this shape", best,
            "The fastest correct kernel measured so far for this shape and layout. Beat it.")
    section("Worse kernels for this shape", worse,
            "Slower or failed kernels for the same shape and layout: learn what not to do.")
    section("Nearby shapes", nearby,
            "The best correct kernel of the closest measured shapes (speedups are for their shapes).")
    if not (best or worse or nearby):
        out.append("No kernel has been measured near this shape yet: write a good first one.\n")
    if ctx.last_compile_error.strip():
        err = ctx.last_compile_error.strip()
        if len(err) > opt.max_error_chars:
            err = "...\n" + err[-opt.max_error_chars:]
        out.append("## Last compiler error\nYour previous attempt for this shape did not build:\n```\n"
                   + err + "\n```\n")
    out.append(FORMAT)
    return Prompt(system=system_text(), user="\n".join(out), m=m, n=n, k=k, layout=",".join(lays),
                  examples_shown=tuple(shown))
