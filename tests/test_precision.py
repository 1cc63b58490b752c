"""The precision check on the CPU: judged on the shape under test, with a tolerance for its K.

A kernel built for one shape is judged on that shape only; where K is too small to tell fp16 from
fp32 accumulation the verdict says so, and only a method serving any shape is probed at a large K.
fp16 accumulation at large K still fails, with the figures in the verdict.
"""

import json

import pytest
import torch

from harness import env as envmod
from harness import precision
from harness.anticheat import PRECISION_PROBE, check_precision, run_anticheat
from harness.evaluate import CompareSettings, ShapeEvaluator
from harness.method import SUPPORTED, Prepared, unsupported
from harness.problem import Problem, Shape
from harness.registry import resolve


def fp32_acc(layout):
    def fn(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)
    return fn


def fp16_acc(layout, chunk=precision.FP16_CHUNK):
    """Rounds its accumulator to fp16 every ``chunk`` products."""
    def fn(a, b, c):
        bb = b if layout == "nn" else b.t()
        acc = torch.zeros(c.shape, dtype=torch.float16)
        for k0 in range(0, a.shape[1], chunk):
            acc += (a[:, k0:k0 + chunk].float() @ bb[k0:k0 + chunk].float()).half()
        c.copy_(acc)
    return fn


def test_the_error_model_matches_fp16_and_fp32_accumulation():
    """The figures the tolerance rests on: fp32 accumulation near one rounding at any K, fp16
    accumulation growing like sqrt(K), both within 35 % of the formula on normal draws."""
    g = torch.Generator().manual_seed(0)
    for k in (1024, 8192):
        a = torch.randn(64, k, generator=g).half()
        b = torch.randn(k, 128, generator=g).half()
        ref = a.double() @ b.double()
        c = torch.empty(64, 128, dtype=torch.float16)
        for fn, expected in ((fp32_acc("nn"), precision.fp32_accumulation_error(k)),
                             (fp16_acc("nn"), precision.fp16_accumulation_error(k))):
            fn(a, b, c)
            rel = float((c.double() - ref).norm() / ref.norm())
            assert 0.65 * expected < rel < 1.35 * expected, (k, rel, expected)
    # fp32 accumulation stays ~TOL_FACTOR under the tolerance at every K; K decides decisiveness
    for k in (16, 1024, 8192, 1 << 20):
        v = precision.accumulation_verdict(k, precision.fp32_accumulation_error(k))
        assert v.passed and v.tol >= 3.9 * v.rel_err
    assert not precision.accumulation_verdict(1024, 0.0).decisive
    assert precision.accumulation_verdict(8192, 0.0).decisive


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_fp16_accumulation_at_large_k_fails_on_the_shape_under_test(layout):
    p = Problem(Shape(64, 128, 8192), layout)
    f = check_precision(p, fp16_acc(layout), "cpu", seed=3)
    assert not f.passed and not f.skipped
    assert "64_128_8192" in f.reason and "K=8192" in f.reason and "tolerance" in f.reason, f.reason
    assert f.figures["rel_fro_err"] > 2 * f.figures["tol_rel_fro"] and f.figures["decisive"]
    ok = check_precision(p, fp32_acc(layout), "cpu", seed=3)
    assert ok.passed and not ok.skipped and ok.reason == "", ok.reason
    assert ok.figures["rel_fro_err"] < ok.figures["tol_rel_fro"] / 2


