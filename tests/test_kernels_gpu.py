"""GPU tests of the kernel families (run on the H200; skipped where CUDA is absent).

Each family config is checked against an fp32 torch reference on smoke-like and ragged shapes
(M, N, K not multiples of the tile, K not a multiple of 8 where the family serves it), in both B
layouts. Each call writes into a C that sits between guard bands and starts NaN-filled, so an
unwritten element or an out-of-bounds write fails the test. Calls are repeated (split-K arrival
counters and the atomic accumulator must be left at zero by every call) and captured in a CUDA
graph whose replay must track new input values (no caching, no host work in the call).
"""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

from harness.method import PrepareContext  # noqa: E402
from harness.problem import Problem, Shape  # noqa: E402
from kernels_search import make_method  # noqa: E402
from conftest import study_specs  # noqa: E402

pytestmark = pytest.mark.gpu

GUARD = 4096  # elements of guard band each side of C
SENTINEL = 1234.0


def _inputs(p: Problem, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.rand(p.m, p.k, device="cuda", generator=g, dtype=torch.float32).sub_(0.5).half()
    b = torch.rand(*p.b_shape, device="cuda", generator=g, dtype=torch.float32).sub_(0.5).half()
    buf = torch.full((GUARD + p.m * p.n + GUARD,), SENTINEL, device="cuda", dtype=torch.float16)
    c = buf[GUARD : GUARD + p.m * p.n].view(p.m, p.n)
    c.fill_(float("nan"))
    return a, b, c, buf


def _reference(p: Problem, a, b):
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference
    bk = b.float() if p.layout == "nn" else b.float().t()
    return a.float() @ bk


def _check(p: Problem, a, b, c, buf):
    ref = _reference(p, a, b)
    out = c.float()
    assert not torch.isnan(out).any(), "unwritten (NaN) elements in C"
    assert torch.all(buf[:GUARD] == SENTINEL) and torch.all(buf[GUARD + p.m * p.n :] == SENTINEL), (
        "write outside C"
    )
    # fp32 accumulation, one fp16 rounding of the result: error ~ 2^-11 of |C|. fp16
    # accumulation over large K would be off by far more than this bound.
    tol = 2e-3 * ref.abs().max().item() + 1e-3
    err = (out - ref).abs().max().item()
    assert err <= tol, f"{p}: max abs error {err:.4g} > {tol:.4g}"


def _ctx(inputs):
    return PrepareContext(device="cuda", inputs=inputs[:3], time_candidates=lambda fns, **kw: [0.0] * len(fns))


def _run_case(spec: str, p: Problem, calls: int = 3):
    (family, _, args) = spec.partition(":")
    m = make_method(family, args or None)
    sup = m.supports(p, "cuda")
    if not sup:
        return sup
    ins = _inputs(p)
    prep = m.prepare(p, _ctx(ins))
    for i in range(calls):  # repeated calls: leftover split-K state would corrupt the 2nd/3rd
        a, b, c, buf = _inputs(p, seed=i)
        prep.fn(a, b, c)
        torch.cuda.synchronize()
        _check(p, a, b, c, buf)
    return sup


def _graph_case(spec: str, p: Problem):
    family, _, args = spec.partition(":")
    m = make_method(family, args or None)
    a, b, c, buf = _inputs(p)
    prep = m.prepare(p, _ctx((a, b, c)))
    assert prep.capturable
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        prep.fn(a, b, c)  # warm-up outside capture (one-time attribute calls)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(3):
            prep.fn(a, b, c)
    for seed in (7, 8):  # new values in the same buffers must change the output
        a2, b2, _, _ = _inputs(p, seed=seed)
        a.copy_(a2)
        b.copy_(b2)
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        _check(p, a, b, c, buf)


RAGGED = ["17_33_65", "100_200_300", "1_1_1", "33_47_129", "64_64_64", "256_256_256"]
SPLITK_SHAPES = RAGGED + ["256_128_16384", "64_1024_16384", "1024_1024_1024", "130_66_4097"]


def _shape(s: str) -> Shape:
    return Shape(*map(int, s.split("_")))


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", SPLITK_SHAPES)
@pytest.mark.parametrize("opts", ["splits=0", "splits=1", "splits=16,reduce=0", "splits=16,reduce=1",
                                  "splits=16,reduce=2", "splits=16,reduce=3", "splits=4,reduce=3",
                                  "splits=0,reduce=3,spread=1", "splits=1,kslices=2",
                                  "splits=16,reduce=0,kslices=2", "splits=16,reduce=1,kslices=4"])
def test_splitk_matches_reference(shape, layout, opts):
    """Every reduction mode and split count gives the fp32-accumulated answer on any shape."""
    assert _run_case(f"splitk:{opts}", Problem(_shape(shape), layout))


@pytest.mark.parametrize("cfg", ["bm=128,bn=128,bk=32,warps_m=2,warps_n=2,stages=3",
                                 "bm=32,bn=64,bk=128,warps_m=1,warps_n=2,stages=2",
                                 "kslices=2", "bm=128,bn=64,kslices=4"])
@pytest.mark.parametrize("shape", ["100_200_300", "256_128_16384", "33_47_129"])
@pytest.mark.parametrize("reduce", [2, 3])
def test_splitk_other_tiles(cfg, shape, reduce):
    """Non-default tiles (bigger warp tiles, deep BK) index fragments and smem correctly."""
    for layout in ("nn", "tn"):
        assert _run_case(f"splitk:{cfg},splits=8,reduce={reduce}", Problem(_shape(shape), layout), calls=2)


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", RAGGED + ["64_4096_64", "512_512_512"])
@pytest.mark.parametrize("cfg", ["", "bm=16,bn=16,bk=32,warps_m=1,warps_n=1",
                                 "bm=64,bn=64,warps_m=2,warps_n=2,stages=3",
                                 "kslices=2", "bm=16,bn=16,bk=64,warps_m=1,warps_n=1,kslices=4"])
def test_smalltile_matches_reference(shape, layout, cfg):
    assert _run_case(f"smalltile:{cfg}", Problem(_shape(shape), layout))


@pytest.fixture(scope="module")
def hopper_built():
    """Both CUTLASS configs compile in parallel once (about a minute each), then tests hit the cache."""
    from kernels_search.cuda_method import prebuild

    res = prebuild([make_method("hopper", None), make_method("hopper", SK), make_method("hopper", PSK)])
    assert all(r.ok for r in res), [r.log[-3000:] for r in res if not r.ok]
    return res


SK = "scheduler=streamk,tile_m=128,tile_n=128,cluster_m=1"
PSK = "scheduler=splitk,schedule=pingpong,tile_m=64,tile_n=64,cluster_m=2,cluster_n=2"

HOPPER_SHAPES = ["64_64_64", "256_256_256", "1024_1024_1024", "100_200_304", "17_40_72", "4096_4096_4096",
                 "256_128_16384", "12288_1024_64"]


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", HOPPER_SHAPES)
@pytest.mark.parametrize("rt", ["", "raster=1,swizzle=2", "raster=2,swizzle=8"])
def test_hopper_matches_reference(hopper_built, shape, layout, rt):
    """Default CUTLASS sm90 config (one build, cached) with several runtime options."""
    assert _run_case(f"hopper:{rt}", Problem(_shape(shape), layout), calls=2)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["256_128_16384", "64_1024_16384", "100_200_304", "1024_1024_1024"])
