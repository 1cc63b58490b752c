"""The CLI end to end on the CPU path: compare -> Parquet -> summary, errors, and kill/resume."""

import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from conftest import HAS_CUDA
from harness.cli import app
from harness.results import read_results, read_samples

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_compare_cpu_end_to_end(tmp_path):
    out = tmp_path / "r.parquet"
    res = run("compare", "--device", "cpu", "--shapes", "64_64_64,17_33_65", "--mode", "both", "--budget", "0.3",
              "--server-calls", "5", "--qps", "2000", "--out", str(out), "--seed", "1")
    assert res.exit_code == 0, res.output
    assert "CPU path" in res.output and "geomean speedup" in res.output
    df = read_results(out).to_pandas()
    assert set(df["device"]) == {"cpu"}
    # every default method x 2 layouts x 2 modes x 2 shapes is a row; GPU-only ones say so
    assert len(df) == df["method"].nunique() * 2 * 2 * 2
    torch_rows = df[df["method"] == "torch"]
    assert (torch_rows["status"] == "ok").all() and torch_rows["gate_passed"].all()
    assert (torch_rows["device_us_median"] > 0).all() and (torch_rows["host_us_median"] > 0).all()
    gpu_only = df[df["method"] != "torch"]
    assert len(gpu_only) and (gpu_only["status"] == "unsupported").all()
    assert gpu_only["status_reason"].str.contains("unsupported on cpu").all()
    srv = torch_rows[torch_rows["mode"] == "server"]
    assert (srv["rounds"] == 5).all() and (srv["qps"] == 2000).all()
    samples = read_samples(out).to_pandas()
    assert set(samples["metric"]) == {"device_us", "host_us"}
    # rerun: everything is done, nothing is measured again
    res2 = run("compare", "--device", "cpu", "--shapes", "64_64_64,17_33_65", "--mode", "both", "--out", str(out))
    assert res2.exit_code == 0 and "resuming" in res2.output
    assert len(read_results(out).to_pandas()) == len(df)
    assert "not be measured there" not in res2.output
    # a method added on resume is not measured on finished groups: the run says so
    res3 = run("compare", "--device", "cpu", "--shapes", "64_64_64", "--mode", "offline", "--out", str(out),
               "--methods", "torch,splitk")
    assert res3.exit_code == 0
    assert "warning" in res3.output and "splitk" in res3.output and "--fresh" in res3.output, res3.output
    assert len(read_results(out).to_pandas()) == len(df)


def test_compare_plan_measures_each_shape_with_its_own_methods(tmp_path):
    """``--plan``: a shape gets its line's methods and --methods, no other (in the sandboxed
    worker too: a family method makes the run isolated); a rerun resumes without a warning about
    methods a shape was never planned to have."""
    plan = tmp_path / "plan.txt"
    plan.write_text("# shape  methods\n64_64_64 torch\n\n17_33_65   splitk:bm=64,splits=4,cublas  # a family spec keeps its k=v\n")
    out = tmp_path / "r.parquet"
    args = ("compare", "--device", "cpu", "--plan", str(plan), "--methods", "cublaslt", "--budget", "0.2",
            "--out", str(out), "--seed", "1")
    res = run(*args)
    assert res.exit_code == 0, res.output
    assert "sandboxed worker" in " ".join(res.output.split())
    df = read_results(out).to_pandas()
    got = {s: set(g["method"]) for s, g in df.groupby("shape")}
    splitk = next(m for m in got["17_33_65"] if m.startswith("splitk"))
    assert "bm=64" in splitk and "splits=4" in splitk
    assert got == {"64_64_64": {"torch", "cublaslt"}, "17_33_65": {splitk, "cublas", "cublaslt"}}
    assert len(df) == 2 * (2 + 3)  # both layouts
    assert (df[df["method"] == "torch"]["status"] == "ok").all()
    res2 = run(*args)
    assert res2.exit_code == 0 and "resuming" in res2.output and "not be measured there" not in res2.output
    assert len(read_results(out).to_pandas()) == len(df)


@pytest.mark.parametrize("text,needle", [
    ("64_64_64\n", "line 1: expected 'M_N_K METHOD"),
    ("64_64 torch\n", "line 1: malformed shape '64_64'"),
    ("64_64_64 torch\n# again\n64_64_64 cublas\n", "line 3: shape 64_64_64 is already planned on line 1"),
    ("# nothing\n", "names no shapes"),
    ("64_64_64 nosuch\n", "unknown method 'nosuch'"),
])
def test_bad_plan_is_one_clear_error(tmp_path, text, needle):
    plan = tmp_path / "plan.txt"
    plan.write_text(text)
    res = runner.invoke(app, ["compare", "--device", "cpu", "--plan", str(plan), "--out", str(tmp_path / "r.parquet")])
    said = " ".join(res.output.split())  # the console wraps long lines
    assert res.exit_code == 2 and needle in said and "Traceback" not in said, said
    assert not (tmp_path / "r.parquet").exists()


