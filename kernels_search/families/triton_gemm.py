"""``triton``: a plain tiled Triton GEMM (grouped raster, masked edges, optional split-K),
or its persistent variant (one program per SM looping over tiles), pointer-based or, with
``tma=1``, through TMA descriptors for A, B and C (one flattened tile x k loop, so the next tile's
loads overlap this tile's store; meant for small-K shapes that are bound by writing C).

Fast to compile (about 0.3 s a config on the H200 host), so the search can sweep it widely.
Any M, N, K is served (masked loads and stores). With ``split_k > 1`` the call zeroes an fp32
workspace, accumulates into it with atomics and casts it into C: three steps, all on the
current stream, all inside the timed call. Triton is imported only when a config is prepared;
where it is not installed, ``supports()`` says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import Family, Knob, SMEM_LIMIT

KERNEL_FILE = Path(__file__).resolve().parent.parent / "triton_kernels.py"


# The pointer kernels (tma=0) hold an address for every A and B element of a k-tile beside the fp32
# accumulators; past this many of them a thread, ptxas spills on sm_90 (Triton 3.6: 128 x 128 x 64 at
# 4 warps, 256 a thread, uses a 608-byte stack; at 8 warps, 128, none; the configs of that kind the
# packaged searches measured were their slowest). tests/test_kernels_build.py checks the rule against ptxas.
POINTER_KERNEL_REGISTERS = 128


def pointer_kernel_registers(block_m: int, block_n: int, block_k: int, num_warps: int) -> int:
    """A and B elements of one k-tile plus accumulators, per thread, of the pointer kernels."""
    return ((block_m + block_n) * block_k + block_m * block_n) // (num_warps * 32)


def triton_available() -> Support:
    try:
        import triton  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return unsupported(f"triton not installed ({type(e).__name__}: {e})")
    return SUPPORTED


class TritonGemm(Family):
    def check(self, k: Mapping) -> str:
        if k["persistent"] and k["split_k"] != 1:
            return "the persistent kernel does not split K"
        if k["tma"] and not k["persistent"]:
            return "tma=1 is a persistent kernel: set persistent=1"
        if k["epi_split"] != 1 and not k["tma"]:
            return "epi_split applies to the TMA kernel's store only (tma=1)"
        smem = k["num_stages"] * (k["block_m"] + k["block_n"]) * k["block_k"] * 2
        if k["tma"]:  # plus the epilogue's staging buffer for one store slice
            smem += k["block_m"] * k["block_n"] // k["epi_split"] * 2
        if smem > SMEM_LIMIT:
            return f"{k['num_stages']} stages need {smem} bytes of shared memory > {SMEM_LIMIT}"
        if k["per_sm"] > 1 and not k["persistent"]:
            return "per_sm applies to the persistent kernels (persistent=1)"
        if smem * k["per_sm"] > SMEM_LIMIT:
            return f"{k['per_sm']} programs an SM need {smem * k['per_sm']} bytes of shared memory > {SMEM_LIMIT}"
        threads = k["num_warps"] * 32
        acc = k["block_m"] * k["block_n"] // threads
        if acc > 256:
            return f"{acc} fp32 accumulators per thread (> 256): more warps or a smaller tile"
        if not k["tma"]:
            held = pointer_kernel_registers(k["block_m"], k["block_n"], k["block_k"], k["num_warps"])
            if held > POINTER_KERNEL_REGISTERS:
                return (f"the pointer kernel holds {held} A and B elements and accumulators a thread "
                        f"(> {POINTER_KERNEL_REGISTERS}): it spills on sm_90; more warps, a smaller tile or tma=1")
        return ""

    def render(self, k: Mapping) -> str:
        """The kernel module's text (knobs are constexpr launch arguments, not source edits)."""
        return KERNEL_FILE.read_text()

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if k["tma"] and (problem.k % 8 or problem.n % 8):
            return unsupported(f"tma=1 needs K and N multiples of 8 (16-byte TMA row strides), "
                               f"not K={problem.k}, N={problem.n}")
        return triton_available()


FAMILY = TritonGemm(
    name="triton",
    backend="triton",
    # Tiny shapes: 16x64x64 with 4 warps, found by a search (1.20-1.27x on 256_128_64, 128_512_64,
    # 1024_128_64; H200). 16x32 with block_k 128 and 5 stages, twice the programs, on the tiniest at K
    # 256-512 (at most 65,536 outputs): 64_64_256 2.19 us against the best baseline's 2.46, 64_64_512
    # 2.66 against 2.86, 1.05-1.12x (H100, run 7220a8e4c6ea).
    # The TMA kernel, from sweeps on searched shapes (H200):
    # 128x128 with 2 programs an SM: 2048_8192_64 1.18x, 8192_1024_128 1.02x;
    # 64x128 with 3 an SM: 512_12288_64 1.06x, 256_12288_128 1.01x;
    # 64x64 with 4 an SM: 512_2048_64 1.08x, 1024_512_128 1.07x, 1024_4096_64 1.04x;
    # 64x256 with 2 an SM: 12288_16384_64 1.06x;
    # 128x64 with 6 stages (skinny, memory-bound shapes): 16384_64_12288 1.00x, 8192_64_8192 0.99x.
    # The earlier presets (16x128x64, a 64x32 persistent tile, 64x64x64) were never the best
    # config on any of a 40-shape H200 search's shapes.
    presets=("block_m=16:block_n=64:block_k=64:group_m=1:num_warps=4:num_stages=4",
             "block_m=16:block_n=32:block_k=128:group_m=1:num_warps=4:num_stages=5",
             "block_m=128:block_n=128:block_k=64:num_warps=4:num_stages=3:persistent=1:per_sm=2:tma=1:epi_split=2",
             "block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=2:persistent=1:per_sm=3:tma=1:epi_split=2",
             "block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=2:persistent=1:per_sm=4:tma=1:epi_split=2",
             "block_m=64:block_n=256:block_k=64:num_warps=4:num_stages=2:persistent=1:per_sm=2:tma=1:epi_split=2",
             "block_m=128:block_n=64:block_k=64:num_warps=4:num_stages=6:persistent=1:tma=1"),
    knobs=(
        Knob("block_m", (128, 16, 32, 64, 256), 128),
        Knob("block_n", (128, 16, 32, 64, 256), 128),
        Knob("block_k", (64, 16, 32, 128), 64),
        Knob("group_m", (8, 1, 4, 16), 8, help="tiles of M per raster group (L2 reuse)"),
        Knob("num_warps", (4, 2, 8), 8, help="8 by default: the default 128 x 128 pointer tile spills at 4"),
        Knob("num_stages", (3, 2, 4, 5, 6), 3),
        Knob("split_k", (1, 2, 4, 8, 16, 32), 1, help="K split; > 1 accumulates with fp32 atomics"),
        Knob("persistent", (0, 1), 0, help="1: one program per SM looping over tiles"),
        Knob("per_sm", (1, 2, 3, 4), 1, help="persistent=1: programs launched per SM (2: one's loads "
                                        "and stores overlap the other's math)"),
        Knob("tma", (0, 1), 0, help="1: the persistent kernel loads and stores through TMA descriptors"),
        Knob("epi_split", (1, 2), 1, help="tma=1: store each tile as this many column slices"),
    ),
)
