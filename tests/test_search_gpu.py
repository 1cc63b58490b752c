"""GPU tests of the search (run on the H200; skipped where CUDA is absent).

A two-shape, one-round search with the mma.sync families (fast to build) through the real
sandboxed evaluator and cuBLAS-family baselines; its exported library served through the
``library`` method in the harness, through ``hgemm()`` and through the custom op, on an exact
shape, a nearest shape and a shape with no entry. Why these can fail: a candidate's spec that
the worker cannot resolve, rewards not paired with a same-call baseline, a dispatcher that serves
an incorrect kernel or an unlabelled fallback on the GPU.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from harness import env as envmod  # noqa: E402
from harness.problem import Shape  # noqa: E402
from harness.sandbox import Evaluator  # noqa: E402
from kernels_search.search.db import KernelDB  # noqa: E402
from kernels_search.search.loop import run_search, search_settings  # noqa: E402
from kernels_search.search.learner import Learner  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SHAPES = [Shape(256, 128, 4096), Shape(512, 512, 512)]


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    from kernels_search.families import ALL

    out = tmp_path_factory.mktemp("search")
    db = KernelDB(out / "db")
    policy = Learner({"splitk": ALL["splitk"], "smalltile": ALL["smalltile"]})
    env = envmod.collect("cuda")
    with Evaluator("cuda", env) as ev:
        s = run_search(SHAPES, 1800, ev, db, policy, batch_per_shape=2, max_rounds=1,
                       settings=search_settings(timing_budget_s=1.0), checkpoint=out / "policy.npz", lookahead=1)
    return out, db, s, env


def test_gpu_search_round_measures_paired_candidates(searched):
    out, db, s, env = searched
    assert s.rounds == 1 and s.candidates == 4
    df = db.df
    cand, base = df[~df.is_baseline], df[df.is_baseline]
    assert {"torch", "cublas", "cublaslt", "cublaslt-autotune"} <= set(base.method)
    assert (cand.gpu_uuid == env["gpu_uuid"]).all()
    ok = cand[cand.status == "ok"]
    assert len(ok) > 0, cand[["method", "status_reason"]].to_string()
    assert ok.reward.between(-1, 1).all() and ok.registers.notna().all() and ok.baseline_us.notna().all()


def test_gpu_library_serves_exact_nearest_and_fallback(searched, tmp_path):
    from kernels_search.search import library as lib

    out, db, _, _ = searched
    path = lib.export_library(db, tmp_path / "lib.json", min_speedup=0.0)  # every shape gets its best kernel
    entries = lib.load_library(path)
    assert {e["shape"] for e in entries} == {s.name for s in SHAPES}
    lib.clear_cache()
    for (m, n, k), match in (((256, 128, 4096), "exact"), ((256, 128, 2048), "nearest")):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = lib.hgemm(a, b, "nn", library=path)
        ref = a.float() @ b.float()
        assert (c.float() - ref).abs().max().item() <= 2e-3 * ref.abs().max().item() + 1e-3
        assert lib.served_by(m, n, k, "nn", device="cuda", library=path)["library_match"] == match
    # the custom op (the default library: whichever rule serves 64_80_96, the product is right)
    a = torch.randn(64, 96, device="cuda", dtype=torch.float16)
    b = torch.randn(80, 96, device="cuda", dtype=torch.float16)
    c = torch.ops.hgemm_bench.hgemm(a, b, "tn")
    assert torch.allclose(c.float(), a.float() @ b.float().t(), rtol=1e-2, atol=1e-1)
    spec = f"library:path={path}"
    with Evaluator("cuda", envmod.collect("cuda"), plugins=["kernels_search.search.library"]) as ev:
        ((rows, _),) = ev.evaluate_shape(Shape(256, 128, 4096), ["cublaslt", spec],
                                         search_settings(["nn", "tn"], timing_budget_s=0.5), [("offline", "warm")], "t")
    got = {(r["method"], r["layout"]): r for r in rows}
    assert got[(spec, "nn")]["status"] == "ok" and json.loads(got[(spec, "nn")]["info"])["library_match"] == "exact"
