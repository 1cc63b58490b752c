"""``hopper``: TMA + WGMMA warp-specialized persistent GEMM from CUTLASS 3 sm90 collectives.

Compile-time knobs: tile M/N/K, cluster shape, schedule
(cooperative: two consumer warpgroups share one tile; pingpong: they alternate tiles; single: not
persistent, one CTA per tile with one consumer warpgroup), pipeline stages (0 = as many as fit), tile
scheduler (persistent data-parallel; stream-K for few-tile shapes; or parallel split-K: K cut into
equal slices that run as the batches of one persistent batched GEMM writing fp32 slices, summed and
cast by a second kernel launched as a programmatic dependent launch). Runtime options (one
binary serves them all): raster order, max swizzle, SMs used by the persistent grid and, with
stream-K, split factor, decomposition and reduction mode; with split-K, the slice count. Both B
layouts are instantiated in one library. TMA needs every row stride
16-byte aligned, so K and N must be multiples of 8; other shapes are declined (the library's
dispatcher falls back to the mma.sync families, which serve any shape).
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search import toolchain
from kernels_search.family import DEFAULT_SMS, Family, Knob, SMEM_LIMIT, render_defines, template

# Per-stage barrier/bookkeeping and the TMA epilogue's staging buffer are approximated; the
# builder's own static_asserts are the final word (a violation is a failed build, a result).
EPILOGUE_SMEM = 32 * 1024


def _stage_bytes(k: Mapping) -> int:
    return (k["tile_m"] + k["tile_n"]) * k["tile_k"] * 2


# The TMA-store epilogue writes each output tile in sub-tiles through shared memory, two in flight.
# CUTLASS's automatic sub-tile is 64 x 32 (128 x 32 under the cooperative schedule, whose two
# warpgroups share the tile's rows), so a 128x192 tile takes 12 store rounds. ``epi_n`` widens the
# sub-tile (fewer, larger TMA stores and barrier waits per tile) for shapes whose time is mostly the
# epilogue: short K with a large output, where the best config measured 0.89-0.94x of cuBLAS.
# Measured on an H200 (113 shapes with K <= 512): +4.5 % to +6.3 % with a wider sub-tile, more on
# larger outputs; with K of 1024-4096 nothing for the pingpong tiles. The first pick learns where.
EPI_AUTO = "cutlass::epilogue::collective::EpilogueTileAuto, float, float,"


def epilogue_tile(k: Mapping) -> tuple[int, int] | None:
    """The epilogue sub-tile (M, N) that ``epi_n`` asks for, M as CUTLASS's automatic choice has it;
    None for the automatic sub-tile (``epi_n`` = 0)."""
    n = int(k.get("epi_n", 0))
    if not n:
        return None
    return min(128 if k["schedule"] == "cooperative" else 64, k["tile_m"]), n


# Tile N sizes off the powers of two. Why: on 280 off-grid shapes (sides 3, 5 or 7 x 2^k; H200)
# cuBLASLt autotune's winning nvjet kernels had tiles such as 128x160,
# 176x128, 144x128, 112x128, 224x64 and 96x64 (cuBLAS's m x n: our N x M), chosen so that the tile
# count fills whole waves of the 132 SMs or a side of 3, 5 or 7 x 2^k splits into whole tiles;
# where they won, the best config measured here was 0.82-0.96x. WGMMA's N is any multiple of 8,
# TMA's box any multiple of 8 elements; with B N-major ("nn") a tile N that is not a multiple of
# 64 takes a narrower shared-memory swizzle (CUTLASS's ss_smem_selector: 32 -> 64 B, 16 -> 32 B).
# CUTLASS's automatic epilogue sub-tile is gcd(32, tile N) wide, so every size here divides evenly.
# Measured on an H200: the best of these tiles over the best power-of-two config on the shape, 1.080x
# on 48 off-grid shapes (160_1536_7168 0.695x -> 1.079x with 128x80 split-K on the transposed
# problem), but 0.927x on 60 random ones: they win where a power-of-two tile leaves a wave or a tile
# partly empty.
ODD_TILE_N = (80, 96, 112, 144, 160, 176, 224)

# TMA's L2 promotion (``l2_promo``): the request size an L2 miss of a TMA load is promoted to.
# CUTLASS's descriptors ask for 128 B (cute's make_tma_copy_desc), which with a 64-element K tile is
# exactly one row of a box, so every row of every k-tile is its own DRAM request; 256 B also brings
# the row's next k-tile (DeepGEMM's descriptors ask for 256 B). Why: on the long narrow shapes
# (M >= 2048 with N <= 256, or the transpose) cuBLAS streams the
# large operand at 4.0-4.3 TB/s (12288_64_12288 in 71.5 us, 12288_128_16384 in 102.8 us) where the
# best config measured here, with cuBLAS's own tile and cluster, reached 0.86-0.93x of that: the
# same bytes, less bandwidth. 0 keeps CUTLASS's descriptors (and the source and build-cache entry);
# 256 substitutes hopper_l2_promo.cuh (L2_PROMO_VALUES names the driver's enum).
L2_PROMO_VALUES = {256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}
L2_PROMO_ANCHOR = '#include "cutlass/cutlass.h"\n'


def l2_promo_source(body: str, promo: int) -> str:
    """The template with the TMA-descriptor L2 promotion of ``promo`` bytes (``l2_promo``) spliced
    in before CUTLASS's first header; the body unchanged for 0."""
    if not promo:
        return body
    assert body.count(L2_PROMO_ANCHOR) == 1, "hopper_cutlass.cu changed its first CUTLASS include"
    block = f"#define HG_L2_PROMOTION {L2_PROMO_VALUES[promo]}\n" + template("hopper_l2_promo.cuh")
    return body.replace(L2_PROMO_ANCHOR, block + L2_PROMO_ANCHOR)