@pytest.mark.parametrize("rt", ["", "sk_decomp=3", "sk_decomp=2,sk_splits=8", "sk_decomp=3,sk_reduction=1"])
def test_hopper_streamk_matches_reference(hopper_built, shape, layout, rt):
    """Stream-K / split-K decompositions (second CUTLASS build) with fixed-up partial tiles."""
    assert _run_case(f"hopper:{SK},{rt}".rstrip(","), Problem(_shape(shape), layout), calls=2)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["64_64_64", "256_128_64", "100_200_304", "1024_1024_1024", "12288_1024_64"])
@pytest.mark.parametrize("spec", ["hopper:tile_m=128,tile_n=128,cluster_m=2,schedule=single",
                                  "hopper:tile_m=64,tile_n=128,cluster_m=1,schedule=single",
                                  "hopper:tile_m=64,tile_n=64,cluster_m=1,schedule=single,stages=4",
                                  "hopper:tile_m=128,tile_n=128,cluster_m=2,schedule=pingpong,stages=6",
                                  "hopper:tile_m=128,tile_n=64,cluster_m=1,scheduler=streamk,sk_splits=2,sk_decomp=2",
                                  "hopper:tile_m=128,tile_n=192,cluster_m=2,schedule=pingpong"])
def test_hopper_variants_match_reference(shape, layout, spec):
    """The non-persistent kernel and the 128x128 pingpong, 128x64 stream-K split-2 and 128x192
    pingpong presets (their own builds), ragged edges and K = 64 (one k-tile for two splits)
    included, repeated calls."""
    assert _run_case(spec, Problem(_shape(shape), layout), calls=2)