def test_small_k_says_it_cannot_tell_and_probes_only_methods_serving_any_shape():
    p = Problem(Shape(32, 48, 64), "nn")
    own_only = check_precision(p, fp16_acc("nn"), "cpu", seed=3)  # no probe: a per-shape kernel
    assert own_only.passed and own_only.skipped
    assert "K=64 is too small to tell fp16 from fp32" in own_only.reason
    assert "serves only its own shapes" in own_only.reason
    probed = []

    def make_probe(q):
        probed.append(q)
        return fp16_acc(q.layout)

    f = check_precision(p, fp16_acc("nn"), "cpu", seed=3, make_probe_fn=make_probe)
    assert probed == [Problem(PRECISION_PROBE, "nn")]
    assert not f.passed and f.reason.startswith("large-K probe 64_128_8192"), f.reason
    assert f.figures["probe"]["rel_fro_err"] > f.figures["probe"]["tol_rel_fro"]
    f = check_precision(p, fp32_acc("nn"), "cpu", seed=3, make_probe_fn=lambda q: fp32_acc(q.layout))
    assert f.passed and not f.skipped and f.figures["probe"]["decisive"]


def test_the_report_carries_the_note_of_a_check_that_could_not_decide():
    report = run_anticheat(Problem(Shape(16, 16, 16)), fp32_acc("nn"), "cpu")
    figs = report.figures()
    assert report.passed and "too small" in figs["precision"]["note"]
    assert figs["side_stream"]["note"] == "needs a GPU"


class _OwnShape:
    """A CPU kernel written for one shape, like a per-shape external release: on any other shape it
    computes garbage. It claims every problem (as an extension file does) and says ``any_shape = False``."""

    family = "test"
    config: dict = {}
    source_hash = ""
    is_baseline = False
    devices = ("cpu",)
    any_shape = False

    def __init__(self, name, shape, accumulate=fp32_acc):
        self.name, self.shape, self.accumulate = name, shape, accumulate
        self.prepared_for = []

    def supports(self, problem, device):
        return SUPPORTED if problem.dtype == "float16" else unsupported("fp16 only")

    def prepare(self, problem, ctx):
        self.prepared_for.append(problem.shape)
        right = self.accumulate(problem.layout)

        def fn(a, b, c):
            if problem.shape != self.shape:
                c.fill_(7.0)
            else:
                right(a, b, c)
        return Prepared(fn)


class _AnyShape(_OwnShape):
    any_shape = True


def _evaluate(shape, methods):
    settings = CompareSettings(shapes=[shape], layouts=["nn"], budget_s=0.1, min_rounds=3, max_rounds=5, seed=1)
    ev = ShapeEvaluator(settings, resolve(["torch"]) + methods, envmod.collect("cpu"), "run")
    rows = ev.evaluate(shape, [("offline", "warm")], lambda rows, samples: None)
    return {r["method"]: r for r in rows}


def test_a_per_shape_method_gets_its_verdict_on_its_own_shape():
    shape = Shape(32, 48, 64)
    own = _OwnShape("own-shape", shape)
    any_fp16 = _AnyShape("any-shape-fp16", shape, accumulate=fp16_acc)
    rows = _evaluate(shape, [own, any_fp16])
    assert own.prepared_for == [shape]  # never prepared for the probe shape
    r = rows["own-shape"]
    assert r["status"] == "ok", r["status_reason"]
    prec = json.loads(r["info"])["anticheat"]["precision"]
    assert prec["shape"] == "32_48_64" and prec["skipped"] and "too small" in prec["note"]
    # the same fp16 accumulation from a method serving any shape: caught by the large-K probe
    bad = rows["any-shape-fp16"]
    assert PRECISION_PROBE in any_fp16.prepared_for
    assert bad["status"] == "gate_failed" and "anti-cheat: precision: large-K probe" in bad["status_reason"]
    assert "tolerance" in bad["status_reason"]


def test_a_per_shape_fp16_accumulator_still_fails_at_large_k():
    shape = Shape(16, 32, 8192)
    own = _OwnShape("own-fp16", shape, accumulate=fp16_acc)
    rows = _evaluate(shape, [own])
    assert own.prepared_for == [shape]
    r = rows["own-fp16"]
    assert r["status"] == "gate_failed" and "tolerance" in r["status_reason"], r["status_reason"]
    assert rows["torch"]["status"] == "ok"
