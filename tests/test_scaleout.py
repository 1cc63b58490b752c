"""compare on Ray actors (the CPU path, a real local Ray instance): the single-process run's rows,
a killed actor costs only its shape, and a resume with another actor count loses and duplicates
nothing."""

import os
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results import KEY_COLUMNS, RESULT_COLUMNS, read_results, read_samples

ray = pytest.importorskip("ray")

TESTS = Path(__file__).resolve().parent
SHAPES = "16_16_16,24_24_24,8_40_24,32_8_16"
COMMON = ("--device", "cpu", "--layouts", "nn,tn", "--budget", "0.1", "--min-rounds", "3", "--seed", "7",
          "--isolate", "off", "--plugin", "scaleout_plugins")
# Columns a rerun with the same seed need not repeat: identity of the run, and what timing measured.
TIMING = {"run_id", "measured_at", "setup_s", "compile_s", "stop_reason", "rounds", "calls_measured",
          "calls_per_batch", "tflops", "below_floor", "info"} | {
    c for c in RESULT_COLUMNS if c.startswith(("device_us_", "host_us_"))}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One Ray instance for the module (start-up takes seconds); its workers import this tests
    folder's plug-ins, and the CLI uses it rather than starting its own."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + ([old] if old else []))
    ray.init(num_cpus=3, include_dashboard=False, configure_logging=False, object_store_memory=80 << 20)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def compare(*args):
    res = CliRunner().invoke(app, ["compare", *COMMON, *args], catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res


def frame(path):
    return read_results(path).to_pandas().sort_values(["shape", "layout", "method"]).reset_index(drop=True)


def test_two_actors_write_the_rows_of_the_single_process_run(tmp_path):
    methods = ("--methods", "torch,t-good", "--shapes", SHAPES)
    compare(*methods, "--out", str(tmp_path / "one.parquet"))
    res = compare(*methods, "--workers", "2", "--out", str(tmp_path / "ray.parquet"))
    assert "2 Ray actors" in res.output
    one, two = frame(tmp_path / "one.parquet"), frame(tmp_path / "ray.parquet")
    assert len(one) == 4 * 2 * 2 and not one.duplicated(list(KEY_COLUMNS)).any()
    assert (one["status"] == "ok").all()
    same = [c for c in one.columns if c not in TIMING]
    assert list(one.columns) == list(two.columns)
    assert one[same].equals(two[same]), one[same].compare(two[same])
    assert (two["device_us_median"] > 0).all()
    assert len(read_samples(tmp_path / "ray.parquet")) > 0


def test_a_killed_actor_costs_only_its_shape(tmp_path):
    marker = tmp_path / "killed-once"
    out = tmp_path / "r.parquet"
    compare("--workers", "2", "--shapes", SHAPES, "--layouts", "nn", "--methods", "torch",
            "--methods", "t-kill-actor:24_24_24", "--methods", f"t-kill-once:{marker}", "--out", str(out))
    assert marker.exists()  # one actor died on a shape that its retry then measured
    df = frame(out)
    assert len(df) == 4 * 3 and not df.duplicated(list(KEY_COLUMNS)).any()
    lost = df[df["shape"] == "24_24_24"]
    assert (lost["status"] == "error").all()
    reason = lost["status_reason"].iloc[0]
    assert reason.startswith("harness error on this shape") and reason.count("died") == 2, reason
    assert (df[df["shape"] != "24_24_24"]["status"] == "ok").all()


def test_resume_with_another_actor_count_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "r.parquet"
    compare("--workers", "1", "--shapes", "16_16_16,24_24_24", "--methods", "torch",
            "--methods", "t-kill-actor:24_24_24", "--out", str(out))
    first = frame(out)
    assert (first[first["shape"] == "24_24_24"]["status"] == "error").all()
    res = compare("--workers", "2", "--shapes", SHAPES, "--methods", "torch", "--methods", "t-kill-actor:none",
                  "--out", str(out))
    assert "resuming" in res.output
    df = frame(out)
    assert len(df) == 4 * 2 * 2 and not df.duplicated(list(KEY_COLUMNS)).any()
    assert (df["status"] == "ok").all()  # the shape lost in the first run was measured again
    assert df["run_id"].nunique() == 1
    cols = ["method", "layout", "measured_at", "device_us_median", "calls_measured"]
    kept = first[first["shape"] == "16_16_16"][cols].reset_index(drop=True)
    again = df[df["shape"] == "16_16_16"][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, again, check_dtype=False)  # a finished shape is not measured again


@pytest.mark.parametrize("args, needle", [
    (("--workers", "2", "--gpus", "1"), "give one of them"),
    (("--gpus", "2"), "use --workers N instead of --gpus"),
    (("--workers", "0"), "--workers must be >= 1"),
    (("--ray", "127.0.0.1:1"), "--device cpu runs CPU actors: use --workers N"),
])
def test_bad_scale_out_options_are_one_clear_error(tmp_path, args, needle):
    res = CliRunner().invoke(app, ["compare", "--device", "cpu", "--shapes", "8_8_8", "--out",
                                   str(tmp_path / "r.parquet"), *args])
    assert res.exit_code == 2 and needle in " ".join(res.output.split()), res.output


def test_isolated_actors_keep_the_sandbox(tmp_path):
    """A run with untrusted methods measures in a sandboxed worker inside each actor: a method that
    kills its worker costs that method, not the shape."""
    out = tmp_path / "r.parquet"
    res = compare("--workers", "2", "--shapes", "16_16_16,24_24_24", "--layouts", "nn", "--isolate", "on",
                  "--methods", "torch,t-good,t-exit-call", "--out", str(out))
    assert "sandboxed worker | 2 Ray actors" in " ".join(res.output.split())
    df = frame(out)
    assert len(df) == 2 * 3
    assert (df[df["method"] != "t-exit-call"]["status"] == "ok").all()
    died = df[df["method"] == "t-exit-call"]
    assert (died["status"] == "error").all() and died["status_reason"].str.contains("worker died in gate").all()


@pytest.mark.gpu
def test_one_gpu_actor_writes_the_rows_of_the_single_process_run(tmp_path):
    """On a GPU host: --gpus 1 gives the single-process run's rows (timing and clocks aside)."""
    gpu = ("--layouts", "nn,tn", "--budget", "0.2", "--seed", "7", "--isolate", "off",
           "--methods", "torch,cublas", "--shapes", "64_64_64,256_128_512")
    for extra, name in (((), "one"), (("--gpus", "1"), "ray")):
        res = CliRunner().invoke(app, ["compare", *gpu, *extra, "--out", str(tmp_path / f"{name}.parquet")],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.output
    one, two = frame(tmp_path / "one.parquet"), frame(tmp_path / "ray.parquet")
    clocks = {"sm_clock_mhz_mean", "mem_clock_mhz_mean", "power_w_mean", "temp_c_max", "throttled", "throttle_reasons"}
    same = [c for c in one.columns if c not in TIMING | clocks]
    assert (one["status"] == "ok").all() and len(one) == len(two) == 2 * 2 * 2
    pd.testing.assert_frame_equal(one[same], two[same], check_dtype=False)