def _slices_fit(k: int, slices: int) -> bool:
    """Does parallel split-K take this slice count at this K (0 = automatic, always)?"""
    return slices == 0 or (k % slices == 0 and (k // slices) % 8 == 0)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["256_128_16384", "64_1024_16384", "100_200_304", "1024_1024_1024", "72_136_64"])
@pytest.mark.parametrize("rt", ["", "sk_splits=0", "sk_splits=2", "sk_splits=16", "sk_splits=8,raster=2"])
def test_hopper_parallel_splitk_matches_reference(hopper_built, shape, layout, rt):
    """Parallel split-K (K slices as batches, fp32 slices, PDL reduce kernel; third CUTLASS build),
    repeated calls; slice counts K cannot take are declined with a reason, not run."""
    sup = _run_case(f"hopper:{PSK},{rt}".rstrip(","), Problem(_shape(shape), layout), calls=3)
    s = int(rt.split("sk_splits=")[1].split(",")[0]) if "sk_splits=" in rt else 1
    assert bool(sup) == _slices_fit(_shape(shape).k, s), sup


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["256_128_16384", "64_1024_16384", "512_64_4096", "100_200_304"])
@pytest.mark.parametrize("spec", ["splitk_tma:", "splitk_tma:slices=8",
                                  "splitk_tma:tile_n=128,cluster_m=1,cluster_n=4,slices=8",
                                  "splitk_tma:tile_n=128,cluster_m=1,cluster_n=4,slices=16",
                                  "splitk_tma:tile_m=128,cluster_m=1,cluster_n=2,slices=8"])
def test_splitk_tma_matches_reference(shape, layout, spec):
    """The split-K family on the hopper template (its own builds: the family name is in the
    source), repeated calls; a slice count K cannot take is declined, not run."""
    sup = _run_case(spec, Problem(_shape(shape), layout), calls=3)
    s = int(spec.split("slices=")[1]) if "slices=" in spec else 0
    assert bool(sup) == _slices_fit(_shape(shape).k, s), sup


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["1024_64_12288", "512_64_4096", "4096_128_2048", "100_200_304", "72_136_64"])
@pytest.mark.parametrize("spec", ["splitk_tma_swap:", "splitk_tma_swap:tile_n=128,cluster_m=1,cluster_n=1,slices=8",
                                  "splitk_tma_swap:tile_n=128,cluster_m=1,cluster_n=1,slices=1",
                                  "splitk_tma_swap:tile_n=16,cluster_m=2,cluster_n=1,slices=2",
                                  "splitk_tma_swap:tile_n=32,cluster_m=1,cluster_n=1,slices=4"])
def test_splitk_tma_swap_matches_reference(shape, layout, spec):
    """The transposed split-K kernels (C^T = B^T A^T into fp32 slices, then the reduce kernel),
    ragged edges along both M and N, repeated calls; a slice count K cannot take is declined."""
    sup = _run_case(spec, Problem(_shape(shape), layout), calls=3)
    s = int(spec.split("slices=")[1]) if "slices=" in spec else 0
    assert bool(sup) == _slices_fit(_shape(shape).k, s), sup


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["512_512_8192", "64_2048_8192", "100_200_304"])
@pytest.mark.parametrize("family", ["splitk_tma", "splitk_tma_swap"])
def test_one_wave_slices_match_reference_and_record_the_count(family, shape, layout):
    """``slices=-1``: the count resolved from this device's SM count runs, repeated calls are right,
    and the row's ``info.opts`` says which count ran (2048 x 64 is 32 tiles along M as given, 16 as
    the swap family's transposed problem; K = 304 takes one slice)."""
    from kernels_search.families import ALL
    from kernels_search.families.hopper import one_wave_slices

    p = Problem(_shape(shape), layout)
    m = make_method(family, "tile_n=128,cluster_m=1,cluster_n=1,slices=-1")
    assert m.supports(p, "cuda")
    prep = m.prepare(p, _ctx(_inputs(p)))
    for i in range(3):
        a, b, c, buf = _inputs(p, seed=i)
        prep.fn(a, b, c)
        torch.cuda.synchronize()
        _check(p, a, b, c, buf)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    mm, nn = (p.n, p.m) if family.endswith("swap") else (p.m, p.n)
    want = one_wave_slices(mm, nn, p.k, 64, 128, 64, sms)
    assert prep.info["opts"][3] == want == ALL[family].opts(m.knobs, p, sms)[3]
    assert want > 1 or p.k == 304


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["2048_4096_256", "1000_200_64", "130_1032_512"])
@pytest.mark.parametrize("spec", study_specs("epilogue-specs.txt"))
def test_epilogue_sub_tile_matches_reference(spec, shape, layout):
    """``epi_n``: the wider epilogue sub-tiles of the twenty-first session's study store every
    output element, ragged tiles along M and N and partial clusters included, on repeated calls."""
    assert _run_case(spec, Problem(_shape(shape), layout), calls=3)


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["1000_200_64", "130_1032_512", "448_320_1792"])
@pytest.mark.parametrize("spec", study_specs("odd-tile-specs.txt"))
def test_odd_tiles_match_reference(spec, shape, layout):
    """The odd tile sizes (hopper.ODD_TILE_N, wide WGMMA atoms through CUTE's extended shapes) store
    every output element: ragged tiles along M and N, partial clusters, K of one k-tile, one-wave
    split-K slices, on repeated calls."""
    assert _run_case(spec, Problem(_shape(shape), layout), calls=3)


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["1000_72_1024", "72_1032_512", "136_200_64"])
@pytest.mark.parametrize("spec", study_specs("narrow-tile-specs.txt"))
def test_narrow_tiles_match_reference(spec, shape, layout):
    """The narrow tiles (hopper.NARROW_TILE_N, in clusters of two along the narrow side) store every
    output element: ragged tiles along M and N, partial clusters, K of one k-tile, on repeated calls."""
    assert _run_case(spec, Problem(_shape(shape), layout), calls=3)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["4096_128_2048", "1000_72_1024", "100_200_304", "72_136_64"])
