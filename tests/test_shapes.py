"""Shape parsing: forms, named sets, files, and the errors a user sees."""

import pytest

from harness.problem import Problem, Shape
from harness.shapes import ShapeError, parse_shape, parse_shapes, sample_grid


def test_single_and_separators():
    assert parse_shape("4096_1024_64") == Shape(4096, 1024, 64)
    assert parse_shape("17x33X65") == Shape(17, 33, 65)
    assert parse_shapes("1_2_3, 4_5_6 1_2_3") == [Shape(1, 2, 3), Shape(4, 5, 6)]  # deduplicated, ordered


def test_named_sets():
    grid = parse_shapes("cuda-l2")
    assert len(grid) == 1000 and len(set(grid)) == 1000
    assert Shape(64, 64, 64) in grid and Shape(16384, 16384, 16384) in grid and Shape(12288, 64, 8192) in grid
    smoke = parse_shapes("smoke")
    assert 10 <= len(smoke) <= 14
    assert any(s.m * s.n <= 64 * 64 for s in smoke) and any(s.k >= 16384 for s in smoke)
    assert all(s.m == s.n == s.k for s in parse_shapes("square"))


@pytest.mark.parametrize("bad,needle", [
    ("64_64", "malformed shape '64_64'"),
    ("0_64_64", "M=0"),
    ("64_-1_64", "N=-1"),
    ("64_64_abc", "unknown shape entry '64_64_abc'"),
    ("smok", "unknown shape entry 'smok'"),
    ("", "no shapes"),
])
def test_errors_name_the_entry(bad, needle):
    with pytest.raises(ShapeError) as e:
        parse_shapes(bad)
    assert needle in str(e.value)


def test_files(tmp_path):
    plain = tmp_path / "s.txt"
    plain.write_text("# mine\n64_64_64\n128_256_512  # tail comment\n")
    assert parse_shapes(str(plain)) == [Shape(64, 64, 64), Shape(128, 256, 512)]
    csvf = tmp_path / "s.csv"
    csvf.write_text("m,n,k,note\n1,2,3,x\n7,8,9,y\n")
    assert parse_shapes(str(csvf)) == [Shape(1, 2, 3), Shape(7, 8, 9)]
    broken = tmp_path / "b.csv"
    broken.write_text("m,n,k\n1,2,3\n1,0,3\n")
    with pytest.raises(ShapeError, match=r"b.csv, line 3: .*N=0"):
        parse_shapes(str(broken))
    empty = tmp_path / "e.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(ShapeError, match="holds no shapes"):
        parse_shapes(str(empty))


def test_problem_contract():
    p = Problem(Shape(2, 3, 4), "tn")
    assert p.b_shape == (3, 4) and Problem(Shape(2, 3, 4)).b_shape == (4, 3)
    assert p.flops == 48 and p.min_bytes == 2 * (8 + 12 + 6)
    big = Problem(Shape(4096, 4096, 4096))
    assert big.floor_us("NVIDIA H200") == pytest.approx(2 * 4096**3 / 990e6)  # compute-bound
    skinny = Problem(Shape(64, 4096, 4096))
    assert skinny.floor_us("NVIDIA H200") == pytest.approx(skinny.min_bytes / 4.8e6)  # memory-bound
    with pytest.raises(ValueError):
        Problem(Shape(1, 1, 1), "nt")
    with pytest.raises(ValueError):
        Shape(1, 0, 1)


def test_sample_grid_spreads_over_the_grid():
    s = sample_grid(50)
    assert len(set(s)) >= 45
    tiles = sorted((-(-x.m // 128)) * (-(-x.n // 128)) for x in s)
    assert tiles[0] <= 1 and tiles[-1] >= 4096  # reaches both the tiny and the huge end
    assert sample_grid(50) == s  # deterministic


def test_on_cuda_l2_grid_reads_names_and_shapes():
    from harness.shapes import on_cuda_l2_grid

    assert on_cuda_l2_grid("12288_128_16384") and on_cuda_l2_grid(Shape(64, 64, 64))
    assert not on_cuda_l2_grid("96_64_64") and not on_cuda_l2_grid(Shape(64, 64, 96))
    with pytest.raises(ShapeError):
        on_cuda_l2_grid("1_2")


def test_each_device_has_a_default_set_sized_for_it():
    from harness.progress import WorkModel
    from harness.shapes import default_set

    assert default_set("cuda") == "smoke"
    cpu = parse_shapes(default_set("cpu"))
    assert default_set("cpu") == "smoke-cpu" and len(cpu) >= 6
    assert max(2 * s.m * s.n * s.k for s in cpu) <= 3e8  # ~0.3 s a call at 1 GFLOP/s
    # the kinds of shape smoke has: tiny, skinny, large-K few-tile, tall with tiny K, misaligned
    assert any(s.k >= 8 * max(s.m, s.n) for s in cpu) and any(s.k <= 64 and s.m >= 1024 for s in cpu)
    assert any(s.m % 8 for s in cpu)
    # at a CPU's ~1 GFLOP/s with the default settings: minutes, where smoke takes hours
    model = WorkModel(flops_per_s=1e9, entries=2)
    assert model.total_s(cpu) < 120 and model.total_s(parse_shapes("smoke")) > 3600


def test_run_bytes_counts_every_buffer_of_a_shape():
    from harness.evaluate import run_bytes

    m = n = k = 1000
    p = Problem(Shape(m, n, k))
    one_layout = 2 * 3 * m * n  # A, B, C in fp16
    gate = 2 * 2 * 2 * m * n + 2 * (2 * m * n + 512) + 8 * 3 * m * n + 2 * 8 * m * n  # fp64 reference
    assert run_bytes(p, layouts=2, gate_candidates=1, device="cpu") == 2 * one_layout + gate
    assert run_bytes(p, 2, 3, "cpu") - run_bytes(p, 2, 1, "cpu") == 2 * 2 * (2 * m * n + 512)
    big = Problem(Shape(99999, 99999, 99999))
    assert run_bytes(big, 2, 1, "cpu") > 2 * 6 * 99999**2  # fp32 reference at this size, still > 100 GB
    warm = run_bytes(Problem(Shape(1024, 1024, 1024)), 2, 1, "cuda", cold=False, l2_bytes=50 << 20)
    cold = run_bytes(Problem(Shape(1024, 1024, 1024)), 2, 1, "cuda", cold=True, l2_bytes=50 << 20)
    assert cold - 2 * 6 * 1024**2 >= 2 * 2 * (50 << 20) > warm  # rotated sets fill twice the L2 per layout
