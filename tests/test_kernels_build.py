"""CPU tests of the kernel build pipeline and the family knob rules (no GPU needed).

What they guard: every CUDA family's default config really compiles for sm_90a with the local
nvcc and ptxas reports no register spills (a spill would silently cost performance); the
tensor-core instructions we rely on are in the SASS (HMMA for mma.sync, HGMMA for WGMMA), so a
refactor cannot quietly fall back to CUDA-core math; the content-addressed cache returns an
unchanged config in under a second; compile errors come back as results carrying the compiler's
message rather than exceptions; and invalid knob combinations are refused with a reason.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import pytest

from harness.problem import Problem, Shape
from kernels_search import build, ptxas, toolchain
from kernels_search.families import ALL as FAMILIES
from kernels_search.family import KnobError

from conftest import build_config, needs_nvcc, sass_of, study_specs


def _has_cutlass() -> bool:
    try:
        toolchain.cutlass_include_dirs()
        return True
    except toolchain.ToolchainError:
        return False



def _build_default(name: str) -> build.BuildResult:
    fam = FAMILIES[name]
    return build_config(fam, fam.defaults())


# ---- ptxas parsing ------------------------------------------------------------------------------

PTXAS_SAMPLE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmv' for 'sm_90a'
ptxas info    : Function properties for _Z4gemmv
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 12.550 ms
ptxas info    : Compiling entry function 'reduce' for 'sm_90a'
ptxas info    : Function properties for reduce
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 34 registers, used 0 barriers
ptxas info    : Function properties for _Z6helperf
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""


def test_ptxas_parser_reads_registers_spills_smem_and_stack():
    """The metadata columns come from this parser: a format slip would report 0 spills forever."""
    ks = ptxas.parse_ptxas(PTXAS_SAMPLE)
    assert [k.name for k in ks] == ["_Z4gemmv", "reduce"]  # device functions are not kernels
    g = ks[0]
    assert (g.registers, g.spill_stores, g.spill_loads, g.stack_bytes, g.smem_bytes) == (168, 8, 12, 16, 1024)
    s = ptxas.summarize(ks)
    assert s["spill_bytes"] == 20 and s["max_registers"] == 168 and s["n_kernels"] == 2


# ---- knob rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, spec, reason",
    [
        ("splitk", "bm=128,bn=128,warps_m=1,warps_n=1", "accumulator registers"),
        ("splitk", "bm=32,warps_m=4", r"multiple of 16\*warps_m"),
        ("splitk", "bm=128,bn=128,bk=128,stages=6", "shared memory"),
        ("splitk", "bogus=1", "unknown knob"),
        ("splitk", "bm=48", "not in"),
        ("splitk", "bk=32,kslices=4", "not divisible among kslices=4"),
        ("splitk", "warps_m=4,warps_n=4,bm=128,bn=128,kslices=4", r"2048 threads per CTA|accumulator|chunks"),
        ("smalltile", "bm=128", "not in"),
        ("hopper", "schedule=pingpong,tile_m=256", "tile_m must be 64 or 128"),
        ("hopper", "schedule=cooperative,tile_m=64", "tile_m must be 128 or 256"),
        ("hopper", "cluster_m=4,cluster_n=2", "cluster larger"),
        ("hopper", "tile_m=256,tile_n=256", "accumulator"),
        ("hopper", "tile_k=128,stages=7", "shared memory"),
        ("triton_splitk", "block_m=128,block_n=128,block_k=128,num_stages=5", "shared memory"),
        ("triton_splitk", "block_m=128,block_n=128,block_k=128,num_warps=4,num_stages=2",
         "more warps or a smaller tile"),
        ("triton_streamk", "block_m=128,block_n=128,block_k=128,num_stages=5", "shared memory"),
        ("triton_streamk", "block_m=128,block_n=128,num_warps=2", "more warps or a smaller tile"),
        ("triton_streamk", "per_sm=3", "not in"),
    ],
)
def test_invalid_knobs_are_rejected_with_a_reason(family, spec, reason):
    """Each validity rule must fire, and say why, before anything reaches the compiler."""
    with pytest.raises(KnobError, match=reason):
        FAMILIES[family].parse(spec)
    assert not FAMILIES[family].is_valid({**FAMILIES[family].defaults()} | {"bogus": 1})


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_defaults_are_valid_and_spec_round_trips(name):
    """The canonical name (a result column and resume key) parses back to the same knobs."""
    fam = FAMILIES[name]
    k = fam.defaults()
    fam.validate(k)
    spec = fam.spec(k)
    assert spec.startswith(f"{name}:")
    assert fam.parse(spec.partition(":")[2]) == k


def test_families_register_as_non_default_methods():
    """--methods splitk:... resolves through the plug-in registry; no family is a default method."""
    from harness import registry

    import kernels_search  # noqa: F401  (registers)

    for name in FAMILIES:
        assert name in registry.entries() and not registry.entries()[name].default
    (m,) = registry.resolve(["splitk:splits=16,bm=32"])
    assert m.name.startswith("splitk:bm=32,") and "splits=16" in m.name
    assert m.config["splits"] == 16 and m.family == "splitk" and not m.is_baseline
    assert len(m.source_hash) == 64
    with pytest.raises(ValueError):
        registry.resolve(["splitk:bm=7"])


def test_colon_separates_knobs_like_comma():
    """`--methods` lists are comma-separated on the CLI: `splitk:bm=32:splits=16` must also work."""
    fam = FAMILIES["splitk"]
    assert fam.parse("bm=32:splits=16") == fam.parse("bm=32,splits=16")
    assert fam.parse("bm=32:splits=16")["splits"] == 16


def test_runtime_knobs_share_one_source():
    """Split count is a runtime option: changing it must not change the source (no rebuild)."""
    fam = FAMILIES["splitk"]
    a, b = fam.parse("splits=2"), fam.parse("splits=32,reduce=1")
    assert fam.render(a) == fam.render(b)
    assert fam.render(a) != fam.render(fam.parse("bk=32"))


def test_hopper_declines_unaligned_shapes():
    """TMA needs 16-byte strides; the family must say so instead of crashing at run time."""
    fam = FAMILIES["hopper"]
    k = fam.defaults()
    assert not fam.supports(k, Problem(Shape(64, 64, 100)))
    assert "multiples of 8" in fam.supports(k, Problem(Shape(64, 100, 64))).reason
    assert fam.supports(k, Problem(Shape(17, 64, 64), "tn"))


# ---- compiling ----------------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("name", ["splitk", "smalltile"])
def test_mma_sync_family_default_compiles_without_spills(cache, name):
    """Default config builds for sm_90a, exports the C ABI, has no spills and uses HMMA."""
    res = _build_default(name)
    assert res.ok, res.log[-3000:]
    assert res.kernels, "ptxas reported no kernels: -Xptxas -v output not parsed"
    assert res.spill_bytes == 0, res.kernels
    lib = ctypes.CDLL(res.lib_path)
    assert hasattr(lib, "hgemm_run") and hasattr(lib, "hgemm_workspace")
    assert "HMMA.16816.F32" in sass_of(res.lib_path)


@needs_nvcc
def test_splitk_workspace_is_sized_on_the_host(cache):
    """hgemm_workspace is pure host code: 0 without a split, splits*tiles*tile*4 bytes (+counters) with."""
    res = _build_default("splitk")
    assert res.ok, res.log[-3000:]
    lib = ctypes.CDLL(res.lib_path)
    lib.hgemm_workspace.restype = ctypes.c_size_t
    ws = lambda m, n, k, *opts: lib.hgemm_workspace(m, n, k, 0, (ctypes.c_int * 2)(*opts), len(opts))
    assert ws(256, 128, 16384, 1, 0) == 0
    # 64x64 tiles: 4 x 2 tiles, 16 splits, 64*64 fp32 each, then 8 int counters padded to 256 bytes
    assert ws(256, 128, 16384, 16, 0) == 16 * 8 * 64 * 64 * 4 + 256
    # K = 100 has 2 k-tiles of 64: a request for 16 splits is clamped to 2
    assert ws(256, 128, 100, 16, 1) == 2 * 8 * 64 * 64 * 4 + 256
    # atomic reduction keeps a single fp32 tile set whatever the split count
    assert ws(256, 128, 16384, 16, 2) == 8 * 64 * 64 * 4 + 256
    assert ws(256, 128, 16384, 999, 0) == 0  # out-of-range option
    # cluster reduction (reduce=3) needs no workspace, whatever the split count
    assert ws(256, 128, 16384, 16, 3) == 0 and ws(256, 128, 16384, 0, 3) == 0
    assert ws(256, 128, 16384, 16, 4) == 0  # out-of-range reduce mode


@needs_nvcc
def test_splitk_cluster_reduction_is_compiled_in(cache):
    """reduce=3 instantiates a kernel that syncs its cluster and reads peers' shared memory
    (generic 16-byte loads through map_shared_rank), with no spills."""
    import re

    res = _build_default("splitk")
    assert res.ok and res.spill_bytes == 0, res.log[-3000:]
    sass = sass_of(res.lib_path)
    funcs = re.split(r"\n\s*Function : ", sass)
    mode4 = [f for f in funcs if re.match(r"_ZN2ms11gemm_kernelILi[01]ELb[01]ELi4E", f)]
    assert len(mode4) == 4, "one MODE 4 kernel per layout x load path"
    for f in mode4:
        assert "UCGABAR_ARV" in f and "UCGABAR_WAIT" in f
        assert "LD.E.128" in f
    others = [f for f in funcs if re.match(r"_ZN2ms11gemm_kernelILi[01]ELb[01]ELi[0-3]E", f)]
    assert others and not any("UCGABAR" in f for f in others)


def test_family_sweep_specs_are_valid():
    """Every config of every sweep in scripts/family_sweep.py parses and passes its family's rules,
    so a typo fails here, not in a device call."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / "family_sweep.py"
    spec = importlib.util.spec_from_file_location("family_sweep", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert set(mod.SETS) >= {"all", "splitk"}
    for name, sweep in mod.SETS.items():
        for s in sweep:
            family, _, args = s.partition(":")
            FAMILIES[family].parse(args)  # raises KnobError on a bad knob or combination


@needs_nvcc
def test_cache_hit_is_under_a_second(cache):
    """A second build of an unchanged config must be a cache lookup, not a compile."""
    fam = FAMILIES["smalltile"]
    k = fam.parse("bk=32")
    src = fam.render(k)
    first = build.build(src)
    assert first.ok and not first.cached, first.log[-2000:]
    t0 = time.perf_counter()
    again = build.build(src)
    dt = time.perf_counter() - t0
    assert again.cached and again.ok and again.lib_path == first.lib_path
    assert again.kernels == first.kernels
    assert dt < 1.0, f"cache hit took {dt:.2f} s"
    assert build.build(src + "\n// changed\n").key != first.key  # content-addressed


@needs_nvcc
def test_compile_failure_is_a_result_with_the_compiler_error(cache):
    """A broken candidate must come back ok=False with nvcc's message, never raise."""
    src = 'extern "C" int hgemm_run() { return undefined_symbol_xyz; }\n'
    res = build.build(src)
    assert not res.ok and res.lib_path is None
    assert "undefined_symbol_xyz" in res.log and "error" in res.log
    again = build.build(src)  # deterministic failures are cached too
    assert again.cached and not again.ok


@needs_nvcc
def test_build_many_compiles_in_parallel_and_dedupes(cache):
    """The pool returns one result per job in order; identical jobs share a build."""
    srcs = [f'extern "C" __global__ void k{i}(float* x) {{ x[threadIdx.x] += {i}; }}\n' for i in range(3)]
    jobs = [build.BuildJob(s) for s in srcs] + [build.BuildJob(srcs[0])]
    res = build.build_many(jobs, workers=2)
    assert [r.ok for r in res] == [True] * 4
    assert res[0].key == res[3].key and len({r.key for r in res}) == 3
    assert [r.kernels[0]["name"] for r in res[:3]] == ["k0", "k1", "k2"]


@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(not _has_cutlass(), reason="nvidia-cutlass headers not installed")
def test_hopper_default_compiles_with_wgmma_and_no_spills(cache):
    """The CUTLASS sm90 config (~1-2 min on one core) builds, has no spills and issues HGMMA."""
    res = _build_default("hopper")
    assert res.ok, res.log[-5000:]
    assert res.kernels and res.spill_bytes == 0, res.kernels
    sass = sass_of(res.lib_path)
    assert "HGMMA" in sass
    lib = ctypes.CDLL(res.lib_path)
    assert hasattr(lib, "hgemm_run") and hasattr(lib, "hgemm_workspace")


@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(not _has_cutlass(), reason="nvidia-cutlass headers not installed")
def test_splitk_tma_default_compiles_with_its_reduce_kernel(cache):
    """The parallel split-K family (hopper template with HG_SPLITK: fp32 batched epilogue + the
    slice-sum kernel) builds without spills."""
    res = _build_default("splitk_tma")
    assert res.ok, res.log[-5000:]
    assert res.spill_bytes == 0, res.kernels
    names = " ".join(k["name"] for k in res.kernels)
    assert "splitk_reduce" in names and "HGMMA" in sass_of(res.lib_path)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(not _has_cutlass(), reason="nvidia-cutlass headers not installed")
def test_splitk_tma_swap_default_compiles(cache):
    """The transposed split-K kernels (column-major C^T, operand A M-major for "nn") build for sm_90a
    without spills, with WGMMA and the reduce kernel."""
    res = _build_default("splitk_tma_swap")
    assert res.ok, res.log[-5000:]
    assert res.spill_bytes == 0, res.kernels
    assert "splitk_reduce" in " ".join(k["name"] for k in res.kernels) and "HGMMA" in sass_of(res.lib_path)


def test_splitk_tma_swap_renders_the_transposed_problem_and_leaves_other_sources_alone():
    """splitk_tma_swap is splitk_tma's source with every swap_ab substitution made once (operands
    swapped, C^T column-major, K batch strides of the swapped operands, slices counted on the
    transposed tiles), the same rules and shape support; no other config's source changes."""
    from kernels_search.families import hopper as hopper_mod
    from kernels_search.families.splitk_tma import as_hopper

    fam, tma, hop = FAMILIES["splitk_tma_swap"], FAMILIES["splitk_tma"], FAMILIES["hopper"]
    k = fam.parse("tile_n=128,cluster_m=1,cluster_n=1,slices=8")
    src, plain = fam.render(k), tma.render(k)
    assert src.startswith("// hgemm-bench family splitk_tma_swap")
    from kernels_search.family import template

    body = template("hopper_cutlass.cu")
    swapped = hopper_mod.swap_ab_source(body)
    for old, new in hopper_mod.SWAP_AB:
        assert body.count(old) == 1 and swapped.count(new) == 1, old
        assert old in new or swapped.count(old) == 0, old
    # rendered: both B layouts' copies swapped
    assert src.count("std::swap(M, N);") == 2 and src.count("splitk_slices(N, M, K, want)") == 2
    assert src.count("Half, LayoutOpA, kAlign,") == 2 and "splitk_slices(M, N, K, want)" not in src
    for other in (plain, hop.render(hop.parse("")),
                  hop.render(hop.parse("schedule=single,tile_m=64,tile_n=64,cluster_m=1"))):
        assert "LayoutOpA" not in other and "std::swap" not in other
    p = Problem(Shape(1024, 64, 12288))
    assert fam.opts(k, p) == tma.opts(k, p) == [0, 1, 0, 8, 0, 0]
    assert fam.supports(k, p) and not fam.supports(k, Problem(Shape(64, 33, 1024)))  # N % 8 (TMA)
    assert as_hopper(fam.parse("slices=1"))["sk_splits"] == 1 and fam.check(fam.parse("slices=1")) == ""
    assert [fam.spec(c) for c in fam.preset_configs()] == [
        "splitk_tma_swap:tile_m=64,tile_n=64,cluster_m=2,cluster_n=2,schedule=pingpong,slices=0",
        "splitk_tma_swap:tile_m=64,tile_n=128,cluster_m=1,cluster_n=1,schedule=pingpong,slices=8",
        "splitk_tma_swap:tile_m=64,tile_n=128,cluster_m=1,cluster_n=1,schedule=pingpong,slices=4"]
    with pytest.raises(KnobError, match="tile_m must be 128 or 256"):
        fam.parse("schedule=cooperative,tile_m=64")


@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(not _has_cutlass(), reason="nvidia-cutlass headers not installed")
def test_hopper_swap_default_compiles_without_the_reduce_kernel(cache):
    """The transposed one-pass GEMM (fp16 C^T written column-major) builds for sm_90a without
    spills, with WGMMA, and with no slice-sum kernel: it has no fp32 slices."""
    res = _build_default("hopper_swap")
    assert res.ok, res.log[-5000:]
    assert res.spill_bytes == 0, res.kernels
    assert "splitk_reduce" not in " ".join(k["name"] for k in res.kernels) and "HGMMA" in sass_of(res.lib_path)


def test_hopper_swap_renders_the_transposed_one_pass_gemm():
    """hopper_swap is the hopper source with every swap_ab substitution made once per B layout
    and no split-K (C^T goes straight to C's memory), its fixed knobs as the plain kernel's, the
    hopper rules (a tile a schedule cannot hold, shared memory for deep pipelines), hopper's TMA
    shape support and runtime options."""
    fam, hop = FAMILIES["hopper_swap"], FAMILIES["hopper"]
    k = fam.parse("tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=pingpong,stages=6")
    src = fam.render(k)
    assert src.startswith("// hgemm-bench family hopper_swap")
    assert src.count("std::swap(M, N);") == 2 and src.count("Half, LayoutOpA, kAlign,") == 2
    assert "#define HG_SPLITK 0" in src and "#define HG_STREAMK 0" in src and "#define HG_TILE_N 192" in src
    plain = hop.render(hop.parse("tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=pingpong,stages=6"))
    assert "std::swap" not in plain and "LayoutOpA" not in plain
    single = fam.render(fam.parse("tile_m=64,tile_n=64,schedule=single,stages=12"))
    assert "KernelTmaWarpSpecialized;" in single and "std::swap(M, N);" in single
    p = Problem(Shape(12288, 128, 1024))
    assert fam.opts(k, p) == [0, 1, 0, 1, 0, 0]
    assert fam.supports(k, p) and not fam.supports(k, Problem(Shape(4096, 36, 1024)))  # N % 8 (TMA)
    assert [fam.spec(c) for c in fam.preset_configs()] == [
        "hopper_swap:tile_m=64,tile_n=192,cluster_m=1,cluster_n=1,schedule=single,stages=6,l2_promo=0",
        "hopper_swap:tile_m=64,tile_n=128,cluster_m=1,cluster_n=1,schedule=single,stages=8,l2_promo=0"]
    with pytest.raises(KnobError, match="tile_m must be 128 or 256"):
        fam.parse("schedule=cooperative,tile_m=64")
    with pytest.raises(KnobError, match="shared memory"):
        fam.parse("tile_m=64,tile_n=192,stages=8")
    # deep pipelines on the plain kernel: small tiles only
    assert hop.check(hop.parse("tile_m=64,tile_n=64,cluster_m=1,schedule=single,stages=12")) == ""
    with pytest.raises(KnobError, match="shared memory"):
        hop.parse("tile_m=128,tile_n=128,cluster_m=1,schedule=single,stages=8")


def test_hopper_single_schedule_is_the_non_persistent_kernel_with_its_rules():
    """schedule=single renders CUTLASS's non-persistent warp-specialized kernel (one line
    differs from pingpong's source) and declines tiles one warpgroup cannot hold, schedulers it
    has no loop for, and runtime options of a persistent grid it does not have."""
    fam = FAMILIES["hopper"]
    single = fam.render(fam.parse("schedule=single,tile_m=128,tile_n=128,cluster_m=1"))
    pingpong = fam.render(fam.parse("schedule=pingpong,tile_m=128,tile_n=128,cluster_m=1"))
    changed = [(a, b) for a, b in zip(pingpong.splitlines(), single.splitlines()) if a != b]
    assert changed == [("using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;",
                        "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecialized;")]
    from kernels_search.family import template

    assert template("hopper_cutlass.cu").split("// @@PER_LAYOUT_BEGIN@@")[0].split("using Half")[1] in pingpong
    assert "one consumer warpgroup" in fam.check(fam.parse("schedule=pingpong,tile_m=128,tile_n=192")
                                                 | {"schedule": "single"})
    k = fam.parse("schedule=single,tile_m=64,tile_n=128,cluster_m=1")
    assert "no tile scheduler" in fam.check(k | {"scheduler": "splitk", "sk_splits": 0})
    assert fam.check(k) == ""
    # its grid is the tile grid: the persistent grid's runtime options would only repeat the kernel
    for noop in ({"raster": 1}, {"swizzle": 2}, {"sms": 66}):
        assert "do nothing" in fam.check(k | noop)
    assert fam.check(fam.parse("schedule=pingpong,tile_m=64,tile_n=128,cluster_m=1") | {"sms": 66}) == ""


def test_splitk_tma_is_the_hopper_split_k_scheduler_with_a_small_space():
    """splitk_tma renders the hopper template's split-K path (only the family comment differs),
    takes hopper's rules and shape support, and passes `slices` where hopper takes sk_splits."""
    from kernels_search.families.splitk_tma import as_hopper

    fam, hop = FAMILIES["splitk_tma"], FAMILIES["hopper"]
    k = fam.parse("tile_n=128,cluster_m=1,cluster_n=4,slices=8")
    h = hop.parse("tile_m=64,tile_n=128,cluster_m=1,cluster_n=4,schedule=pingpong,scheduler=splitk,sk_splits=8")
    assert as_hopper(k) == h
    src = fam.render(k)
    assert src.startswith("// hgemm-bench family splitk_tma") and "#define HG_SPLITK 1" in src
    assert src.split("\n", 1)[1] == hop.render(h).split("\n", 1)[1]
    p = Problem(Shape(256, 128, 16384))
    assert fam.opts(k, p) == hop.opts(h, p) == [0, 1, 0, 8, 0, 0]
    no = fam.supports(k, Problem(Shape(64, 64, 16392)))
    assert not no and "8 slices" in no.reason
    assert not fam.supports(k, Problem(Shape(64, 33, 1024)))  # TMA: N not a multiple of 8
    with pytest.raises(KnobError, match="tile_m must be 128 or 256"):
        fam.parse("schedule=cooperative,tile_m=64")
    with pytest.raises(KnobError, match="cluster larger"):
        fam.parse("cluster_m=4,cluster_n=2")
    assert all(kn.name not in ("stages", "sms", "sk_decomp") for kn in fam.knobs)  # the small space


def test_triton_tma_config_rules_and_alignment():
    """tma=1 is a persistent kernel; epi_split only means something with it; TMA row strides
    need K and N multiples of 8, and other shapes are declined with that reason."""
    fam = FAMILIES["triton"]
    with pytest.raises(KnobError, match="persistent=1"):
        fam.parse("tma=1")
    with pytest.raises(KnobError, match="epi_split"):
        fam.parse("epi_split=2")
    with pytest.raises(KnobError, match="per_sm applies"):
        fam.parse("per_sm=2")
    with pytest.raises(KnobError, match="2 programs an SM need"):
        fam.parse("block_m=128,block_n=128,num_stages=3,persistent=1,tma=1,per_sm=2")
    k = fam.parse("persistent=1,tma=1,epi_split=2")
    sup = fam.supports(k, Problem(Shape(64, 100, 64), "nn"))
    assert not sup and "multiples of 8" in sup.reason and "N=100" in sup.reason
    assert not fam.supports(k, Problem(Shape(64, 64, 65), "tn"))
    plain = fam.supports(fam.parse("persistent=1"), Problem(Shape(64, 100, 65), "nn"))
    assert "multiples of 8" not in (plain.reason or "")  # the pointer kernels take any shape


def test_triton_splitk_tma_rules():
    """triton_splitk tma=1 holds no address a loaded element, so 64 x 128 at 4 warps (refused by the pointer
    kernel's load rule) is a valid config; TMA row strides need K (and N where B is K x N, "nn") multiples
    of 8, and other shapes are declined with that reason."""
    fam = FAMILIES["triton_splitk"]
    with pytest.raises(KnobError, match="more warps or a smaller tile"):
        fam.parse("block_m=64,block_n=128,num_warps=4")
    k = fam.parse("block_m=64,block_n=128,num_warps=4,tma=1")
    sup = fam.supports(k, Problem(Shape(64, 64, 100), "tn"))
    assert not sup and "multiples of 8" in sup.reason and "K=100" in sup.reason
    assert not fam.supports(k, Problem(Shape(64, 100, 64), "nn"))
    assert "multiples of 8" not in (fam.supports(k, Problem(Shape(64, 100, 64), "tn")).reason or "")
    assert "multiples of 8" not in (fam.supports(fam.parse(""), Problem(Shape(64, 100, 65), "nn")).reason or "")
    assert "tma" not in {kn.name for kn in FAMILIES["triton_streamk"].knobs}  # stream-K loads by pointer only


def test_triton_family_says_when_triton_is_missing(monkeypatch):
    """Without triton the family must decline politely (a reason), not fail at import."""
    import sys

    from harness.problem import Problem, Shape
    from kernels_search import make_method

    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` raise ImportError
    m = make_method("triton", "block_m=64,split_k=4")
    sup = m.supports(Problem(Shape(17, 33, 65)), "cuda")
    assert not sup and "triton not installed" in sup.reason
    assert m.config["split_k"] == 4 and len(m.source_hash) == 64
    assert not m.supports(Problem(Shape(1, 1, 1)), "cpu")


@needs_nvcc
def test_prebuild_shares_one_binary_across_runtime_knobs(cache):
    """Methods differing only in runtime options (split count, reduction) map to one build."""
    from kernels_search import make_method
    from kernels_search.cuda_method import prebuild

    ms = [make_method("splitk", s) for s in ("splits=4", "splits=16,reduce=1", "bk=32")]
    res = prebuild(ms)
    assert all(r.ok for r in res), [r.log[-500:] for r in res if not r.ok]
    assert res[0].key == res[1].key != res[2].key
    assert ms[0].source_hash == ms[1].source_hash != ms[2].source_hash


def test_hopper_streamk_rules():
    """Stream-K needs the cooperative kernel; its runtime options are refused elsewhere."""
    fam = FAMILIES["hopper"]
    with pytest.raises(KnobError, match="cooperative schedule only"):
        fam.parse("scheduler=streamk,schedule=pingpong,tile_m=128,tile_n=128")
    with pytest.raises(KnobError, match="scheduler=streamk only"):
        fam.parse("sk_decomp=3")
    with pytest.raises(KnobError, match="sk_decomp 0 .heuristic. or 2"):
        fam.parse("scheduler=streamk,sk_decomp=1,sk_splits=8")  # the 12288_64_8192 held-out pick
    k = fam.parse("scheduler=streamk,sk_decomp=2,sk_splits=4,sk_reduction=1")
    assert fam.opts(k, Problem(Shape(256, 128, 16384)))[3:] == [4, 2, 1]
    assert "#define HG_STREAMK 1" in fam.render(k)


def test_hopper_parallel_splitk_rules():
    """Parallel split-K takes a slice count (0 = automatic) but no stream-K options, and declines a
    K that does not cut into that many slices of a multiple of 8 elements (TMA strides)."""
    fam = FAMILIES["hopper"]
    with pytest.raises(KnobError, match="scheduler=streamk only"):
        fam.parse("scheduler=splitk,sk_decomp=2")
    with pytest.raises(KnobError, match="streamk or splitk only"):
        fam.parse("sk_splits=4")
    with pytest.raises(KnobError, match="splitk only"):
        fam.parse("scheduler=streamk,sk_splits=0")
    k = fam.parse("scheduler=splitk,sk_splits=16,schedule=pingpong,tile_m=64,tile_n=64")
    src = fam.render(k)
    assert "#define HG_SPLITK 1" in src and "#define HG_STREAMK 0" in src
    assert fam.opts(k, Problem(Shape(256, 128, 16384)))[3] == 16
    assert fam.supports(k, Problem(Shape(256, 128, 16384)))
    no = fam.supports(k, Problem(Shape(256, 128, 16392)))  # 16392 / 16 = 1024.5
    assert not no and "16 slices" in no.reason
    assert not fam.supports(k, Problem(Shape(64, 64, 16 * 12)))  # slices of 12: not a multiple of 8
    assert fam.supports(fam.parse("scheduler=splitk,sk_splits=0"), Problem(Shape(64, 64, 16392)))



def test_hopper_epilogue_sub_tile_is_one_substituted_line_with_its_rules():
    """epi_n replaces CUTLASS's automatic epilogue sub-tile by an explicit one (M as the automatic
    choice has it: 64 for pingpong, 128 for cooperative); epi_n=0 renders the source unchanged, so
    every earlier config keeps its build-cache entry. A sub-tile that does not divide the tile, or
    whose two staging buffers leave no room for the explicit stages, is declined; the views
    (splitk_tma, hopper_swap) keep the automatic sub-tile."""
    from kernels_search.families.hopper import EPI_AUTO

    fam = FAMILIES["hopper"]
    base = "tile_m=128,tile_n=192,cluster_m=2,schedule=pingpong"
    auto, wide = fam.render(fam.parse(base)), fam.render(fam.parse(base + ",epi_n=64"))
    assert fam.parse(base)["epi_n"] == 0 and EPI_AUTO in auto
    changed = [(a, b) for a, b in zip(auto.splitlines(), wide.splitlines()) if a != b]
    assert len(changed) == 2  # one line in each B layout's instantiation
    assert all("EpilogueTileAuto" in a and "Shape<Int<64>, Int<64>>, float, float," in b for a, b in changed)
    coop = fam.render(fam.parse("tile_m=128,tile_n=256,schedule=cooperative,epi_n=128"))
    assert "Shape<Int<128>, Int<128>>, float, float," in coop and EPI_AUTO not in coop
    with pytest.raises(KnobError, match="epi_n 128 must divide tile_n 192"):
        fam.parse(base + ",epi_n=128")
    # 128x256 cooperative with 4 explicit stages (192 KB) fits the automatic staging, not two 128x128
    # fp16 sub-tiles (64 KB)
    coop4 = "tile_m=128,tile_n=256,schedule=cooperative,stages=4"
    assert fam.check(fam.parse(coop4)) == "" and fam.check(fam.parse(coop4 + ",epi_n=64")) == ""
    with pytest.raises(KnobError, match="shared memory"):
        fam.parse(coop4 + ",epi_n=128")
    for view in ("splitk_tma", "hopper_swap"):
        v = FAMILIES[view]
        assert "epi_n" not in v.parse("") and EPI_AUTO in v.render(v.parse(""))


def test_l2_promo_splices_the_descriptor_hook_in_only_when_set():
    """l2_promo=0 renders the source it had before the knob (so every earlier config keeps its
    build-cache entry); 256 splices hopper_l2_promo.cuh and its promotion define in once, before
    CUTLASS's first header (so CUTLASS's direct driver call resolves to the hook), for the hopper
    family and hopper_swap; the split-K views, which lack the knob, render without it."""
    from kernels_search.families.hopper import L2_PROMO_ANCHOR, l2_promo_source
    from kernels_search.family import template

    body = template("hopper_cutlass.cu")
    assert l2_promo_source(body, 0) == body
    for name, spec in (("hopper", "tile_m=64,tile_n=128,schedule=single,stages=8"),
                       ("hopper_swap", "tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=single,stages=6")):
        fam = FAMILIES[name]
        plain, promo = fam.render(fam.parse(spec)), fam.render(fam.parse(spec + ",l2_promo=256"))
        assert fam.parse(spec)["l2_promo"] == 0 and "hg_encode_tiled" not in plain
        assert promo.count("#define HG_L2_PROMOTION CU_TENSOR_MAP_L2_PROMOTION_L2_256B") == 1
        hook = promo.index("#define cuTensorMapEncodeTiled hg_encode_tiled")
        assert promo.index("#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1") < hook < promo.index(L2_PROMO_ANCHOR)
        # nothing else moves: removing the spliced block gives the plain source back
        start = promo.index("#define HG_L2_PROMOTION")
        assert promo[:start] + promo[promo.index(L2_PROMO_ANCHOR):] == plain
    with pytest.raises(KnobError, match="l2_promo"):
        FAMILIES["hopper"].parse("l2_promo=64")


def test_pingpong_tile_fits_one_warpgroups_accumulators():
    """Pingpong gives each consumer warpgroup a whole tile, so 128x256 (256 fp32 a thread) is declined
    (it built with spills and measured 0.06x); 128x192 and the cooperative 128x256 stay valid."""
    fam = FAMILIES["hopper"]
    with pytest.raises(KnobError, match="at most 128x192"):
        fam.parse("tile_m=128,tile_n=256,cluster_m=2,schedule=pingpong")
    assert fam.check(fam.parse("tile_m=128,tile_n=192,cluster_m=2,schedule=pingpong")) == ""
    assert fam.check(fam.parse("tile_m=128,tile_n=256,cluster_m=2,schedule=cooperative")) == ""
    with pytest.raises(KnobError, match="at most 128x192"):
        FAMILIES["hopper_swap"].parse("tile_m=128,tile_n=256,cluster_m=2,schedule=pingpong")
    for view in ("splitk_tma", "splitk_tma_swap"):
        v = FAMILIES[view]
        assert "l2_promo" not in v.parse("") and "hg_encode_tiled" not in v.render(v.parse(""))


@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(not _has_cutlass(), reason="nvidia-cutlass headers not installed")
def test_l2_promo_build_routes_cutlass_descriptors_through_the_hook(cache):
    """With l2_promo=256 the binary holds the hook (its cached driver pointer) and no spills: the
    macro reached CUTLASS's descriptor call. Without the knob no hook is compiled in."""
    import subprocess

    fam = FAMILIES["hopper_swap"]
    spec = "tile_m=64,tile_n=128,cluster_m=1,cluster_n=1,schedule=single,stages=8"
    for promo, hooked in ((256, True), (0, False)):
        k = fam.parse(f"{spec},l2_promo={promo}")
        res = build_config(fam, k)
        assert res.ok, res.log[-5000:]
        assert res.spill_bytes == 0, res.kernels
        syms = subprocess.run(["nm", "-C", str(res.lib_path)], capture_output=True, text=True, check=True).stdout
        assert ("hg_encode_tiled" in syms) == hooked


def test_odd_tile_sizes_are_valid_and_take_the_extended_wgmma_shapes_flag():
    """ODD_TILE_N (cuBLAS's tile sizes off the powers of two) are knob values of the hopper family
    and its views, under the same rules; a tile N CUTE's standard WGMMA list does not hold adds the
    define that lets it pick one atom that wide, and every standard tile keeps the flags (and build
    keys) it had. The study's spec file holds only valid configs with an odd tile."""
    from kernels_search import make_method
    from kernels_search.families.hopper import ODD_TILE_N, STANDARD_MMA_N

    flag = "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED"
    fam = FAMILIES["hopper"]
    for tn in ODD_TILE_N:
        sched = "pingpong" if tn <= 192 else "cooperative"  # a pingpong tile is at most 128x192
        k = fam.parse(f"tile_m=128,tile_n={tn},cluster_m=2,schedule={sched}")
        assert (flag in fam.extra_flags(k)) == (tn not in STANDARD_MMA_N)
        assert f"#define HG_TILE_N {tn}" in fam.render(k)
        swap = FAMILIES["hopper_swap"]
        ks = swap.parse(f"tile_m=128,tile_n={tn},cluster_m=2,schedule={sched}")
        assert (flag in swap.extra_flags(ks)) == (tn not in STANDARD_MMA_N)
    assert 96 in ODD_TILE_N and 96 in STANDARD_MMA_N and 160 not in STANDARD_MMA_N
    for preset in fam.presets:  # no earlier config gains the define
        assert flag not in fam.extra_flags(fam.parse(preset))
    with pytest.raises(KnobError, match="at most 128x128"):  # single: one warpgroup's accumulators
        fam.parse("tile_m=128,tile_n=160,cluster_m=1,schedule=single")
    with pytest.raises(KnobError, match="shared memory"):
        fam.parse("tile_m=64,tile_n=224,cluster_m=1,schedule=single,stages=6")
    with pytest.raises(KnobError):
        fam.parse("tile_n=100")  # not a knob value
    specs = study_specs("odd-tile-specs.txt")
    assert len(specs) == 14
    for spec in specs:
        m = make_method(*spec.split(":", 1))
        assert m.name == spec and (m.knobs["tile_n"] in ODD_TILE_N), spec


def test_narrow_tile_sizes_are_valid_without_the_extended_shapes_flag():
    """NARROW_TILE_N (tile N of 32 and 16, what cuBLAS runs on the grid's narrow outputs) are knob
    values of the hopper family and of hopper_swap (along M there), standard WGMMA widths that need
    no define; the narrow study's spec file holds only valid configs, each with a narrow tile or the
    64x192 tile clustered along M."""
    from kernels_search import make_method
    from kernels_search.families.hopper import NARROW_TILE_N, STANDARD_MMA_N

    flag = "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED"
    for name in ("hopper", "hopper_swap"):
        fam = FAMILIES[name]
        for tn in NARROW_TILE_N:
            k = fam.parse(f"tile_m=64,tile_n={tn},cluster_m=1,cluster_n=2,schedule=single,stages=12")
            assert tn in STANDARD_MMA_N and flag not in fam.extra_flags(k)
            assert f"#define HG_TILE_N {tn}" in fam.render(k)
    specs = study_specs("narrow-tile-specs.txt")
    assert len(specs) == 14
    for spec in specs:
        m = make_method(*spec.split(":", 1))
        narrow = m.knobs["tile_n"] in NARROW_TILE_N
        assert narrow or (m.knobs["tile_m"], m.knobs["tile_n"], m.knobs["cluster_m"]) == (64, 192, 2), spec


@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(not _has_cutlass(), reason="nvidia-cutlass headers not installed")
@pytest.mark.parametrize("knobs, atom", [
    ("tile_m=128,tile_n=160,cluster_m=2,schedule=pingpong", "64x160x16"),
    ("tile_m=64,tile_n=16,cluster_m=1,cluster_n=2,schedule=single,stages=12", "64x16x16"),
])
def test_odd_and_narrow_tiles_compile_to_one_wgmma_atom_as_wide_as_the_tile(cache, knobs, atom):
    """128x160: without the extended-shapes define CUTE computes the tile in 64x32 atoms (five
    WGMMAs per k-step, each re-reading A from shared memory); with it, one 64x160 atom. 64x16 in a
    cluster of two along N: one 64x16 atom (with B N-major the 32-byte rows take a narrower
    shared-memory swizzle). Both for both B layouts, without spills."""
    fam = FAMILIES["hopper"]
    k = fam.parse(knobs)
    res = build_config(fam, k)
    assert res.ok, res.log[-5000:]
    assert res.spill_bytes == 0, res.kernels
    names = [kn["name"] for kn in res.kernels]
    assert len(names) == 2 and all(f"MMA_{atom}" in n for n in names), names
    assert f"HGMMA.{atom}" in sass_of(res.lib_path)


def test_one_wave_slice_count_fills_one_wave_with_deep_enough_slices():
    """``sk_splits=-1`` (``slices=-1``): the most slices with tiles x slices within the SMs and slices
    of >= 8 k-tiles, resolved per problem and device, passed to the kernel as a count; the binary
    is the one every slice count shares."""
    from kernels_search.families.hopper import one_wave_slices

    # the slice study's winners on 132 SMs: 32 tiles -> 4 slices, 16 -> 8, 8 -> 16; 64 tiles -> 2
    assert one_wave_slices(512, 512, 8192, 64, 128) == 4  # 8 x 4 tiles
    assert one_wave_slices(256, 512, 12288, 64, 128) == 8  # 16 tiles: 12288 / 8 = 1536
    assert one_wave_slices(256, 256, 8192, 64, 128) == 16  # 8 tiles, slices of 512 = 8 k-tiles
    assert one_wave_slices(512, 1024, 16384, 64, 128) == 2
    assert one_wave_slices(1024, 1024, 8192, 64, 128) == 1  # 128 tiles: a second slice needs 256 CTAs
    assert one_wave_slices(256, 256, 1024, 64, 128) == 2  # slices at least 8 k-tiles (512) deep
    assert one_wave_slices(64, 64, 12288, 64, 64) == 24  # 1 tile: slices of >= 512 cap it (12288 / 24 = 512)
    assert one_wave_slices(64, 64, 12288, 64, 64, sms=8) == 8  # a device with fewer SMs
    assert one_wave_slices(64, 64, 12288 + 8, 64, 64) == 1  # 12296 = 8 x 1537: no count divides it in 8s
    fam, swap = FAMILIES["splitk_tma"], FAMILIES["splitk_tma_swap"]
    k = fam.parse("tile_m=64:tile_n=128:cluster_m=1:cluster_n=1:slices=-1")
    p = Problem(Shape(2048, 64, 8192))
    assert fam.opts(k, p)[3] == one_wave_slices(2048, 64, 8192, 64, 128) == 4  # 32 x 1 tiles
    assert swap.opts(k, p)[3] == one_wave_slices(64, 2048, 8192, 64, 128) == 8  # the transposed problem: 1 x 16
    assert fam.opts(k, p, sms=64)[3] == 2
    assert fam.supports(k, p) and fam.render(k) == fam.render(
        fam.parse("tile_m=64:tile_n=128:cluster_m=1:cluster_n=1:slices=4"))
    hop = FAMILIES["hopper"]
    with pytest.raises(KnobError, match="splitk only"):
        hop.parse("scheduler=streamk,sk_splits=-1")
    limited = hop.parse("scheduler=splitk,sk_splits=-1,schedule=pingpong,tile_m=64,tile_n=64,sms=66")
    assert hop.opts(limited, Problem(Shape(256, 256, 16384)))[3] == 4  # 16 tiles on the 66 SMs it may use


@needs_nvcc
def test_hgemm_run_rejects_bad_arguments_before_touching_the_gpu(cache):
    """Argument checks come first: bad sizes, layouts, options or workspace are error codes."""
    res = _build_default("splitk")
    assert res.ok, res.log[-3000:]
    lib = ctypes.CDLL(res.lib_path)
    lib.hgemm_run.restype = ctypes.c_int
    lib.hgemm_run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 4 + [
        ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    p = ctypes.c_void_p(4096)  # never dereferenced: every call below must fail its checks first
    run = lambda m, n, k, lay, opts, ws=None, wsb=0: lib.hgemm_run(
        p, p, p, m, n, k, lay, (ctypes.c_int * 3)(*opts), len(opts), ws, wsb, None)
    assert run(0, 8, 8, 0, [1, 0]) == 1  # HGEMM_ERR_ARGS
    assert run(8, 8, 8, 7, [1, 0]) == 2  # HGEMM_ERR_LAYOUT
    assert run(8, 8, 8, 0, [65, 0]) == 6  # HGEMM_ERR_OPTS: more splits than MAX_SPLITS
    assert run(8, 8, 8, 0, [1, 4]) == 6  # unknown reduction mode
    assert run(8, 8, 8, 0, [1, 3, 2]) == 6  # spread is 0 or 1
    assert run(256, 128, 16384, 0, [16, 2]) == 4  # HGEMM_ERR_WORKSPACE: split needs one


@needs_nvcc
def test_compile_timeout_is_a_result_and_not_cached(cache):
    """A compile that runs out of time is ok=False with a reason, and is retried next time."""
    src = 'extern "C" __global__ void slow_to_build(float* x) { x[0] = 1.f; }\n'
    res = build.build(src, timeout_s=0.001)
    assert not res.ok and "timed out" in res.log
    again = build.build(src)
    assert again.ok and not again.cached


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_space_enumerates_only_valid_configs(name):
    """The search's candidate list holds valid configs only, the default among them."""
    from kernels_search import space

    fam = FAMILIES[name]
    comp = space.compile_configs(fam)
    assert fam.defaults() in comp
    assert all(fam.is_valid(k) for k in comp)
    import itertools

    some = list(itertools.islice(space.configs(fam), 2000))
    assert len(some) >= 2 and all(fam.is_valid(k) for k in some[:200])
    assert len(comp) >= 2
    n_raw = 1
    for k in fam.knobs:
        n_raw *= 1 if k.runtime else len(k.values)
    assert len(comp) < n_raw, "validity rules reject nothing: suspicious"
    assert len(space.sample(fam, 5, seed=1, runtime=False)) == 5


@needs_nvcc
def test_external_cu_file_goes_through_the_same_pipeline(cache, tmp_path):
    """A .cu with our C ABI becomes a Method named cu:<stem>, built and cached like a family."""
    from kernels_search.raw_source import file_method

    f = tmp_path / "mykernel.cu"
    f.write_text(
        "#include <cuda_runtime.h>\n#include <stddef.h>\n"
        'extern "C" size_t hgemm_workspace(int, int, int, int, const int*, int) { return 0; }\n'
        'extern "C" int hgemm_run(const void*, const void*, void*, int, int, int, int, const int*,'
        " int, void*, size_t, cudaStream_t) { return 3; }\n"
    )
    m = file_method(f)
    assert m.name == "cu:mykernel" and m.config == {} and len(m.source_hash) == 64
    res = m.build()
    assert res.ok, res.log[-2000:]
    assert hasattr(ctypes.CDLL(res.lib_path), "hgemm_run")


@pytest.mark.parametrize("persistent", [False, True])
def test_triton_kernels_compile_for_sm90_with_wgmma_and_pipelining(persistent):
    """Ahead-of-time compile (no GPU needed) for sm_90 with the divisibility hints the JIT adds
    for aligned shapes: the tile loop must use WGMMA and a multi-stage cp.async pipeline."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels_search import triton_kernels as tk

    fn = tk.gemm_persistent_kernel if persistent else tk.gemm_kernel
    consts = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
    consts.update(NUM_PROGRAMS=132) if persistent else consts.update(SPLIT_K=1)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"}
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    sig.update({n: "constexpr" for n in ("stride_ak", "stride_bn", "stride_cn")})
    sig = {n: sig[n] for n in fn.arg_names if n in sig} | {n: "constexpr" for n in consts}
    consts.update(stride_ak=1, stride_bn=1, stride_cn=1)  # "nn": unit inner strides
    div16 = [i for i, n in enumerate(fn.arg_names) if sig.get(n) in ("*fp16", "i32")]
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs={(i,): [["tt.divisibility", 16]] for i in div16})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
    ptx = k.asm["ptx"]
    assert "wgmma.mma_async" in ptx
    assert ptx.count("cp.async.commit_group") >= 2 and k.metadata.shared >= 2 * (128 + 128) * 64 * 2


@pytest.mark.parametrize("b_kn, epi_split", [(1, 1), (0, 2)])
def test_triton_tma_kernel_compiles_for_sm90_with_tma_wgmma_and_one_pipelined_loop(b_kn, epi_split):
    """The tma=1 kernel for sm_90, both B layouts: TMA loads and stores, WGMMA, and the tile and
    k loops flattened into one software-pipelined loop (loads issued inside it for later
    iterations), so the next tile's loads can overlap this tile's store."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels_search import triton_kernels as tk

    bm, bn, bk = 128, 128, 64
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, NUM_PROGRAMS=132, B_KN=b_kn,
                  EPI_SPLIT=epi_split)
    b_block = f"[{bk},{bn}]" if b_kn else f"[{bn},{bk}]"
    sig = {"a_desc": f"tensordesc<fp16[{bm},{bk}]>", "b_desc": f"tensordesc<fp16{b_block}>",
           "c_desc": f"tensordesc<fp16[{bm},{bn // epi_split}]>", "M": "i32", "N": "i32", "K": "i32"}
    sig |= {n: "constexpr" for n in consts}
    k = triton.compile(ASTSource(fn=tk.gemm_tma_kernel, signature=sig, constexprs=consts, attrs={}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
    ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    assert ttgir.count("async_tma_copy_local_to_global") >= epi_split
    loop = ttgir[ttgir.rindex("scf.for"):]  # the pipelined main loop: it issues the TMA loads
    assert "async_tma_copy_global_to_local" in loop and "async_tma_copy_local_to_global" in loop


def test_triton_refuses_pointer_tiles_that_spill_and_its_default_does_not():
    """The pointer kernels (tma=0) keep an address per A and B element of a k-tile beside the accumulators: past
    128 of them a thread the family refuses the config (the default tile takes 8 warps for it); TMA configs and
    every preset pass."""
    from kernels_search.families.triton_gemm import pointer_kernel_registers

    fam = FAMILIES["triton"]
    assert fam.parse(None)["num_warps"] == 8 and pointer_kernel_registers(128, 128, 64, 8) == 128
    with pytest.raises(KnobError, match="spills on sm_90"):
        fam.parse("block_m=128,block_n=128,num_warps=4")
    with pytest.raises(KnobError, match="spills on sm_90"):
        fam.parse("block_m=128,block_n=256,num_warps=8,persistent=1")  # the persistent pointer kernel too
    assert fam.is_valid(fam.parse("block_m=128,block_n=256,num_warps=8,persistent=1,tma=1"))
    assert all(fam.is_valid(k) for k in fam.preset_configs())


def _triton_resource_usage(triton, cubin: bytes) -> str | None:
    """cuobjdump's resource usage of a cubin Triton compiled (LOCAL, STACK, registers); None where Triton's
    wheel bundles no cuobjdump."""
    import subprocess
    import tempfile

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not cuobjdump.exists():
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout


@pytest.mark.parametrize("bm, bn, bk, warps", [(32, 64, 64, 4), (64, 64, 64, 4), (64, 128, 64, 4), (128, 64, 64, 4),
                                               (128, 128, 64, 4), (128, 128, 64, 8), (64, 64, 128, 4),
                                               (128, 128, 32, 4), (256, 128, 64, 8), (16, 64, 64, 4)])
def test_triton_pointer_register_rule_matches_ptxas(bm, bn, bk, warps):
    """The family's rule against ptxas on sm_90 (Triton's own): a config it refuses uses a stack (spills), one it
    accepts does not."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels_search import triton_kernels as tk
    from kernels_search.families.triton_gemm import POINTER_KERNEL_REGISTERS, pointer_kernel_registers

    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, SPLIT_K=1)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    sig |= {f"stride_{s}": "i32" for s in ("am", "ak", "bk", "bn", "cm", "cn")}
    sig |= {n: "constexpr" for n in consts}
    k = triton.compile(ASTSource(fn=tk.gemm_kernel, signature=sig, constexprs=consts, attrs={}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 3})
    usage = _triton_resource_usage(triton, k.asm["cubin"])
    if usage is None:
        pytest.skip("Triton's cuobjdump is not bundled here")
    spills = "STACK:0" not in usage
    assert spills == (pointer_kernel_registers(bm, bn, bk, warps) > POINTER_KERNEL_REGISTERS), usage


def _compile_in_launch_sum_kernel(fn, split_arg: str, bm: int, bn: int, warps: int, unsplit: bool,
                                  tma_b_kn: int | None = None):
    """``fn`` (a kernel with triton_splitk's argument list, ``split_arg`` its run-time split argument)
    compiled for sm_90 as the JIT specializes a "tn" launch: unit K strides constant, the other integers
    divisible by 16, and a split of 1 constant where ``unsplit``. With ``tma_b_kn`` (0 or 1), triton_splitk's
    tma=1: A and B are TMA descriptors (B's block K x N where 1). Returns (Triton, the compiled kernel)."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    bk = 64
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, stride_ak=1, stride_bk=1, stride_cn=1)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "ws_ptr": "*fp32", "count_ptr": "*i32"}
    sig |= {n: "i32" for n in ("M", "N", "K", split_arg, "dp_tiles", "stride_am", "stride_bn", "stride_cm")}
    if tma_b_kn is not None:
        consts |= dict(TMA=True, B_KN=bool(tma_b_kn))
        b_block = f"[{bk},{bn}]" if tma_b_kn else f"[{bn},{bk}]"
        sig |= {"a_ptr": f"tensordesc<fp16[{bm},{bk}]>", "b_ptr": f"tensordesc<fp16{b_block}>"}
    if unsplit:
        sig[split_arg] = "constexpr"
        consts[split_arg] = 1
    sig = {n: sig.get(n, "constexpr") for n in fn.arg_names}
    div16 = [i for i, n in enumerate(fn.arg_names)
             if sig[n] != "constexpr" and not sig[n].startswith("tensordesc") and n not in (split_arg, "dp_tiles")]
    return triton, triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts,
                                            attrs={(i,): [["tt.divisibility", 16]] for i in div16}),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 3})


@pytest.mark.parametrize("kernel, split_arg, bm, bn, split, warps", [
    ("triton_splitk_kernel.splitk_fixup_kernel", "split_k", 16, 64, 16, 4),
    ("triton_splitk_kernel.splitk_fixup_kernel", "split_k", 32, 64, 8, 4),
    ("triton_splitk_kernel.splitk_fixup_kernel", "split_k", 64, 64, 4, 4),
    ("triton_splitk_kernel.splitk_fixup_kernel", "split_k", 64, 128, 2, 8),
    ("triton_splitk_kernel.splitk_fixup_kernel", "split_k", 128, 128, 2, 8),
    ("triton_splitk_kernel.splitk_fixup_kernel", "split_k", 32, 64, 1, 4),
    ("triton_streamk_kernel.streamk_kernel", "iters_per", 16, 64, 2, 4),
    ("triton_streamk_kernel.streamk_kernel", "iters_per", 64, 64, 2, 4),
    ("triton_streamk_kernel.streamk_kernel", "iters_per", 128, 128, 2, 8),
])
def test_in_launch_sum_kernels_compile_for_sm90_without_spills_and_one_thread_moves_the_counter(
        kernel, split_arg, bm, bn, split, warps):
    """``triton_splitk`` and ``triton_streamk`` for sm_90 (Triton's own ptxas): a cp.async pipeline into
    WGMMA (mma.sync under 64 rows), also inside stream-K's run loop; no local memory; the partial's fp32
    atomic adds (16-byte vectors), then a CTA barrier, then one thread's acq_rel gpu-scope atomic on the
    tile's counter (CUTLASS's semaphore order); the last program's read of the sum and its zeroing
    separated by a CTA barrier; no counter at all without a split."""
    pytest.importorskip("triton")  # before the kernel module, which imports it
    import importlib
    import re

    module, name = kernel.split(".")
    fn = getattr(importlib.import_module(f"kernels_search.{module}"), name)
    triton, k = _compile_in_launch_sum_kernel(fn, split_arg, bm, bn, warps, unsplit=split == 1)
    ptx = k.asm["ptx"]
    assert ptx.count("cp.async.commit_group") >= 2 and ("wgmma.mma_async" if bm >= 64 else "mma.sync") in ptx
    _assert_in_launch_sum_order(ptx, split)
    usage = _triton_resource_usage(triton, k.asm["cubin"])
    if usage is not None:
        assert "LOCAL:0" in usage and "STACK:0" in usage, usage


def _assert_in_launch_sum_order(ptx: str, split: int) -> None:
    """The partial's fp32 atomic adds, a CTA barrier, one thread's acq_rel counter atomic; the last program's
    read of the sum and its zeroing separated by a CTA barrier; no counter at all without a split."""
    import re

    atoms = re.findall(r"@%p\d+ atom\.global\.gpu\.acq_rel\.add\.u32", ptx)
    assert len(atoms) == (1 if split > 1 else 0)
    if split > 1:
        before = ptx[:ptx.index("atom.global.gpu.acq_rel")]
        adds = [m.start() for m in re.finditer(r"(red|atom)\.global\.gpu(\.relaxed)?\.add\.v4\.f32", before)]
        assert adds and before.rstrip().rfind("bar.sync") > adds[-1]  # adds, barrier, counter
        # the last program reads the sum (.cg loads) in another thread layout than the adds' and zeroes it
        # in the adds' layout: a CTA barrier between its last read and its first zeroing store
        after = ptx[ptx.index("atom.global.gpu.acq_rel"):]
        reads = [m.start() for m in re.finditer(r"ld\.global\.cg\.v4", after)]
        zeros = [m.start() for m in re.finditer(r"st\.global\.cg\.v4", after)]
        assert reads and zeros and reads[-1] < zeros[0]
        assert "bar.sync" in after[reads[-1]:zeros[0]]  # read, barrier, zero


@pytest.mark.parametrize("bm, bn, b_kn, warps", [(64, 64, 0, 4), (64, 64, 1, 4), (128, 128, 0, 8), (16, 64, 0, 4)])
def test_triton_splitk_tma_compiles_for_sm90_with_tma_loads_and_the_same_sum(bm, bn, b_kn, warps):
    """``triton_splitk`` tma=1 for sm_90, both B layouts: A and B by TMA (bulk tensor copies) into WGMMA
    (mma.sync under 64 rows), no local memory, and the in-launch sum in the pointer kernel's order."""
    pytest.importorskip("triton")  # before the kernel module, which imports it
    from kernels_search.triton_splitk_kernel import splitk_fixup_kernel as fn

    triton, k = _compile_in_launch_sum_kernel(fn, "split_k", bm, bn, warps, unsplit=False, tma_b_kn=b_kn)
    ptx = k.asm["ptx"]
    assert "cp.async.bulk.tensor" in ptx and ("wgmma.mma_async" if bm >= 64 else "mma.sync") in ptx
    assert "cp.async.commit_group" not in ptx  # no pointer loads left
    _assert_in_launch_sum_order(ptx, split=2)
    usage = _triton_resource_usage(triton, k.asm["cubin"])
    if usage is not None:
        assert "LOCAL:0" in usage and "STACK:0" in usage, usage


def test_triton_streamk_gives_every_program_an_equal_run():
    """partition: whole waves of tiles first (as many as fit sms x per_sm programs, a multiple of it),
    then one run per program over the tiles left, all but the last of one length, MIN_K_TILES k-tiles
    a run at least; whole tiles a run where K is shallow; the parts a tile is summed from are the runs
    that touch it (1 where one run holds it); every tile's k-tiles covered once."""
    from kernels_search.families.triton_splitk import MIN_K_TILES, SPLIT_MIN_K_TILES
    from kernels_search.families.triton_streamk import partition

    assert partition(72, 56, 132) == (131, 31, 3, 0)  # 8_4608_3584 at 64-column tiles: 131 programs, not 72
    assert partition(144, 48, 132) == (132, 5, 11, 132)  # a wave whole, the 12 tiles left cut into 132 runs
    assert partition(512, 192, 132, 2) == (264, 192, 1, 512)  # 1024_2048_12288 at 64 x 64: two waves, whole
    assert partition(300, 192, 132, 2) == (264, 27, 8, 264)  # a wave whole, the 36 tiles left cut into 256 runs
    assert partition(264, 64, 132, 2) == (264, 64, 1, 264)  # whole waves only: no runs
    assert partition(16, 4, 132) == (16, 4, 1, 0)  # shallow K: a tile a program, no tile cut
    for tiles in (1, 3, 7, 72, 131, 132, 144, 264, 500):
        for k_tiles in (3, 15, 16, 17, 56, 256):
            for per_sm in (1, 2, 4):
                cap = 132 * per_sm
                programs, per, parts, dp = partition(tiles, k_tiles, 132, per_sm)
                if tiles < cap:
                    assert dp == 0
                else:
                    assert dp == tiles or (dp % cap == 0 and 0 < 2 * (tiles - dp) < cap)
                assert programs <= cap
                rest = tiles - dp
                iters = rest * k_tiles
                if dp:
                    assert programs == cap
                if rest == 0:
                    continue
                runs = -(-iters // per)
                assert runs <= programs and (runs - 1) * per < iters <= runs * per
                assert per >= min(MIN_K_TILES, iters) or runs == 1
                if k_tiles < SPLIT_MIN_K_TILES:
                    assert per % k_tiles == 0 and parts == 1
                cut = [sum(1 for p in range(runs) if p * per < (t + 1) * k_tiles and (p + 1) * per > t * k_tiles)
                       for t in range(rest)]
                assert max(cut) == parts, (tiles, k_tiles, per_sm)


def test_in_launch_sum_workspaces_have_the_kernels_dtypes_even_where_no_tile_is_cut():
    """Triton compiles a kernel per argument dtype, and ``triton_streamk`` compiles its sum branch even
    where no run reaches it: the workspace and counters passed must be fp32 and int32 in every plan,
    also where the plan cuts no tile (shallow K, one tile a run)."""
    import torch

    from kernels_search.triton_method import splitk_plan, streamk_plan, workspace

    for name, make_plan, shape, cut in [("triton_streamk", streamk_plan, (64, 64, 64), False),
                                        ("triton_streamk", streamk_plan, (16, 4096, 4096), True),
                                        ("triton_splitk", splitk_plan, (64, 64, 64), False),
                                        ("triton_splitk", splitk_plan, (64, 64, 8192), True)]:
        p = make_plan(Problem(Shape(*shape), "tn"), FAMILIES[name].parse(""), num_sms=132)
        assert (p.split > 1) == cut, (name, shape, p.split)
        ws, counts = workspace(p, "cpu")
        assert ws.dtype == torch.float32 and counts.dtype == torch.int32, (name, shape)
        assert not ws.any() and not counts.any()


def test_triton_splitk_fills_a_wave_only_where_k_is_deep():
    """split_k=0: no split under SPLIT_MIN_K_TILES k-tiles (the reduction would cost more than it saves),
    else tiles x slices within one wave, two k-tiles a slice at least; on deep K up to RESIDENT programs a
    SM while every slice keeps DEEP_K_TILES k-tiles; no empty slice."""
    from kernels_search.families.triton_splitk import DEEP_K_TILES, RESIDENT, SPLIT_MIN_K_TILES, auto_split

    assert auto_split(1, SPLIT_MIN_K_TILES - 1, 132) == 1
    assert auto_split(1, 256, 132) == 128  # 64_64_16384 at 64 x 64: K spread over a wave
    assert auto_split(16, 64, 132) == 8  # 256_256_4096 at 64 x 64
    assert auto_split(64, 256, 132) == 8  # 512_512_16384: past one wave, 32 k-tiles a slice
    assert auto_split(32, 256, 132) == 16  # 128_1024_16384
    assert auto_split(200, 256, 132) == 1  # the tiles alone fill the device
    assert auto_split(100, 256, 132) == 1  # ... or more than half of it: no deep-K split past one wave
    for tiles in (1, 3, 7, 16, 40, 64, 130, 300, 600):
        for k_tiles in (16, 17, 33, 100, 256, 448):
            s = auto_split(tiles, k_tiles, 132)
            per = -(-k_tiles // s)
            assert per >= 2 and (s - 1) * per < k_tiles, (tiles, k_tiles, s)
            assert (s == 1 or tiles * s <= 132
                    or (tiles * s <= RESIDENT * 132 and per >= DEEP_K_TILES)), (tiles, k_tiles, s)


def test_the_in_launch_sum_families_hash_their_launch_rules_with_the_kernel():
    """A family with its own launch plan (``split_k=0``'s ``auto_split``, stream-K's ``partition``) changes what
    a config launches without touching its kernel file: its source hash covers the rule's text too, so evidence
    measured under an old rule stops counting. The plain ``triton`` family's hash stays its kernel's (the
    packaged evidence is keyed by it)."""
    import hashlib

    from kernels_search import make_method
    from kernels_search.triton_method import launch_rules_text

    for name, rules in [("triton_splitk", ("def auto_split", "DEEP_K_TILES =", "RESIDENT =", "def splitk_plan")),
                        ("triton_streamk", ("def partition", "def streamk_plan"))]:
        fam, m = FAMILIES[name], make_method(name, "")
        text = launch_rules_text(fam)
        assert all(r in text for r in rules), (name, [r for r in rules if r not in text])
        assert m.source_hash == hashlib.sha256((fam.render(m.knobs) + text).encode()).hexdigest()
        assert m.source_hash != hashlib.sha256(fam.render(m.knobs).encode()).hexdigest()
    plain = make_method("triton", "")
    assert launch_rules_text(FAMILIES["triton"]) == ""
    assert plain.source_hash == hashlib.sha256(FAMILIES["triton"].render(plain.knobs).encode()).hexdigest()


_INTERP_SCRIPT = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
from harness.problem import Problem, Shape
from kernels_search.families import ALL
from kernels_search.triton_method import plan, launch
fam, bad = ALL["triton"], []
RAGGED = [(17, 33, 65), (1, 1, 1), (40, 24, 100), (70, 50, 33)]
TMA_OK = [(17, 24, 40), (1, 8, 8), (70, 48, 56), (40, 40, 200)]  # TMA rows: K, N multiples of 8
for spec, shapes in [("block_m=32,block_n=32,block_k=16", RAGGED),
                     ("block_m=16,block_n=32,block_k=16,split_k=4", RAGGED),
                     ("block_m=32,block_n=16,block_k=32,persistent=1,group_m=4", RAGGED),
                     ("block_m=32,block_n=16,block_k=16,persistent=1,tma=1", TMA_OK),
                     ("block_m=16,block_n=32,block_k=32,persistent=1,tma=1,epi_split=2,group_m=4", TMA_OK),
                     ("block_m=16,block_n=16,block_k=16,persistent=1,tma=1,per_sm=2", TMA_OK)]:
    k = fam.parse(spec)
    for s in shapes:
        for lay in ("nn", "tn"):
            pr = Problem(Shape(*s), lay)
            assert fam.supports(k, pr), (spec, s)
            g = torch.Generator().manual_seed(0)
            a = (torch.rand(pr.m, pr.k, generator=g) - 0.5).half()
            b = (torch.rand(*pr.b_shape, generator=g) - 0.5).half()
            c = torch.full((pr.m, pr.n), float("nan"), dtype=torch.float16)
            p = plan(pr, k, num_sms=3)
            launch(p, a, b, c, torch.empty((pr.m, pr.n)) if p.split > 1 else None)
            ref = a.float() @ (b.float() if lay == "nn" else b.float().t())
            err = (c.float() - ref).abs().max().item()
            if torch.isnan(c).any() or err > 2e-3 * ref.abs().max().item() + 1e-3:
                bad.append((spec, s, lay, err))
# triton_splitk (slices) and triton_streamk (runs that end inside tiles, whole tiles a run where K is shallow,
# a ragged last run), each with its own plan; each config twice on one workspace: the accumulators and
# counters must be back at zero after a call
from kernels_search.triton_method import splitk_plan, streamk_plan, workspace
# each split-K config also with tma=1, on shapes whose K and N are multiples of 8 (TMA row strides)
SPLITK_SPECS = ["block_m=16,block_n=32,block_k=16", "block_m=16,block_n=32,block_k=16,split_k=4",
                "block_m=32,block_n=16,block_k=32,split_k=64"]
for name, make_plan, cases in [
        ("triton_splitk", splitk_plan, [(spec, 12, RAGGED[:1] + [(70, 50, 330)]) for spec in SPLITK_SPECS]
                                     + [(spec + ",tma=1", 12, [(17, 24, 40), (70, 48, 336)]) for spec in SPLITK_SPECS]),
        ("triton_streamk", streamk_plan, [(spec, sms, [(70, 50, 330), (17, 33, 65), (40, 24, 1000)]) for spec, sms in
                                          [("block_m=16,block_n=32,block_k=16", 5),
                                           ("block_m=32,block_n=16,block_k=16,per_sm=2", 7),
                                           ("block_m=16,block_n=16,block_k=32", 64),
                                           ("block_m=16,block_n=16,block_k=32,per_sm=1", 5)]])]:
    for spec, sms, shapes in cases:
        k = ALL[name].parse(spec)
        for s in shapes:
            for lay in ("nn", "tn"):
                pr = Problem(Shape(*s), lay)
                g = torch.Generator().manual_seed(0)
                a = (torch.rand(pr.m, pr.k, generator=g) - 0.5).half()
                b = (torch.rand(*pr.b_shape, generator=g) - 0.5).half()
                p = make_plan(pr, k, num_sms=sms)
                ws, counts = workspace(p, "cpu")
                ref = a.float() @ (b.float() if lay == "nn" else b.float().t())
                for rep in range(2):
                    c = torch.full((pr.m, pr.n), float("nan"), dtype=torch.float16)
                    launch(p, a, b, c, ws, counts)
                    err = (c.float() - ref).abs().max().item()
                    if torch.isnan(c).any() or err > 2e-3 * ref.abs().max().item() + 1e-3:
                        bad.append((name, spec, s, lay, rep, p.grid, p.split, err))
                if counts is not None and (counts.any() or ws.any()):
                    bad.append((name, spec, s, lay, "accumulator or counters left above zero"))
print(bad)
sys.exit(1 if bad else 0)
"""


def test_triton_kernels_are_correct_in_the_interpreter():
    """The Triton families' exact launch code (plan + launch) run by Triton's CPU interpreter on
    ragged shapes, both layouts, split-K, persistent and TMA (ragged M, clipped edge tiles, split
    epilogue), and the in-launch reductions of ``triton_splitk`` (slices) and ``triton_streamk`` (runs
    cut inside tiles, and whole tiles before the runs in one launch) on two calls in a row: masks,
    strides, descriptors, raster, and the accumulators and counters left at zero are right."""
    pytest.importorskip("triton")
    import subprocess
    import sys

    import numpy

    if int(numpy.__version__.split(".")[0]) >= 2:
        pytest.skip("Triton 3.6's interpreter needs numpy < 2 for loop bounds computed from arguments")
    out = subprocess.run([sys.executable, "-c", _INTERP_SCRIPT], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


@needs_nvcc
@pytest.mark.parametrize(
    "spec",
    [
        "splitk:bm=128,bn=128,bk=32,warps_m=2,warps_n=2,stages=3",  # 64x64 warp tile: 128 accumulators
        "splitk:bm=32,bn=64,bk=128,warps_m=1,warps_n=2,stages=2",  # deep k-tile
        "smalltile:bm=16,bn=16,bk=32,warps_m=1,warps_n=1",  # smallest tile, one warp
    ],
)
def test_gpu_tested_configs_compile_without_spills(cache, spec):
    """The non-default configs the GPU tests run also build spill-free (fallback path included)."""
    from kernels_search import make_method

    res = make_method(*spec.split(":", 1)).build()
    assert res.ok, res.log[-3000:]
    assert res.spill_bytes == 0 and res.resources["max_stack_bytes"] == 0, res.kernels


@pytest.mark.parametrize("level, expect", [(None, 10), ("0", 0), ("5", 5)])
def test_builds_run_at_lower_cpu_priority(cache, tmp_path, monkeypatch, level, expect):
    """A search compiles on every core of the host that also times kernels: nvcc runs under
    ``nice`` (HGEMM_BUILD_NICE, default 10; 0 = unchanged). A stand-in nvcc records its niceness."""
    import os
    import stat

    seen = tmp_path / "nice.txt"
    fake = tmp_path / "nvcc"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = "--version" ]; then echo "fake nvcc 0.0"; exit 0; fi\n'
        f'awk \'{{print $19}}\' /proc/self/stat > "{seen}"\n'
        'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then : > "$2"; fi; shift; done\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("HGEMM_NVCC", str(fake))
    if level is None:
        monkeypatch.delenv("HGEMM_BUILD_NICE", raising=False)
    else:
        monkeypatch.setenv("HGEMM_BUILD_NICE", level)
    base = os.nice(0)
    build.build(f"// niceness test {level}\n", use_cache=False)
    assert int(seen.read_text()) == min(19, base + expect)


@needs_nvcc
@pytest.mark.parametrize("spec", ["kslices=2", "kslices=4,bk=64", "bm=128,bn=64,kslices=2"])
def test_splitk_kslices_compile_without_spills(cache, spec):
    """K-sliced warp groups (2 or 4 per CTA) build for sm_90a without spills; the extra groups
    park their tiles in shared memory (the block is kslices x the warp grid)."""
    fam = FAMILIES["splitk"]
    k = fam.parse(spec)
    res = build_config(fam, k)
    assert res.ok, res.log[-3000:]
    assert res.kernels and res.spill_bytes == 0, res.kernels
    assert "#define MS_KSLICES " + str(k["kslices"]) in fam.render(k)


@needs_nvcc
def test_a_build_whose_cache_entry_cannot_be_read_back_is_not_ok(cache, monkeypatch):
    """A published entry that does not read back must not come out as ok with no library path
    (ctypes would load the main program and fail with an undefined symbol far from the cause)."""
    monkeypatch.setattr(build, "_load_cached", lambda entry: (None, "meta.json: OSError: test"))
    res = build.build('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n')
    assert not res.ok and res.lib_path is None
    assert "unreadable right after it was published (meta.json: OSError: test)" in res.log


@needs_nvcc
@pytest.mark.parametrize("damage", ["no library", "corrupt meta"])
def test_an_unusable_cache_entry_is_set_aside_and_rebuilt(cache, damage):
    """An entry that exists but cannot be used (its library gone, its meta.json cut short) is
    moved aside with the reason, and the fresh build takes its place. Before, the publish rename
    failed on the non-empty directory and every build of that key came out failed (H200 search,
    2026-11-30: two CUTLASS configs compiled twice each, then failed)."""
    src = f'// {damage}\nextern "C" __global__ void k(float* x) {{ x[threadIdx.x] = 2.f; }}\n'
    first = build.build(src)
    assert first.ok and not first.cached
    entry = Path(first.lib_path).parent
    if damage == "no library":
        (entry / build.LIB).unlink()
    else:
        (entry / build.META).write_text('{"ok": true, "key"')
    again = build.build(src)
    assert again.ok and not again.cached and again.lib_path == first.lib_path
    assert Path(again.lib_path).is_file()
    stale = list(entry.parent.parent.glob(f".stale-{entry.name[:12]}-*/why.txt"))
    assert len(stale) == 1
    assert ("kernel.so missing" if damage == "no library" else "meta.json: JSONDecodeError") in stale[0].read_text()
    assert build.build(src).cached


def test_gemv_evict_last_load_is_substituted_and_leaves_other_sources_alone():
    """pf=4 (L2 evict-last policy) replaces the template's no-hint weight load once; pf 0-2 render
    the template's own loads (their build-cache entries stay)."""
    from kernels_search.families import gemv as gemv_mod

    fam = FAMILIES["gemv"]
    src = {pf: fam.render(fam.parse(f"pf={pf}")) for pf in (0, 1, 2, 4)}
    assert src[0].count(gemv_mod.NO_HINT_LOAD) == 1 and all(gemv_mod.NO_HINT_LOAD in src[pf] for pf in (1, 2))
    assert "createpolicy.fractional.L2::evict_last" in src[4] and '"l"(pol)' in src[4]
    assert gemv_mod.NO_HINT_LOAD not in src[4]
    for pf in (0, 1, 2):
        assert "createpolicy" not in src[pf]
    with pytest.raises(KnobError):
        fam.parse("pf=3")


def test_splitk_tma_swap_narrow_tiles_along_m():
    """tile_n 16 and 32 (along M in the transposed problem: decode and small-batch M) are valid with
    standard WGMMA widths (no extended-shapes flag, so no new build flags), and 2 slices are taken
    where K cuts into two multiples of 8, declined where it does not."""
    fam = FAMILIES["splitk_tma_swap"]
    for tn in (16, 32):
        k = fam.parse(f"tile_n={tn},cluster_m=2,cluster_n=1,slices=2")
        assert fam.check(k) == "" and not any("EXTENDED" in f for f in fam.extra_flags(k))
        assert fam.supports(k, Problem(Shape(16, 6144, 4096)))
        assert not fam.supports(k, Problem(Shape(16, 6144, 4100)))  # 4100 / 2 = 2050, not a multiple of 8