@pytest.mark.parametrize("spec", ["hopper_swap:tile_m=64,tile_n=192,cluster_m=2,cluster_n=1,schedule=pingpong,stages=6",
                                  "hopper_swap:tile_m=64,tile_n=64,cluster_m=2,cluster_n=1,schedule=single,stages=12",
                                  "hopper_swap:tile_m=128,tile_n=128,cluster_m=1,cluster_n=1,schedule=single,stages=6"])
def test_hopper_swap_matches_reference(shape, layout, spec):
    """The transposed one-pass GEMM (C^T written column-major into C's memory), ragged edges
    along M and N, partial clusters along N, repeated calls."""
    assert _run_case(spec, Problem(_shape(shape), layout), calls=3)


@pytest.mark.slow
def test_hopper_declines_k_not_multiple_of_8():
    sup = make_method("hopper", None).supports(Problem(Shape(17, 33, 65)), "cuda")
    assert not sup and "multiples of 8" in sup.reason


@pytest.mark.parametrize(
    "spec, shape",
    [
        ("splitk:splits=16,reduce=0", "256_128_16384"),
        ("splitk:splits=16,reduce=1", "256_128_16384"),
        ("splitk:splits=16,reduce=2", "256_128_16384"),
        ("splitk:splits=16,reduce=3", "256_128_16384"),
        ("splitk:splits=8,reduce=3,spread=1", "256_128_16384"),
        ("splitk:splits=16,kslices=2", "256_128_16384"),
        ("splitk:splits=4", "17_33_65"),
        ("smalltile:", "64_64_64"),
        ("smalltile:", "17_33_65"),
        pytest.param("hopper:", "1024_1024_1024", marks=pytest.mark.slow),
        pytest.param(f"hopper:{SK},sk_decomp=3", "256_128_16384", marks=pytest.mark.slow),
        pytest.param(f"hopper:{PSK},sk_splits=16", "256_128_16384", marks=pytest.mark.slow),
    ],
)
def test_graph_capture_tracks_new_inputs(spec, shape):
    """The call is capturable and a replay recomputes from the buffers' current values."""
    for layout in ("nn", "tn"):
        _graph_case(spec, Problem(_shape(shape), layout))


def test_bad_runtime_option_raises_not_crashes():
    """An opts value outside the range the library accepts is a clean error, not a launch."""
    from kernels_search.cuda_method import HgemmError
    from kernels_search.families import ALL

    fam = ALL["splitk"]
    p = Problem(Shape(64, 64, 64))
    m = make_method("splitk", None)
    prep = m.prepare(p, _ctx(_inputs(p)))
    a, b, c, _ = _inputs(p)
    orig = fam.opts
    try:
        fam.opts = lambda k, pr: [999, 0]  # type: ignore[method-assign]
        prep2 = make_method("splitk", None).prepare(p, _ctx((a, b, c)))
        with pytest.raises(HgemmError, match="out of range|option"):
            prep2.fn(a, b, c)
    finally:
        fam.opts = orig  # type: ignore[method-assign]
    prep.fn(a, b, c)
    torch.cuda.synchronize()


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", RAGGED + ["256_128_16384", "1024_1024_1024"])
@pytest.mark.parametrize("cfg", ["", "block_m=64,block_n=64,block_k=32,split_k=8",
                                 "block_m=16,block_n=32,block_k=16,num_warps=2,num_stages=2", "persistent=1"])
def test_triton_matches_reference(shape, layout, cfg):
    pytest.importorskip("triton")
    assert _run_case(f"triton:{cfg}", Problem(_shape(shape), layout))


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", SPLITK_SHAPES + ["128_256_4096", "512_512_16384"])
@pytest.mark.parametrize("cfg", ["", "block_m=16,block_n=64,block_k=64,num_stages=4",
                                 "block_m=128,block_n=128,num_warps=8",
                                 "block_m=64,block_n=64,block_k=64,split_k=64", "split_k=2"])
def test_triton_splitk_matches_reference(shape, layout, cfg):
    """The one-launch split-K: every tile's slices summed once by its last program, on three calls in a
    row (a counter left above zero would skip or double the next call's sum), split_k 64 beyond the
    k-tiles of the short shapes (empty slices) included."""
    pytest.importorskip("triton")
    assert _run_case(f"triton_splitk:{cfg}", Problem(_shape(shape), layout))