# Tile N sizes below 64. Why: on the cuda-l2 grid's shapes with N of 64-256 and a long M (or the
# transposed case), where the best config measured here was 0.82-0.92x of cuBLASLt autotune
# (4096_64_4096, 4096_128_4096, 2048_64_2048, 512_256_2048; H200), the nvjet kernels autotune
# chose had tiles 32x64 and 16x64 (cuBLAS's
# m x n: our tile N of 32 or 16) in a cluster of two along N: twice or four times the CTAs of a
# 64-wide tile on a narrow output, the pair sharing each A tile by TMA multicast, so the SMs that
# stream the large operand are not half idle. Standard WGMMA widths: no extended-shapes define.
# Measured on an H200, on the 40 narrow grid shapes where the best config lost most: 64x32 / 64x16
# in a 1x2 cluster beat it only where N = 64 (4096_64_4096 0.984x -> 1.049x) and lost with N of
# 128-256 (4096_128_4096 0.829x -> 0.741x). The first pick learns where from those rows.
NARROW_TILE_N = (32, 16)


# The WGMMA N sizes CUTE selects without CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (cute/arch/mma_sm90.hpp,
# ss_op_selector: the largest of these dividing the tile N). Any other tile N would be computed in
# narrow atoms (160 as five 64x32x16 instructions, each re-reading the A tile from shared memory).
STANDARD_MMA_N = (256, 192, 128, 96, 64, 32, 16, 8)


def extended_mma_flag(k: Mapping) -> tuple[str, ...]:
    """The define that lets CUTE pick one WGMMA atom as wide as an odd tile N (ODD_TILE_N); empty
    for the standard sizes, so their builds keep the flags (and build-cache keys) they had."""
    return () if k["tile_n"] in STANDARD_MMA_N else ("-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED",)