def test_plan_and_shapes_together_or_a_missing_plan_are_clear_errors(tmp_path):
    plan = tmp_path / "plan.txt"
    plan.write_text("64_64_64 torch\n")
    res = runner.invoke(app, ["compare", "--device", "cpu", "--plan", str(plan), "--shapes", "8_8_8"])
    assert res.exit_code == 2 and "not both" in res.output
    res = runner.invoke(app, ["compare", "--device", "cpu", "--plan", str(tmp_path / "none.txt")])
    assert res.exit_code == 2 and "none.txt" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("args,needle", [
    (["--shapes", "64_64"], "malformed shape '64_64'"),
    (["--shapes", "0_1_1"], "M=0"),
    (["--methods", "nosuch"], "unknown method 'nosuch'"),
    (["--methods", "cublaslt-autotune:frobnicate=1"], "bad method spec"),
    (["--layouts", "nt"], "unknown layout"),
    (["--qps", "0"], "must be > 0"),
])
def test_bad_input_is_one_clear_error(tmp_path, args, needle):
    res = runner.invoke(app, ["compare", "--device", "cpu", "--out", str(tmp_path / "r.parquet"), *args])
    assert res.exit_code == 2
    assert needle in res.output
    assert "Traceback" not in res.output


@pytest.mark.skipif(HAS_CUDA, reason="checks the error on a machine without a GPU")
def test_device_cuda_without_gpu_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["compare", "--device", "cuda", "--out", str(tmp_path / "r.parquet")])
    assert res.exit_code == 2 and "--device cuda was requested" in res.output


def test_corrupt_out_file_is_not_overwritten(tmp_path):
    out = tmp_path / "r.parquet"
    out.write_bytes(b"garbage")
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "8_8_8", "--out", str(out)])
    assert res.exit_code == 2 and "not a readable Parquet" in res.output and "--fresh" in res.output
    assert out.read_bytes() == b"garbage"


def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "r.parquet"
    shapes = ",".join(f"{16 + i}_{24 + i}_{32 + i}" for i in range(12))
    cmd = [sys.executable, "-m", "harness.cli", "compare", "--device", "cpu", "--methods", "torch",
           "--shapes", shapes, "--budget", "0.4", "--min-rounds", "3", "--ci-target", "0.0001", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if out.exists() and len(read_results(out)) >= 6:  # at least 3 shapes x 2 layouts finished
            break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    before = read_results(out).to_pandas()
    assert 6 <= len(before) < 24, "the kill should land mid-run"
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    after = read_results(out).to_pandas()
    keys = ["shape", "layout", "method", "mode", "cache"]
    assert len(after) == 24 and not after.duplicated(keys).any()
    assert after["run_id"].nunique() == 1
    assert (after["status"] == "ok").all(), after["status_reason"].unique()
    # rows finished before the kill were kept as measured, not measured again
    merged = before.merge(after, on=keys, suffixes=("_b", "_a"))
    assert (merged["device_us_median_b"] == merged["device_us_median_a"]).all()
    samples = read_samples(out).to_pandas()
    assert not samples.duplicated(keys + ["round", "metric"]).any()
    assert set(samples["shape"]) == set(after["shape"])


def test_method_specs_keep_their_knob_lists():
    from harness.cli import _split_methods

    assert _split_methods(["splitk:bm=64,splits=16,torch", "cublas"]) == ["splitk:bm=64,splits=16", "torch", "cublas"]
    assert _split_methods(["a=1"]) == ["a=1"]  # nothing to attach to: left for the registry to reject


def test_kernels_dir_errors_name_the_problem(tmp_path):
    res = runner.invoke(app, ["compare", "--device", "cpu", "--kernels-dir", str(tmp_path / "nope"),
                              "--out", str(tmp_path / "r.parquet")])
    assert res.exit_code == 2 and "not a directory" in res.output
    bad = tmp_path / "k"
    bad.mkdir()
    (bad / "junk.cu").write_text("__global__ void k() {}\n")
    res = runner.invoke(app, ["compare", "--device", "cpu", "--kernels-dir", str(bad), "--out", str(tmp_path / "r.parquet")])
    assert res.exit_code == 2 and "junk.cu" in res.output


def test_kernels_dir_methods_reach_the_run(tmp_path):
    """C-ABI kernels from a directory become cu:<stem> rows (unsupported on the CPU path)."""
    from pathlib import Path

    src = Path(__file__).parent / "adversarial"
    d = tmp_path / "k"
    d.mkdir()
    (d / "common.cuh").write_text((src / "common.cuh").read_text())
    (d / "mine.cu").write_text((src / "control.cu").read_text())
    out = tmp_path / "r.parquet"
    res = runner.invoke(app, ["compare", "--device", "cpu", "--kernels-dir", str(d), "--methods", "torch",
                              "--shapes", "8_8_8", "--layouts", "nn", "--budget", "0.2", "--out", str(out)],
                        env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    df = read_results(out).to_pandas()
    row = df[df["method"] == "cu:mine"].iloc[0]
    assert row["status"] == "unsupported" and "cpu" in row["status_reason"]


def test_search_is_mounted_and_llm_flags_fail_clearly(tmp_path):
    res = runner.invoke(app, ["search", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--llm-backend" in res.output and "--budget" in res.output
    res = runner.invoke(app, ["search", "--device", "cpu", "--shapes", "8_8_8", "--budget", "1s", "--llm",
                              "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "--llm-url" in res.output