@pytest.mark.parametrize("cfg", ["", "block_m=64,block_n=64,split_k=16", "block_m=64,block_n=64,split_k=16,tma=1"])
def test_triton_splitk_graph_capture(cfg):
    pytest.importorskip("triton")
    for layout in ("nn", "tn"):
        _graph_case(f"triton_splitk:{cfg}", Problem(Shape(256, 128, 4096), layout))


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", SPLITK_SHAPES + ["8_4608_3584", "16_5120_4096", "128_256_4096"])
@pytest.mark.parametrize("cfg", ["", "block_m=16,block_n=64,block_k=64,num_stages=4", "block_m=64,block_n=64,per_sm=2",
                                 "block_m=128,block_n=128,num_warps=8"])
def test_triton_streamk_matches_reference(shape, layout, cfg):
    """Stream-K: runs that end inside tiles, summed once by each cut tile's last contributor, on three
    calls in a row (a counter left above zero would skip or double the next call's sum); shallow K
    (whole tiles a run) and the decode shapes whose tile counts leave split-K's SMs idle included."""
    pytest.importorskip("triton")
    assert _run_case(f"triton_streamk:{cfg}", Problem(_shape(shape), layout))


@pytest.mark.parametrize("cfg", ["", "block_m=16,block_n=64,per_sm=2"])
def test_triton_streamk_graph_capture(cfg):
    pytest.importorskip("triton")
    for layout in ("nn", "tn"):
        _graph_case(f"triton_streamk:{cfg}", Problem(Shape(16, 5120, 4096), layout))


@pytest.mark.parametrize("spec", ["triton_streamk:block_m=64,block_n=64,per_sm=2",
                                  "triton_streamk:block_m=64,block_n=64,per_sm=4",
                                  "triton_splitk:block_m=64,block_n=64,split_k=16",
                                  "triton_splitk:block_m=64,block_n=64,split_k=16,tma=1"])
def test_in_launch_sums_hold_with_many_contributors_on_each_sm(spec):
    """Many programs adding into the same tiles, several a SM: the last contributor must read every
    other program's adds, call after call. Without a barrier between the last contributor's read of the
    sum and its zeroing, 4 stream-K programs a SM gave wrong sums now and then on these shapes (H100,
    run 523abc79a060); 30 calls on each."""
    pytest.importorskip("triton")
    for shape in ("256_512_8192", "64_4096_8192", "4096_64_1024", "2048_128_4096"):
        assert _run_case(spec, Problem(_shape(shape), "tn"), calls=30)


TMA_SHAPES = ["17_24_40", "100_200_304", "72_136_64", "64_64_64", "256_128_16384", "1024_1024_1024",
              "2048_8192_64"]  # TMA needs K and N multiples of 8; M is free


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", TMA_SHAPES + ["128_256_4096", "512_512_16384"])
@pytest.mark.parametrize("cfg", ["tma=1", "block_m=16,block_n=64,block_k=64,num_stages=4,tma=1",
                                 "block_m=64,block_n=128,tma=1", "block_m=64,block_n=64,split_k=64,tma=1"])
def test_triton_splitk_tma_matches_reference(shape, layout, cfg):
    """triton_splitk with A and B through TMA descriptors: the descriptors' zero fill past K and M is the
    only edge handling (ragged M, K not a multiple of the k-tile), slices split on k-tile boundaries, empty
    slices (split_k 64 on short K), three calls in a row on one workspace."""
    pytest.importorskip("triton")
    assert _run_case(f"triton_splitk:{cfg}", Problem(_shape(shape), layout))


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", TMA_SHAPES)
@pytest.mark.parametrize("cfg", ["persistent=1,tma=1",
                                 "block_m=64,block_n=128,block_k=64,persistent=1,tma=1,epi_split=2,per_sm=2",
                                 "block_m=128,block_n=256,block_k=64,num_warps=8,persistent=1,tma=1,epi_split=2"])
def test_triton_tma_matches_reference(shape, layout, cfg):
    pytest.importorskip("triton")
    assert _run_case(f"triton:{cfg}", Problem(_shape(shape), layout))


@pytest.mark.parametrize("cfg", ["", "split_k=8", "persistent=1", "persistent=1,tma=1,epi_split=2"])
def test_triton_graph_capture(cfg):
    pytest.importorskip("triton")
    for layout in ("nn", "tn"):
        _graph_case(f"triton:{cfg}", Problem(Shape(256, 128, 4096), layout))


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["1000_200_1024", "4096_64_4096", "136_1032_64"])
@pytest.mark.parametrize("spec", [
    "hopper:tile_m=64,tile_n=64,cluster_m=1,schedule=single,stages=7,l2_promo=256",
    "hopper:tile_m=64,tile_n=32,cluster_m=1,cluster_n=2,schedule=pingpong,l2_promo=256",
    "hopper:tile_m=128,tile_n=128,cluster_m=1,schedule=cooperative,scheduler=streamk,l2_promo=256",
    "hopper_swap:tile_m=64,tile_n=128,cluster_m=1,cluster_n=1,schedule=pingpong,stages=8,l2_promo=256"])
