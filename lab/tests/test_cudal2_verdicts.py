"""lab/cudal2/verdicts.py: the verdict on each per-shape external kernel, on its own shape.

A made-up compare run is written through the real ``ResultStore``, with times and failures chosen
so every cell is known. Why this can fail: a kernel the run never reached dropped instead of listed,
a failed check misnamed or its size lost, a speedup taken against a baseline of the other layout or
one that failed, a failed kernel row scored, the claim taken from the wrong column.
"""

import json
import math

import pytest

from harness.results import SCHEMA_VERSION, ResultStore, read_results, read_samples
from lab.cudal2 import verdicts as vd


def row(shape, method, layout, us, status="ok", reason="", info=None, **kw):
    m, n, k = map(int, shape.split("_"))
    r = dict(schema_version=SCHEMA_VERSION, run_id="r1", gpu_uuid="GPU-1", gpu_name="NVIDIA H200", device="cuda",
             shape=shape, m=m, n=n, k=k, layout=layout, dtype="float16", method=method,
             family="ext" if method.startswith("ext:") else "baseline", is_baseline=not method.startswith("ext:"),
             config="{}", info=json.dumps(info or {}), mode="offline", cache="warm", status=status,
             status_reason=reason, gate_passed=status == "ok" or reason.startswith("anti-cheat"),
             device_us_median=us, below_floor=False, rounds=6, calls_measured=60)
    r.update(kw)
    return r


def samples(shape, method, layout, values):
    return [dict(run_id="r1", gpu_uuid="GPU-1", shape=shape, layout=layout, method=method, mode="offline",
                 cache="warm", round=i, metric="device_us", value=v, sm_clock_mhz=1980.0) for i, v in enumerate(values)]


def six(us):
    return [us, us * 1.01, us * 0.99, us, us * 1.005, us * 0.995]


PRECISION_FAILED = {"anticheat": {"precision": {"shape": "4096_128_1024", "k": 1024, "rel_fro_err": 3e-3,
                                                "tol_rel_fro": 1e-3, "decisive": False, "skipped": False},
                                  "skipped_work": {"same_inputs_us": 5.0, "distinct_inputs_us": 5.1, "skipped": False}}}
PRECISION_SKIPPED = {"anticheat": {"precision": {"k": 64, "rel_fro_err": 2e-4, "tol_rel_fro": 8e-4, "skipped": True,
                                                 "note": "K=64 is too small to tell fp16 from fp32 accumulation"}}}


@pytest.fixture
def run(tmp_path):
    p = tmp_path / "cudal2.parquet"
    st = ResultStore(p, "r1")
    # A (4096_4096_64): ok in both layouts. nn: 8 vs cublaslt 10 (autotune 11): 1.25x; tn: 9 vs torch 9.5
    # (the tn baselines only); best of layouts: 8 vs the best baseline anywhere, torch tn 9.5
    a = "4096_4096_64"
    st.add_group([row(a, "cublaslt", "nn", 10.0), row(a, "cublaslt-autotune", "nn", 11.0),
                  row(a, "torch", "tn", 9.5), row(a, "cublaslt", "tn", 12.0),
                  row(a, "ext:4096_4096_64", "nn", 8.0, info=PRECISION_SKIPPED),
                  row(a, "ext:4096_4096_64", "tn", 9.0, info=PRECISION_SKIPPED),
                  row(a, "cublas", "nn", 1.0, status="gate_failed", reason="wrong values", gate_passed=False)],
                 samples(a, "cublaslt", "nn", six(10.0)) + samples(a, "ext:4096_4096_64", "nn", six(8.0))
                 + samples(a, "torch", "tn", six(9.5)) + samples(a, "ext:4096_4096_64", "tn", six(9.0)))
    # B (4096_128_1024): passes the gate, fails the precision check (3x its tolerance)
    b = "4096_128_1024"
    st.add_group([row(b, "cublaslt-autotune", "nn", 6.0),
                  row(b, "ext:4096_128_1024", "nn", 4.0, status="gate_failed", info=PRECISION_FAILED,
                      reason="anti-cheat: precision: 4096_128_1024: fp16 accumulation")], [])
    # C (1024_12288_64): the gate sees writes outside C in nn; tn's prepare raised
    c = "1024_12288_64"
    st.add_group([row(c, "cublaslt", "nn", 20.0), row(c, "cublaslt", "tn", 21.0),
                  row(c, "ext:1024_12288_64", "nn", None, status="gate_failed",
                      reason="wrote outside C (guard band changed)", gate_rel_fro_err=math.nan),
                  row(c, "ext:1024_12288_64", "tn", None, status="error",
                      reason="prepare raised ExtBuildError: x.cu: extension build failed: error: boom\nmore")], [])
    # D (2048_128_2048): wrong values, 100x the tolerance
    d = "2048_128_2048"
    st.add_group([row(d, "torch", "nn", 5.0),
                  row(d, "ext:2048_128_2048", "nn", 3.0, status="gate_failed",
                      reason="wrong values on the randn draw: rel. Frobenius error 0.05 (tolerance 0.0005)",
                      gate_rel_fro_err=0.05, gate_tol_rel_fro=5e-4, gate_max_norm_err=0.5, gate_tol_max_norm=0.01)], [])
    return p


