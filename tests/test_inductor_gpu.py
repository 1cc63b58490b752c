"""GPU tests of the ``inductor`` peer: correct against an fp32 reference in both layouts, its
compile time recorded, and its prepared call captured and replayed in a CUDA graph (the timing
core's offline path). Skipped where CUDA is absent (tests/conftest.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

import torch  # noqa: E402

from test_baselines_gpu import TOL, make_inputs, prepare, reference, rel_err  # noqa: E402
from harness.problem import Problem, Shape  # noqa: E402

SHAPES = [(64, 64, 64), (17, 33, 65), (64, 2048, 8192), (1000, 999, 998)]


@pytest.fixture(autouse=True)
def no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "_".join(map(str, s)))
def test_inductor_matches_fp32_reference_and_records_compile_time(shape, layout):
    p = Problem(Shape(*shape), layout)
    a, b, c = make_inputs(p)
    prep = prepare("inductor", p, (a, b, c))
    assert prep.compile_s is not None and 0 < prep.compile_s <= prep.setup_s
    a2, b2, c2 = make_inputs(p, seed=1)  # fresh values, same shapes and strides: no recompile
    prep.fn(a2, b2, c2)
    torch.cuda.synchronize()
    assert torch.isfinite(c2).all()
    assert rel_err(c2, reference(p, a2, b2)) < TOL


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_inductor_call_replays_in_a_cuda_graph(layout):
    p = Problem(Shape(96, 80, 200), layout)
    a, b, c = make_inputs(p)
    prep = prepare("inductor", p, (a, b, c))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        prep.fn(a, b, c)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(3):
            prep.fn(a, b, c)
    a.copy_(torch.empty_like(a).uniform_(-1, 1))
    c.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    assert rel_err(c, reference(p, a, b)) < TOL