def test_l2_promotion_matches_reference(spec, shape, layout):
    """``l2_promo=256`` (every TMA descriptor through hopper_l2_promo.cuh's hook): non-persistent,
    multicast in a cluster, stream-K and the transposed kernel store every output element, ragged
    tiles and K of one k-tile included, on repeated calls (the descriptors are encoded once and
    reused)."""
    assert _run_case(spec, Problem(_shape(shape), layout), calls=3)


# ---- skinny -------------------------------------------------------------------------------------

# K (and N, for nn) multiples of 8, as the family needs; edges that no tile divides; decode rows
SKINNY_SHAPES = ["1_8_8", "17_40_72", "100_200_304", "33_48_136", "64_64_64", "256_256_256",
                 "1_4096_4096", "3_4104_1024", "8_1000_2056", "32_6144_4096", "200_16_512",
                 "256_128_16384", "64_1024_16384", "1024_1024_1024", "4096_64_2048"]
SKINNY_SPECS = ["skinny:", "skinny:sched=0", "skinny:sched=0,splits=1", "skinny:sched=0,splits=4,orient=1",
                "skinny:sched=0,splits=8,orient=2", "skinny:orient=1", "skinny:orient=2,per_sm=1",
                "skinny:nt=16,warps_w=8,sched=0,splits=64", "skinny:nt=32,warps_w=4",
                "skinny:wt=64,nt=64,warps_w=2,warps_n=2,stages=4",
                "skinny:wt=64,nt=128,warps_w=2,warps_n=2,stages=3,sched=0,splits=2",
                "skinny:wt=128,nt=128,warps_w=4,warps_n=2,bk=64,stages=4",
                "skinny:wt=256,nt=16,warps_w=8,warps_n=2,bk=64,stages=4",
                "skinny:wt=64,nt=8,warps_w=4,bk=256,stages=4", "skinny:tma=0", "skinny:tma=0,sched=0,splits=4",
                "skinny:tma=0,wt=64,nt=64,warps_w=2,warps_n=2,stages=4,orient=1"]


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", SKINNY_SHAPES)
@pytest.mark.parametrize("spec", SKINNY_SPECS)
def test_skinny_matches_reference(spec, shape, layout):
    """Both orientations, every split count (automatic, 1, many), every tile kind: the fp32-accumulated
    answer, every element of C written, nothing outside it, split-K counters left at zero."""
    assert _run_case(spec, Problem(_shape(shape), layout))


@pytest.mark.parametrize("spec, shape", [("skinny:", "1_4096_4096"),
                                         ("skinny:sched=0,splits=8,orient=1", "256_128_16384"),
                                         ("skinny:orient=1", "256_128_16384"), ("skinny:tma=0", "1_4096_4096"),
                                         ("skinny:nt=32,warps_w=4,splits=1", "17_40_72")])
def test_skinny_graph_capture_tracks_new_inputs(spec, shape):
    for layout in ("nn", "tn"):
        _graph_case(spec, Problem(_shape(shape), layout))


def test_skinny_declines_unaligned_rows():
    m = make_method("skinny", None)
    assert not m.supports(Problem(Shape(16, 64, 100)), "cuda")
    assert not m.supports(Problem(Shape(16, 60, 64), "nn"), "cuda")
    assert m.supports(Problem(Shape(16, 60, 64), "tn"), "cuda")


# ---- gemv ---------------------------------------------------------------------------------------

# decode rows 1..32, K with a ragged last chunk (K % 32 != 0) and shorter than one run, N past the
# last row block, splits automatic / none / many
GEMV_SHAPES = ["1_8_8", "1_4096_4096", "3_4104_1032", "8_1000_2056", "8_16_24", "16_3584_3584", "13_200_4104",
               "32_3072_8192", "17_40_72", "32_6144_4096", "2_64_16384"]
GEMV_SPECS = ["gemv:", "gemv:splits=1", "gemv:splits=8", "gemv:mt=2", "gemv:mt=4", "gemv:mt=4,rw=2,u=2",
              "gemv:rw=2,u=8,warps=8,kw=8,minb=1", "gemv:warps=8,kw=2,minb=1,pf=2,splits=64",
              "gemv:mt=2,warps=4,kw=4,pf=0,minb=2",
              "gemv:mt=4,u=2,minb=2,splits=2", "gemv:pdl=1", "gemv:mt=2,warps=4,kw=1,minb=4,pdl=1,splits=4",
              "gemv:pf=4", "gemv:mt=4,minb=2,pf=4"]