PLAN = """\
# shape  kernel
4096_4096_64   ext:4096_4096_64
4096_128_1024  ext:4096_128_1024
1024_12288_64  ext:1024_12288_64
2048_128_2048  ext:2048_128_2048
8192_1024_64   ext:8192_1024_64
"""


@pytest.fixture
def plan(tmp_path):
    p = tmp_path / "plan.txt"
    p.write_text(PLAN)
    return p


def _verdicts(run, plan):
    df = read_results(run).to_pandas()
    return df, vd.verdicts(df, read_samples(run).to_pandas(), vd.read_plan(plan))


def test_each_kernel_gets_a_verdict_on_its_own_shape(run, plan):
    _, vs = _verdicts(run, plan)
    got = {(v.kernel, v.layout): v for v in vs}
    assert [(v.kernel, v.layout) for v in vs] == [
        ("ext:4096_4096_64", "nn"), ("ext:4096_4096_64", "tn"), ("ext:4096_128_1024", "nn"),
        ("ext:1024_12288_64", "nn"), ("ext:1024_12288_64", "tn"), ("ext:2048_128_2048", "nn"),
        ("ext:8192_1024_64", "-")]
    a = got["ext:4096_4096_64", "nn"]  # against the fastest passing baseline of its layout, paired
    assert (a.status, a.baseline, a.baseline_us) == ("ok", "cublaslt", 10.0)
    assert a.speedup == pytest.approx(1.25) and a.lo <= 1.25 <= a.hi and "precision undecided at K=64" in a.how_much
    t = got["ext:4096_4096_64", "tn"]
    assert (t.baseline, t.speedup) == ("torch", pytest.approx(9.5 / 9.0))
    b = got["ext:4096_128_1024", "nn"]  # a failed check: named, with its size; never scored
    assert (b.status, b.check) == ("gate_failed", "anti-cheat: precision")
    assert "rel err 0.003 vs tol 0.001 = 3x tol at K=1024" in b.how_much and math.isnan(b.speedup)
    assert a.how_much == "precision undecided at K=64: rel err 0.0002, tol 0.0008, fp16 accumulation would err -"
    c_nn, c_tn = got["ext:1024_12288_64", "nn"], got["ext:1024_12288_64", "tn"]
    assert c_nn.check == "gate: writes outside C" and math.isnan(c_nn.speedup)
    assert (c_tn.status, c_tn.check) == ("error", "error: prepare") and c_tn.how_much.startswith("prepare raised ExtBuildError")
    d = got["ext:2048_128_2048", "nn"]
    assert d.check == "gate: wrong values" and "= 100x tol" in d.how_much and "= 50x tol" in d.how_much
    missing = got["ext:8192_1024_64", "-"]
    assert missing.status == "not measured"


def test_the_table_has_best_of_layouts_and_the_claims(run, plan, tmp_path):
    claims = tmp_path / "claims.csv"
    claims.write_text("mnk,torch.matmul,cuBLAS-max,cuBLASLt-heuristic-max,cuBLASLt-auto-tuning-max\n"
                      "4096_4096_64,1.536,1.625,1.276,1.563\n")
    df, vs = _verdicts(run, plan)
    best = vd.best_of_layouts(df, vs)
    assert set(best) == {"ext:4096_4096_64"}  # only a kernel that passed somewhere is scored
    assert best["ext:4096_4096_64"][:3] == (pytest.approx(9.5 / 8.0), "nn", "torch tn")
    out = vd.render(df, vs, vd.claims_by_shape(claims))
    line = next(ln for ln in out.splitlines() if ln.startswith("| ext:4096_4096_64 | 4096_4096_64 | ok |"))
    assert "1.188x (nn; vs torch tn 9.5 us)" in line and "1.276x (1.563x)" in line
    # a baseline that failed somewhere, or never ran, is named: the best baseline is then a weaker one
    assert "warning: baseline cublas did not pass on 1 of 5 shapes (1 rows; wrong values)" in out
    assert "| ext:1024_12288_64 | 1024_12288_64 | nn: gate_failed / tn: error |" in out
    assert "| ext:8192_1024_64 | 8192_1024_64 | not measured |" in out
    assert "rows: 2 ok, 3 gate_failed, 1 error, 1 not measured" in out
    reasons = out.split("### Reasons", 1)[1]
    assert "ext:1024_12288_64 tn: prepare raised ExtBuildError" in reasons and "ext:4096_4096_64" not in reasons


def test_main_prints_the_table(run, plan, capsys):
    assert vd.main([str(run), "--plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Verdicts: each kernel on its own shape (NVIDIA H200, run r1, offline, warm)")


def test_main_without_results_lists_every_kernel_as_not_measured(tmp_path, plan, capsys):
    assert vd.main([str(tmp_path / "none.parquet"), "--plan", str(plan)]) == 1
    out = capsys.readouterr().out
    assert out.count("not measured") == 5
