"""lab/library_check.py: the per-shape table of the exported library vs cuBLASLt autotune.

A synthetic compare run is written through the real ``ResultStore`` (the file, metadata and
samples layout ``compare`` writes), with times chosen so every number of the table is known.
Why this can fail: a speedup taken from one layout instead of best-of-layouts on both sides, a
failed library row scored, a fallback counted as a searched kernel, wrong summary counts.
"""

import json
import math
from pathlib import Path

import pytest

from harness.results import SCHEMA_VERSION, ResultStore

LIB = "library:path=results/search-h200/library.json"
BASE = "cublaslt-autotune"


def _script():
    from lab import library_check

    return library_check


def row(shape, method, layout, us, info=None, status="ok", **kw):
    m, n, k = map(int, shape.split("_"))
    r = dict(schema_version=SCHEMA_VERSION, run_id="r1", gpu_uuid="GPU-1", gpu_name="NVIDIA H200", device="cuda",
             shape=shape, m=m, n=n, k=k, layout=layout, dtype="float16", method=method,
             family="library" if method.startswith("library") else "cublaslt", is_baseline=method == BASE,
             config="{}", info=json.dumps(info or {}), mode="offline", cache="warm", status=status,
             status_reason="" if status == "ok" else "boom", gate_passed=status == "ok",
             device_us_median=us if status == "ok" else None, below_floor=False, rounds=4, calls_measured=40)
    r.update(kw)
    return r


def kernel(match, spec, shape=None):
    return dict(library_match=match, library_shape=shape, library_spec=spec, library_kind="kernel",
                library_family=spec.split(":")[0])


def fallback(spec):
    return dict(library_match="exact", library_spec=spec, library_kind="baseline", library_family="baseline",
                fallback=spec)


TORCH = dict(library_match="fallback", fallback="torch", library_spec="torch")
K1 = "splitk:bm=64,bn=64,splits=2"
K2 = "hopper:tile=128x256"


def samples(shape, method, layout, values):
    return [dict(run_id="r1", gpu_uuid="GPU-1", shape=shape, layout=layout, method=method, mode="offline",
                 cache="warm", round=i, metric="device_us", value=v, sm_clock_mhz=1980.0) for i, v in enumerate(values)]


@pytest.fixture
def results(tmp_path):
    p = tmp_path / "library.parquet"
    st = ResultStore(p, "r1")
    # A: library nn (exact kernel) 8 vs autotune nn 10 (its best): 1.25x; six paired rounds, the fewest
    # that give a 95 % CI
    st.add_group([row("64_64_64", BASE, "nn", 10.0), row("64_64_64", BASE, "tn", 12.0),
                  row("64_64_64", LIB, "nn", 8.0, kernel("exact", K1)), row("64_64_64", LIB, "tn", 9.0, kernel("exact", K1))],
                 samples("64_64_64", BASE, "nn", [10.0, 10.2, 9.8, 10.1, 10.0, 9.9]) + samples("64_64_64", LIB, "nn", [8.0, 8.1, 7.9, 8.0, 8.0, 7.95]))
    # B: a baseline entry serves; autotune's best is tn (16), the library's best is tn (16.5): 0.970x
    st.add_group([row("128_256_512", BASE, "nn", 20.0), row("128_256_512", BASE, "tn", 16.0),
                  row("128_256_512", LIB, "nn", 17.0, fallback("cublaslt")),
                  row("128_256_512", LIB, "tn", 16.5, fallback("cublaslt"))], [])
    # C: nearest kernel in nn (99); its tn row failed the gate and must not count: 100/99
    st.add_group([row("4096_4096_4096", BASE, "nn", 100.0), row("4096_4096_4096", BASE, "tn", 101.0),
                  row("4096_4096_4096", LIB, "nn", 99.0, kernel("nearest", K2, "4096_4096_2048")),
                  row("4096_4096_4096", LIB, "tn", 50.0, kernel("nearest", K2, "4096_4096_2048"), status="gate_failed",
                      gate_passed=False)], [])
    # D: no clean library row at all: shown, not scored
    st.add_group([row("256_128_16384", BASE, "nn", 50.0), row("256_128_16384", BASE, "tn", 55.0),
                  row("256_128_16384", LIB, "nn", None, status="error"),
                  row("256_128_16384", LIB, "tn", None, status="error")], [])
    # E: torch.matmul fallback, as fast as autotune
    st.add_group([row("32_32_32", BASE, "nn", 40.0), row("32_32_32", LIB, "nn", 40.0, TORCH)], [])
    return p