@pytest.mark.parametrize("shape", GEMV_SHAPES)
@pytest.mark.parametrize("spec", GEMV_SPECS)
def test_gemv_matches_reference(spec, shape):
    """Every M the config serves, ragged K and N, every split count: the fp32-accumulated answer,
    every element of C written, nothing outside it, the arrival counters left at zero."""
    _run_case(spec, Problem(_shape(shape), "tn"))


# ---- gemv_rows ----------------------------------------------------------------------------------

# M 1-4 (5: declined); fewer rows than CTAs (one row a CTA); rows not a multiple of r; K shorter than one
# vector step, ragged against the unrolled steps; K not a multiple of 8 (declined)
GEMV_ROWS_SHAPES = ["1_8_8", "1_5_64", "2_1000_2056", "4_3_24", "3_4104_1032", "1_4096_4096", "1_3072_3072",
                    "4_200_4104", "1_70000_64", "2_64_16384", "5_64_64", "1_64_100"]
GEMV_ROWS_SPECS = ["gemv_rows:", "gemv_rows:m=2,threads=128,cps=8,u=1", "gemv_rows:m=2,cps=2",
                   "gemv_rows:m=4,u=1,cps=2", "gemv_rows:r=2,u=4,cps=2", "gemv_rows:threads=512,cps=2",
                   "gemv_rows:threads=128,r=8,u=1"]


@pytest.mark.parametrize("shape", GEMV_ROWS_SHAPES)
@pytest.mark.parametrize("spec", GEMV_ROWS_SPECS)
def test_gemv_rows_matches_reference(spec, shape):
    """Every M the config serves, fewer rows than CTAs, ragged rows and K: the fp32-accumulated answer,
    every element of C written, nothing outside it; M above the config's and K not a multiple of 8
    declined."""
    sup = _run_case(spec, Problem(_shape(shape), "tn"))
    m_max = int(spec.split("m=")[1].split(",")[0]) if ":m=" in spec or ",m=" in spec else 1
    assert bool(sup) == (_shape(shape).m <= m_max and _shape(shape).k % 8 == 0), sup


@pytest.mark.parametrize("spec, shape", [("gemv_rows:", "1_4096_14336"),
                                         ("gemv_rows:m=2,threads=128,cps=8,u=1", "2_3072_3072")])
def test_gemv_rows_graph_capture_tracks_new_inputs(spec, shape):
    _graph_case(spec, Problem(_shape(shape), "tn"))


# ---- splitk_regs ---------------------------------------------------------------------------------

# few tiles on a deep K (automatic slices: clusters of up to 16), M and N past the last tile, K with a ragged
# last chunk and shorter than one run a warp, one tile and one slice, every explicit slice count; nn declined
SPLITK_REGS_SHAPES = ["128_64_4096", "256_256_4096", "100_72_1032", "1_8_8", "33_17_24", "64_64_64", "512_64_16384",
                      "7_300_520"]
SPLITK_REGS_SPECS = ["splitk_regs:", "splitk_regs:splits=1", "splitk_regs:splits=2", "splitk_regs:splits=16",
                     "splitk_regs:fm=4,fn=8", "splitk_regs:fm=1,fn=2,warps=4", "splitk_regs:fm=2,fn=4,u=2,splits=8",
                     "splitk_regs:fm=2,fn=2,warps=16"]


@pytest.mark.parametrize("shape", SPLITK_REGS_SHAPES)
@pytest.mark.parametrize("spec", SPLITK_REGS_SPECS)
def test_splitk_regs_matches_reference(spec, shape):
    """Every slice count (clusters of 1-16), ragged M, N and K: the fp32-accumulated answer, every element
    of C written, nothing outside it."""
    assert _run_case(spec, Problem(_shape(shape), "tn"))
    assert "layout tn" in _run_case(spec, Problem(_shape(shape), "nn")).reason


@pytest.mark.parametrize("spec, shape", [("splitk_regs:", "128_64_4096"),
                                         ("splitk_regs:fm=4,fn=8,splits=4", "256_256_4096")])
def test_splitk_regs_graph_capture_tracks_new_inputs(spec, shape):
    _graph_case(spec, Problem(_shape(shape), "tn"))


# ---- splitk_dsmem --------------------------------------------------------------------------------

# few tiles on a deep K (automatic slices), M, N and K past the last tile (TMA's zero fill), K shorter than one
# 64-k stage, one tile and one slice, more k-tiles than stages (the ring refills), every explicit slice count; swapped
# (C^T = B A^T) on decode shapes and on the same ragged ones
SPLITK_DSMEM_SHAPES = ["256_256_4096", "128_64_4096", "100_72_1032", "1_8_8", "33_17_24", "64_64_64", "512_64_16384",
                       "7_300_520", "1024_1024_1024", "1_4096_4096", "32_5120_1032"]