# swap_ab: the template's kernel computes the transposed problem C^T = B^T A^T. C^T, N x M in
# column-major order, is the same memory as C, M x N row-major; operand A is B (N x K: column-major
# for "nn", row-major for "tn") and operand B is A (K x M column-major: the same memory as A, M x K
# row-major). A shape with few rows of tiles along N (N <= 128) becomes one with few along M, where
# the split-K configs win on the H200 (64_2048_8192 at 1.11x, while 1024_64_12288 is at 0.65x).
# Substituted, not switched by a define, so that every other
# config renders the source it had before (and keeps its build-cache entry). TMA's alignment needs
# stay K and N multiples of 8, as before.
SWAP_AB = (
    ("using LayoutB = HG_LAYOUT_B;\n",
     "using LayoutB = HG_LAYOUT_B;\n"
     "// swap_ab: the kernel computes C^T = B^T A^T (operand A is B, operand B is A, C^T column-major)\n"
     "using LayoutOpA = std::conditional_t<std::is_same_v<LayoutB, cutlass::layout::RowMajor>,\n"
     "                                     cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;\n"),
    ("void, cutlass::layout::RowMajor, kAlignOut,", "void, cutlass::layout::ColumnMajor, kAlignOut,"),
    ("ElementOut, cutlass::layout::RowMajor, kAlignOut,", "ElementOut, cutlass::layout::ColumnMajor, kAlignOut,"),
    ("Half, cutlass::layout::RowMajor, kAlign,\n      Half, LayoutB, kAlign,",
     "Half, LayoutOpA, kAlign,\n      Half, cutlass::layout::ColumnMajor, kAlign,"),
    ("const int* opts, int n_opts, Gemm::Arguments& args) {\n",
     "const int* opts, int n_opts, Gemm::Arguments& args) {\n"
     "    std::swap(A, B);  // swap_ab: the transposed problem from here on\n"
     "    std::swap(M, N);\n"),
    ("cute::get<2>(sA) = (int64_t)Kc;",
     "cute::get<2>(sA) = std::is_same_v<LayoutOpA, cutlass::layout::RowMajor> ? (int64_t)Kc : (int64_t)Kc * M;"),
    ("cute::get<2>(sB) = std::is_same_v<LayoutB, cutlass::layout::RowMajor> ? (int64_t)Kc * N : (int64_t)Kc;",
     "cute::get<2>(sB) = (int64_t)Kc;  // operand B (A) is K-major"),
    ("const int slices = splitk_slices(M, N, K, want);", "const int slices = splitk_slices(N, M, K, want);"),
)


# sk_splits=-1 with scheduler=splitk: the slice count that fills one wave, resolved here from the
# problem and the device's SM count and passed to the kernel as an explicit count (so the binary
# and its build-cache entry are those of every other slice count). Why: measured on an H200 (18
# few-tile deep-K shapes, splitk_tma_swap 64x128), the best count put tiles x slices at about one
# wave, 4 slices on 32 tiles (1.04-1.12x, where the automatic count measured 0.74-0.88x), 8 on 16,
# 16 on 8; the fixed counts of the knob serve each tile count only by luck. On 134 shapes it was at
# least as good as any config measured before on 1-33 tiles with K > 4096, but 0.68-0.79x with
# K <= 1024; the first pick learns where.
ONE_WAVE = -1
MIN_SLICE_K_TILES = 8  # 16 slices of 512 on 256_256_8192 measured best: shallower slices are not tried