def test_library_table_numbers(results):
    lc = _script()
    from harness.results import read_results, read_samples

    df = read_results(results).to_pandas()
    t = lc.library_table(df, read_samples(results).to_pandas()).set_index("shape")
    assert list(t.index) == ["32_32_32", "64_64_64", "128_256_512", "256_128_16384", "4096_4096_4096"]
    a = t.loc["64_64_64"]
    assert (a.base_us, a.lib_us, a.layout, a.served, a.spec) == (10.0, 8.0, "nn", "searched", K1)
    assert a.speedup == pytest.approx(1.25) and a.rule == "exact kernel" and a.ci_lo <= 1.25 <= a.ci_hi
    b = t.loc["128_256_512"]
    assert (b.base_us, b.lib_us, b.layout, b.served) == (16.0, 16.5, "tn", "fallback")
    assert b.speedup == pytest.approx(16 / 16.5) and b.rule == "exact fallback=cublaslt" and math.isnan(b.ci_lo)
    c = t.loc["4096_4096_4096"]
    assert (c.lib_us, c.layout, c.served) == (99.0, "nn", "searched") and c.speedup == pytest.approx(100 / 99)
    assert c.rule == "nearest kernel (4096_4096_2048)"
    d = t.loc["256_128_16384"]
    assert d.base_us == 50.0 and math.isnan(d.lib_us) and math.isnan(d.speedup) and d.status.startswith("error")
    e = t.loc["32_32_32"]
    assert e.speedup == pytest.approx(1.0) and e.rule == "fallback torch" and e.served == "fallback"
    s = lc.summarize(t.reset_index())
    assert s["geomean"] == pytest.approx((1.25 * (16 / 16.5) * (100 / 99) * 1.0) ** 0.25)
    assert s["min"] == pytest.approx(16 / 16.5)
    assert (s["shapes"], s["scored"], s["below"], s["searched"], s["fallback"], s["failed"]) == (5, 4, 1, 2, 2, 1)


def test_library_check_main_prints_the_table(results, capsys):
    lc = _script()
    assert lc.main([str(results)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[2].startswith("| M_N_K | cublaslt-autotune us | library us | speedup |")
    row_a = next(ln for ln in lines if ln.startswith("| 64_64_64 "))
    assert "| 10.00 | 8.00 | 1.250x |" in row_a and "exact kernel" in row_a and K1 in row_a
    row_d = next(ln for ln in lines if ln.startswith("| 256_128_16384 "))
    assert "| 50.00 | - | - |" in row_d and "error: boom" in row_d
    assert lines[-2] == ("geomean speedup 1.0519x over 4 of 5 shapes; min 0.970x; 1 below 0.98x; served by searched "
                         "kernels: 2, by a fallback: 2; 1 without a clean library row")
    assert lines[-1] == ("targets: geomean >= 1.05x missed (shapes without a row); "
                         "none below 0.98x missed (shapes without a row)")


@pytest.mark.parametrize("geo, below, want", [
    (1.0495330508695155, 0, "geomean >= 1.05x missed (1.04953x); none below 0.98x met"),  # prints 1.050x at 3 digits
    (1.0500001, 0, "geomean >= 1.05x met; none below 0.98x met"),
    (1.08, 2, "geomean >= 1.05x met; none below 0.98x missed (2 below, min 0.950x)")])
def test_verdict_is_decided_on_the_unrounded_figures(geo, below, want):
    lc = _script()
    summ = dict(geomean=geo, min=0.95 if below else 0.983, below=below, failed=0)
    assert lc.verdict(summ) == "targets: " + want


def test_library_check_needs_one_library_method(results, tmp_path, capsys):
    lc = _script()
    st = ResultStore(results, "r1")
    st.add_group([row("8_8_8", BASE, "nn", 1.0), row("8_8_8", "library", "nn", 1.0, TORCH)], [])
    assert lc.main([str(results)]) == 2
    assert "use --library" in capsys.readouterr().err
    assert lc.main([str(results), "--library", LIB]) == 0


def test_two_library_methods_are_paired_on_the_shapes_both_served():
    """``--versus``: both geomeans over the shapes both methods served cleanly (a shape only one
    served, or one without a clean row, is left out) and the first's paired ratio over the second."""
    import pandas as pd

    lc = _script()
    cols = ["shape", "mode", "cache", "speedup"]
    a = pd.DataFrame([("64_64_64", "offline", "warm", 1.2), ("128_64_64", "offline", "warm", 0.5),
                      ("256_64_64", "offline", "warm", math.nan)], columns=cols)
    b = pd.DataFrame([("64_64_64", "offline", "warm", 1.2), ("128_64_64", "offline", "warm", 1.0),
                      ("256_64_64", "offline", "warm", 1.1), ("512_64_64", "offline", "warm", 1.3)], columns=cols)
    lines = lc.paired_lines(a, b, "lib", "lib:max_distance=inf")
    assert lines[0].startswith("| geomean, 2 shapes (95 % bootstrap) | **0.775x (")
    assert "| **1.095x (" in lines[0]  # sqrt(1.2 * 1.0)
    assert lines[1].startswith("paired, lib over lib:max_distance=inf: 0.707x (") and lines[1].endswith(
        "better on 0, worse on 1 of 2")
    assert lc.paired_lines(a.iloc[2:], b, "lib", "other") == ["no shape served cleanly by both"]