SPLITK_DSMEM_SPECS = ["splitk_dsmem:", "splitk_dsmem:splits=1", "splitk_dsmem:splits=2", "splitk_dsmem:splits=16",
                      "splitk_dsmem:stages=8,splits=4", "splitk_dsmem:bn=128", "splitk_dsmem:bn=32,stages=8,splits=8",
                      "splitk_dsmem:bm=128,bn=128,splits=2", "splitk_dsmem:swap=1,bn=8",
                      "splitk_dsmem:swap=1,bn=16,stages=12,splits=4", "splitk_dsmem:swap=1,bm=128,bn=32,splits=16",
                      "splitk_dsmem:mma_pipe=1,stages=4", "splitk_dsmem:mma_pipe=1,swap=1,bn=16,splits=2",
                      "splitk_dsmem:chains=4,mma_pipe=1,stages=8", "splitk_dsmem:chains=2,bn=32,splits=8",
                      "splitk_dsmem:chains=4,swap=1,bn=16,mma_pipe=1,stages=8",
                      "splitk_dsmem:sum=1,prefetch=1,mma_pipe=1,stages=8", "splitk_dsmem:sum=1,splits=16",
                      "splitk_dsmem:sum=1,prefetch=1,swap=1,bn=16,mma_pipe=1,stages=8,splits=4",
                      "splitk_dsmem:sum=1,swap=1,bn=8,splits=2"]
# bm 256 (the fp32 tile reuses the stages' memory): swapped with automatic and explicit slices, and unswapped
SPLITK_DSMEM_FAT_SPECS = ["splitk_dsmem:swap=1,bm=256,bn=32,mma_pipe=1,stages=6",
                          "splitk_dsmem:swap=1,bm=256,bn=16,mma_pipe=1,stages=6,splits=4",
                          "splitk_dsmem:swap=1,bm=256,bn=8,mma_pipe=1,stages=4,splits=2",
                          "splitk_dsmem:bm=256,bn=64,splits=4"]


@pytest.mark.parametrize("shape", SPLITK_DSMEM_SHAPES)
@pytest.mark.parametrize("spec", SPLITK_DSMEM_SPECS + SPLITK_DSMEM_FAT_SPECS)
def test_splitk_dsmem_matches_reference(spec, shape):
    """Every slice count (clusters of 1-16), ragged M, N and K, and 256-row tiles (whose fp32 tile is written over the
    stages once the main loop is done): the fp32-accumulated answer, every element of C written, nothing outside it."""
    assert _run_case(spec, Problem(_shape(shape), "tn"))
    assert "layout tn" in _run_case(spec, Problem(_shape(shape), "nn")).reason


# nn=1: B stored K x N (N-contiguous), an MN-major WGMMA operand: swapped (B the WGMMA's A) and unswapped (its B),
# automatic and explicit slices, the wide sum, a 128 x 128 tile; on shapes whose N is not a multiple of 8, declined
SPLITK_DSMEM_NN_SPECS = ["splitk_dsmem:nn=1,swap=1,bn=8,mma_pipe=1,stages=8", "splitk_dsmem:nn=1,bn=64,splits=4",
                         "splitk_dsmem:nn=1,swap=1,bm=128,bn=32,mma_pipe=1,stages=8,splits=8",
                         "splitk_dsmem:nn=1,bn=128,mma_pipe=1,stages=6,sum=1",
                         "splitk_dsmem:nn=1,swap=1,bm=128,bn=128,mma_pipe=1,stages=4,sum=1,splits=2"]


@pytest.mark.parametrize("shape", SPLITK_DSMEM_SHAPES)
@pytest.mark.parametrize("spec", SPLITK_DSMEM_NN_SPECS)
def test_splitk_dsmem_nn_matches_reference(spec, shape):
    """Layout nn: the same answer as the fp32 reference, every element of C written, nothing outside it; tn declined."""
    p = Problem(_shape(shape), "nn")
    sup = _run_case(spec, p)
    assert sup or (p.n % 8 and "multiple of 8" in sup.reason), sup.reason
    assert "layout nn" in _run_case(spec, Problem(_shape(shape), "tn")).reason


@pytest.mark.parametrize("spec, shape", [("splitk_dsmem:", "256_256_4096"),
                                         ("splitk_dsmem:bn=128,splits=8", "128_64_4096"),
                                         ("splitk_dsmem:swap=1,bn=8,stages=8", "1_4096_4096")])
def test_splitk_dsmem_graph_capture_tracks_new_inputs(spec, shape):
    _graph_case(spec, Problem(_shape(shape), "tn"))


@pytest.mark.parametrize("spec, shape", [("gemv:", "1_4096_4096"), ("gemv:mt=4,splits=4", "32_3072_8192"),
                                         ("gemv:pdl=1", "8_6144_4096"), ("gemv:mt=4,pdl=1,splits=2", "32_3072_8192")])
def test_gemv_graph_capture_tracks_new_inputs(spec, shape):
    _graph_case(spec, Problem(_shape(shape), "tn"))
