"""The terminal summary: intervals only where they are shown, the same ratios either way."""

import io

import pandas as pd
from rich.console import Console

import harness.summary as summary


def _run(n_shapes: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, samples = [], []
    for i in range(n_shapes):
        shape = f"{64 * (i + 1)}_64_64"
        for method, base_us in (("cublaslt-autotune", 10.0), ("torch", 8.0 + 0.01 * i)):
            rows.append(dict(shape=shape, mode="offline", cache="warm", method=method, layout="tn", status="ok",
                             gate_passed=True, below_floor=False, device_us_median=base_us, host_us_median=20.0,
                             device="cuda"))
            samples += [dict(shape=shape, mode="offline", cache="warm", method=method, layout="tn", round=r,
                             metric="device_us", value=base_us * (1 + 0.001 * ((r * 7) % 5))) for r in range(12)]
    return pd.DataFrame(rows), pd.DataFrame(samples)


def test_a_run_too_large_for_the_per_row_table_gets_no_bootstrap_and_the_same_geomeans(monkeypatch):
    asked = []
    real = summary.paired_speedup

    def spy(*args, **kw):
        asked.append(kw.get("ci", True))
        return real(*args, **kw)

    monkeypatch.setattr(summary, "paired_speedup", spy)
    out = io.StringIO()
    results, samples = _run(30)
    summary.print_summary(results, samples, "cublaslt-autotune", Console(file=out, width=200), per_shape_limit=24)
    assert asked and not any(asked)  # 30 shapes: geomeans alone, no interval computed
    with_ci = summary.geomean_by_method(summary.compute_speedups(results, samples, "cublaslt-autotune"))
    assert f"{with_ci.set_index('method').loc['torch', 'geomean']:.3f}" in out.getvalue()

    asked.clear()
    small, small_samples = _run(3)
    summary.print_summary(small, small_samples, "cublaslt-autotune", Console(file=io.StringIO(), width=200))
    assert asked and all(asked)  # the per-row table shows intervals: they are computed


def test_failure_reasons_print_as_they_are_even_with_brackets():
    """A kernel's error text is not markup: '[/tmp/k.cu]' or '[with T = half]' prints whole and
    cannot stop the summary (a closing tag that matches nothing raised MarkupError)."""
    results, samples = _run(2)
    reason = "nvcc failed: [/tmp/k.cu:12] error [with T = half]"
    results.loc[1, ["status", "status_reason", "method"]] = ["error", reason, "splitk"]
    out = io.StringIO()
    summary.print_summary(results, samples, "cublaslt-autotune", Console(file=out, width=200))
    assert reason in out.getvalue()