def slices_fit(k: int, slices: int) -> bool:
    """Does K cut into ``slices`` equal slices, each a multiple of 8 elements (TMA's 16-byte row
    strides)? The template's ``splitk_slices`` declines a count that does not."""
    return k % slices == 0 and (k // slices) % 8 == 0


def one_wave_slices(m: int, n: int, k: int, tile_m: int, tile_n: int, tile_k: int = 64,
                    sms: int = DEFAULT_SMS) -> int:
    """The most K slices (at most 64) with tiles x slices within one wave of ``sms`` CTAs, each slice a
    whole number of 8-element rows of K (TMA) and at least ``MIN_SLICE_K_TILES`` k-tiles deep; 1
    when no count above 1 qualifies (one slice still runs through the fp32 buffer and the reduce)."""
    tiles = -(-m // tile_m) * -(-n // tile_n)
    best = 1
    for s in range(2, 65):
        if tiles * s > sms:
            break
        if slices_fit(k, s) and k // s >= MIN_SLICE_K_TILES * tile_k:
            best = s
    return best


def swap_ab_source(body: str) -> str:
    """The template with ``SWAP_AB`` substituted; each anchor must occur exactly once."""
    for old, new in SWAP_AB:
        assert body.count(old) == 1, f"hopper_cutlass.cu changed: swap_ab anchor {old!r}"
        body = body.replace(old, new)
    return body


class Hopper(Family):
    def check(self, k: Mapping) -> str:
        tm, tn = k["tile_m"], k["tile_n"]
        if k["schedule"] == "cooperative" and tm not in (128, 256):
            return "cooperative splits the tile M over two consumer warpgroups: tile_m must be 128 or 256"
        if k["schedule"] == "pingpong" and tm not in (64, 128):
            return "pingpong gives each consumer warpgroup a whole tile: tile_m must be 64 or 128"
        if k["schedule"] == "pingpong" and tm * tn > 128 * 192:
            # 128x256 built with 168 registers a thread and 4.7 KB of spills, and measured 0.06x of
            # cuBLAS on an H200
            return "pingpong gives each consumer warpgroup a whole tile: its accumulators hold at most 128x192"
        if k["schedule"] == "single":
            if tm not in (64, 128) or tm * tn > 128 * 128:
                return "single: one consumer warpgroup holds the tile: tile_m 64 or 128, at most 128x128"
            if k["scheduler"] != "persistent":
                return ("single: one CTA per output tile (no tile scheduler): scheduler must be persistent "
                        "(data-parallel)")
            if (k["raster"], k["swizzle"], k["sms"]) != (0, 1, 0):
                # its grid is the tile grid (CUTLASS's get_grid_shape): these would only measure the
                # same kernel again (search-h200-c spent 36 rows on such copies)
                return "single: no tile scheduler, so raster, swizzle and sms do nothing: leave them at 0, 1, 0"
        if tm * tn > 128 * 256:
            return f"tile {tm}x{tn} needs more accumulator registers than two warpgroups hold"
        if k["scheduler"] == "streamk" and k["schedule"] != "cooperative":
            return "the sm90 stream-K scheduler runs with the cooperative schedule only"
        if k["scheduler"] != "streamk" and (k["sk_decomp"], k["sk_reduction"]) != (0, 0):
            return "sk_decomp / sk_reduction apply to scheduler=streamk only"
        if k["scheduler"] == "persistent" and k["sk_splits"] != 1:
            return "sk_splits applies to scheduler=streamk or splitk only"
        if k["scheduler"] == "streamk" and k["sk_splits"] in (0, ONE_WAVE):
            return "sk_splits=0 (automatic slices) and -1 (one wave) apply to scheduler=splitk only"
        if k["scheduler"] == "streamk" and k["sk_splits"] > 1 and k["sk_decomp"] not in (0, 2):
            # CUTLASS's PersistentTileSchedulerSm90StreamK::can_implement refuses it at run time
            return "stream-K sk_splits > 1 needs sk_decomp 0 (heuristic) or 2 (split-K)"
        if k["cluster_m"] * k["cluster_n"] > 4:
            return "cluster larger than 4 CTAs"
        epi = epilogue_tile(k)
        if epi and k["tile_n"] % epi[1]:
            return f"epi_n {epi[1]} must divide tile_n {k['tile_n']} (the epilogue's sub-tiles cover the tile)"
        stages = k["stages"] or 2
        epi_bytes = 2 * epi[0] * epi[1] * (4 if k["scheduler"] == "splitk" else 2) if epi else 0  # 2 in flight
        need = stages * _stage_bytes(k) + max(EPILOGUE_SMEM, epi_bytes)
        if need > SMEM_LIMIT:
            return f"{stages} stages need ~{need} bytes of shared memory > {SMEM_LIMIT}"
        return ""

    def render(self, k: Mapping) -> str:
        defines = {
            "HG_TILE_M": k["tile_m"],
            "HG_TILE_N": k["tile_n"],
            "HG_TILE_K": k["tile_k"],
            "HG_CLUSTER_M": k["cluster_m"],
            "HG_CLUSTER_N": k["cluster_n"],
            "HG_COOPERATIVE": int(k["schedule"] == "cooperative"),
            "HG_STAGES": k["stages"],
            "HG_STREAMK": int(k["scheduler"] == "streamk"),
            "HG_SPLITK": int(k["scheduler"] == "splitk"),
        }
        body = template("hopper_cutlass.cu")
        if k["schedule"] == "single":
            # CUTLASS's non-persistent warp-specialized kernel: a grid of one CTA per output tile,
            # one producer and one consumer warpgroup. The line is substituted rather than switched
            # by a define, so every persistent config renders the source it had before (and keeps
            # its build-cache entry).
            pp = "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;"
            assert pp in body, "hopper_cutlass.cu changed its schedule lines"
            body = body.replace(pp, "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecialized;")
        epi = epilogue_tile(k)
        if epi:  # substituted, not a define: the automatic sub-tile's configs keep their sources
            assert body.count(EPI_AUTO) == 1, "hopper_cutlass.cu changed its epilogue builder"
            body = body.replace(EPI_AUTO, f"Shape<Int<{epi[0]}>, Int<{epi[1]}>>, float, float,")
        if k.get("swap_ab"):  # not a hopper knob: set by the views with HopperView.swap_ab
            body = swap_ab_source(body)
        body = l2_promo_source(body, int(k["l2_promo"]))
        head, rest = body.split("// @@PER_LAYOUT_BEGIN@@", 1)
        per, tail = rest.split("// @@PER_LAYOUT_END@@", 1)
        per = per.split("\n", 1)[1]  # drop the marker line's comment
        copies = [
            per.replace("HG_NS", ns).replace("HG_LAYOUT_B", lay)
            for ns, lay in (("nn", "cutlass::layout::RowMajor"), ("tn", "cutlass::layout::ColumnMajor"))
        ]
        return (
            f"// hgemm-bench family {self.name}\n"
            + template("hgemm_abi.cuh")
            + "\n// ---- knobs ----\n"
            + render_defines(defines)
            + head
            + "".join(copies)
            + tail
        )

    def extra_flags(self, k: Mapping) -> tuple[str, ...]:
        inc = tuple(f"-I{d}" for d in toolchain.cutlass_include_dirs())
        return (*inc, "--expt-relaxed-constexpr", "-DNDEBUG", *extended_mma_flag(k))

    def extra_key(self, k: Mapping) -> str:
        return f"cutlass {toolchain.cutlass_version()}"

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.k % 8 or problem.n % 8:
            return unsupported(
                f"TMA needs 16-byte row strides: K ({problem.k}) and N ({problem.n}) must be multiples of 8"
            )
        s = k["sk_splits"]
        if k["scheduler"] == "splitk" and s > 1 and not slices_fit(problem.k, s):
            return unsupported(f"split-K into {s} slices needs K ({problem.k}) = {s} x a multiple of 8")
        return SUPPORTED

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["raster"]), int(k["swizzle"]), int(k["sms"]),
                self.slices(k, problem, sms), int(k["sk_decomp"]), int(k["sk_reduction"])]

    @staticmethod
    def slices(k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> int:
        """``sk_splits`` as the kernel takes it: the one-wave value resolved to a count for this
        problem on ``sms`` SMs (``swap_ab``: tiles of the transposed problem; a persistent grid
        limited by the ``sms`` knob fills that many), every other value as it is."""
        s = int(k["sk_splits"])
        if s != ONE_WAVE:
            return s
        m, n = (problem.n, problem.m) if k.get("swap_ab") else (problem.m, problem.n)
        return one_wave_slices(m, n, problem.k, k["tile_m"], k["tile_n"], k["tile_k"], k["sms"] or sms)


class HopperView(Family):
    """A family that is the hopper family with some knobs fixed (splitk_tma, splitk_tma_swap,
    hopper_swap): ``as_hopper`` maps its knobs to a full hopper config, and the rules, the source
    (under this family's name, so its builds are its own), flags, shape support and runtime
    options are the hopper family's. ``swap_ab`` renders the transposed problem (``SWAP_AB``)."""

    swap_ab = False

    def as_hopper(self, k: Mapping) -> dict:
        raise NotImplementedError

    def check(self, k: Mapping) -> str:
        return FAMILY.check(self.as_hopper(k))

    def render(self, k: Mapping) -> str:
        full = self.as_hopper(k) | ({"swap_ab": 1} if self.swap_ab else {})
        return FAMILY.render(full).replace("// hgemm-bench family hopper", f"// hgemm-bench family {self.name}", 1)

    def extra_flags(self, k: Mapping) -> tuple[str, ...]:
        return FAMILY.extra_flags(self.as_hopper(k))

    def extra_key(self, k: Mapping) -> str:
        return FAMILY.extra_key(self.as_hopper(k))

    def supports(self, k: Mapping, problem: Problem) -> Support:
        return FAMILY.supports(self.as_hopper(k), problem)

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return FAMILY.opts(self.as_hopper(k) | ({"swap_ab": 1} if self.swap_ab else {}), problem, sms)


FAMILY = Hopper(
    name="hopper",
    # Each preset is the best config measured on some shape class (H200, against cuBLAS in the same
    # calls): 128x256 cooperative, cluster 2x1 (the default): 4096^3 at 0.98x, 12288_1024_64 at
    # 0.985x; 64x128 pingpong: the family's best at 1024^3; 128x128 pingpong, cluster 2x1, 6 stages
    # (cuBLAS's nvjet tile there): write-heavy shapes, 2048_8192_64 at 1.03x; the non-persistent
    # 64x64 and 64x128 tiles with 4 stages: small shapes of 2.2-3.5 us (1.00-1.08x), where every
    # persistent config was 0.7-0.9x; the same tiles with deep pipelines at about one wave, 64x64
    # with A multicast along N and 12 stages (4096_128_2048 1.06x) and 64x128 with 8 stages
    # (512_2048_8192 1.02x); stream-K, 128x128 cooperative with the heuristic decomposition
    # (12288_256_16384 0.95x, where the best before was 0.83x) and 128x64 split into 2
    # (256_2048_12288 0.92x, 0.79x before); 128x192 pingpong, cluster 2x1 (near nvjet's 176x128):
    # short-K shapes with a large output, 12288_4096_256 0.94x, where 128x128 pingpong measured
    # 0.87-0.90x.
    presets=("", "tile_m=64:tile_n=128:cluster_m=1:schedule=pingpong",
             "tile_m=128:tile_n=128:cluster_m=2:schedule=pingpong:stages=6",
             "tile_m=64:tile_n=64:cluster_m=1:schedule=single:stages=4",
             "tile_m=64:tile_n=128:cluster_m=1:schedule=single:stages=4",
             "tile_m=64:tile_n=64:cluster_m=1:cluster_n=2:schedule=single:stages=12",
             "tile_m=64:tile_n=128:cluster_m=1:schedule=single:stages=8",
             "tile_m=128:tile_n=128:cluster_m=1:schedule=cooperative:scheduler=streamk",
             "tile_m=128:tile_n=64:cluster_m=1:schedule=cooperative:scheduler=streamk:sk_splits=2:sk_decomp=2",
             "tile_m=128:tile_n=192:cluster_m=2:schedule=pingpong"),
    knobs=(
        Knob("tile_m", (128, 64, 256), 128),
        Knob("tile_n", (256, 64, 128, 192, *ODD_TILE_N, *NARROW_TILE_N), 256,
             help="CTA tile along N (the WGMMA instruction's N: any multiple of 8 up to 256); "
                  "ODD_TILE_N are the sizes cuBLAS picks off the power-of-two grid, NARROW_TILE_N "
                  "those it picks on narrow outputs"),
        Knob("tile_k", (64, 32, 128), 64),
        Knob("cluster_m", (2, 1, 4), 2),
        Knob("cluster_n", (1, 2, 4), 1),
        Knob("schedule", ("cooperative", "pingpong", "single"), "cooperative",
             help="cooperative / pingpong: persistent, two consumer warpgroups; single: one CTA per "
                  "output tile, one consumer warpgroup (on the H200 it sheds most of the persistent "
                  "kernels' ~1 us fixed cost)"),
        Knob("stages", (0, 2, 3, 4, 5, 6, 7, 8, 10, 12), 0,
             help="0 = as many as fit; 8-12 fit small tiles only (cuBLAS runs 13 stages of 64x64 on "
                  "4096_128_2048)"),
        Knob("scheduler", ("persistent", "streamk", "splitk"), "persistent",
             help="persistent data-parallel tiles, stream-K (few-tile / odd tile counts), or parallel "
                  "split-K (K slices as batches into fp32, then a reduce kernel; few-tile large-K)"),
        Knob("raster", (0, 1, 2), 0, runtime=True, help="0 heuristic, 1 along M, 2 along N"),
        Knob("swizzle", (1, 2, 4, 8), 1, runtime=True, help="max swizzle size"),
        Knob("sms", (0, 66, 114, 128), 0, runtime=True, help="SMs for the persistent grid; 0 = all"),
        Knob("sk_splits", (1, 2, 4, 8, 16, 32, 64, 0, ONE_WAVE), 1, runtime=True,
             help="stream-K: split-K factor; splitk: K slices (0 = tiles x slices within half the SMs, "
                  "-1 = one wave: one_wave_slices)"),
        Knob("sk_decomp", (0, 1, 2, 3), 0, runtime=True,
             help="stream-K: 0 heuristic, 1 data-parallel, 2 split-K, 3 stream-K"),
        Knob("sk_reduction", (0, 1), 0, runtime=True, help="stream-K: 0 deterministic, 1 not"),
        Knob("epi_n", (0, 64, 128), 0,
             help="epilogue sub-tile N: 0 = CUTLASS's (32); 64 or 128 store the tile in fewer, larger TMA "
                  "stores (epilogue_tile)"),
        Knob("l2_promo", (0, *L2_PROMO_VALUES), 0,
             help="L2 promotion of the TMA descriptors' misses: 0 = CUTLASS's (128 B), 256 = 256 B "
                  "(L2_PROMO_VALUES)"),
    ),
)
