"""The CLI end to end on the CPU path: compare -> Parquet -> summary, errors, and kill/resume."""

import os
import signal
import subprocess
import sys
import time

from pathlib import Path

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


@pytest.mark.parametrize("flag, attr, value", [
    ((), "prime", True), (("--no-prime",), "prime", False),  # graph samples primed unless told not to
    (("--cache", "cold"), "cold_by_cupti", True), (("--cache", "cold", "--cold-by-events"), "cold_by_cupti", False),
])
def test_compare_passes_its_timing_switches_to_the_timing_core(tmp_path, monkeypatch, flag, attr, value):
    import harness.evaluate as evaluate

    seen = []
    real = evaluate.measure_offline

    def spy(entries, device, settings, *a, **kw):
        seen.append(getattr(settings, attr))
        return real(entries, device, settings, *a, **kw)

    monkeypatch.setattr(evaluate, "measure_offline", spy)
    res = run("compare", "--device", "cpu", "--shapes", "64_64_64", "--methods", "torch", "--budget", "0.2",
              "--isolate", "off", "--out", str(tmp_path / "r.parquet"), *flag)
    assert res.exit_code == 0, res.output
    assert seen and set(seen) == {value}


def test_compare_plan_measures_each_shape_with_its_own_methods(tmp_path):
    """``--plan``: a shape gets its line's methods and --methods, no other (in the sandboxed
    worker too: a family method makes the run isolated); a rerun resumes without a warning about
    methods a shape was never planned to have."""
    plan = tmp_path / "plan.txt"
    plan.write_text("# shape  methods\n64_64_64 torch\n\n"
                    "17_33_65   splitk:bm=64,splits=4,cublas  # a family spec keeps its k=v\n")
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
    (["--qps", "0"], "--qps 0 must be > 0"),
    (["--budget", "-1"], "--budget -1 must be > 0"),
    (["--min-rounds", "5", "--max-rounds", "3"], "--max-rounds 3 must be >= --min-rounds (5)"),
    (["--batch-us", "10"], "--batch-us must be at least 50"),
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
    res = runner.invoke(app, ["compare", "--device", "cpu", "--kernels-dir", str(bad),
                              "--out", str(tmp_path / "r.parquet")])
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


# --- start-up: --help imports no torch -------------------------------------------------------------

_HELP = ("import sys\n{block}from harness.cli import app\n"
         "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
         "print('TORCH' if 'torch' in sys.modules else 'LIGHT')\n")


def _help_run(block: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _HELP.format(block=block)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})


def test_help_of_harness_and_reports_imports_no_torch():
    """The harness's start-up path and the report plug-in stay light (kernels_search held out:
    its command plug-in is checked by the test below)."""
    res = _help_run("sys.modules['kernels_search'] = None  # as if not installed\n")
    assert res.returncode == 0, res.stderr
    assert "report" in res.stdout and "compare" in res.stdout and "search" not in res.stdout
    assert res.stdout.strip().endswith("LIGHT"), "torch was imported by `hgemm-bench --help`"


def test_help_imports_no_torch():
    """`hgemm-bench --help` with every plug-in mounted imports no torch (2-3 s of start-up)."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness.cli", "--help"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    assert "search" in res.stdout and "report" in res.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported


# --- commands as plug-ins --------------------------------------------------------------------------

def test_commands_plug_in_by_name_and_entry_point(monkeypatch, tmp_path):
    import importlib.metadata as md

    import typer

    from harness.cli import mount_commands

    (tmp_path / "third_party_cmd.py").write_text(
        "import typer\n\ndef hello():\n    print('hello from a plug-in')\n\n"
        "def register(app):\n    app.command('hello')(hello)\n")
    (tmp_path / "broken_cmd.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [md.EntryPoint("hello", "third_party_cmd", "hgemm_bench.commands"),
           md.EntryPoint("report", "reports.cli", "hgemm_bench.commands"),  # a built-in, declared twice
           md.EntryPoint("broken", "broken_cmd", "hgemm_bench.commands")]
    monkeypatch.setattr(md, "entry_points", lambda group=None: [e for e in eps if e.group == group])
    app = typer.Typer()
    mounted = mount_commands(app, builtins=("reports.cli", "not_installed_pkg.cli"))
    assert mounted == ["reports.cli", "third_party_cmd"]  # each module once; the absent built-in skipped
    assert sorted(c.name for c in app.registered_commands) == ["hello", "report"]
    res = CliRunner().invoke(app, ["hello"])
    assert res.exit_code == 0 and "hello from a plug-in" in res.output


def test_a_broken_builtin_command_plug_in_is_not_hidden(tmp_path, monkeypatch):
    import typer

    from harness.cli import mount_commands

    pkg = tmp_path / "brokenpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_here"):
        mount_commands(typer.Typer(), builtins=("brokenpkg.cli",), group="hgemm_bench.no_such_group")


def test_report_is_mounted_from_reports_cli(tmp_path):
    res = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--metric" in res.output
    res = runner.invoke(app, ["report", str(tmp_path / "none.parquet"), "-o", str(tmp_path / "site")])
    assert res.exit_code == 2 and "not found" in res.output and not (tmp_path / "site").exists()


# --- the newcomer's path ----------------------------------------------------------------------------

def test_no_shapes_on_a_cpu_measures_the_cpu_sized_set_and_says_so(tmp_path):
    from harness.shapes import SMOKE_CPU

    out = tmp_path / "r.parquet"
    res = run("compare", "--device", "cpu", "--methods", "torch", "--layouts", "nn", "--min-rounds", "1",
              "--max-rounds", "1", "--budget", "0.01", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "no --shapes given: the smoke-cpu set, sized for a CPU" in " ".join(res.output.split())
    assert set(read_results(out).to_pandas()["shape"]) == {f"{m}_{n}_{k}" for m, n, k in SMOKE_CPU}


def test_a_long_cpu_run_is_announced_with_its_estimate(tmp_path, monkeypatch):
    """--shapes smoke on a CPU takes hours at a few GFLOP/s: the run says so before it measures (here the runner is
    stopped at its start, so nothing is measured). The CPU's rate is set, not timed: a CPU with AMX runs fp16 at
    over 100 GFLOP/s, where smoke fits under the warning's threshold."""
    import harness.env
    from harness.runner import CompareRunner

    monkeypatch.setattr(harness.env, "fp16_flops_per_s", lambda device, gpu_name=None: 2e9)

    class Stop(Exception):
        pass

    def stop(self, *args, **kwargs):
        raise Stop()

    monkeypatch.setattr(CompareRunner, "run", stop)
    out = tmp_path / "r.parquet"
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "smoke", "--out", str(out)])
    said = " ".join(res.output.split())
    assert isinstance(res.exception, Stop), said
    assert "warning: these 12 shapes will take" in said and "smoke-cpu set is sized for a CPU" in said, said
    assert " h or more" in said or " days or more" in said, said
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "64_64_64", "--out", str(out)])
    assert isinstance(res.exception, Stop) and "will take" not in res.output


def test_a_run_refused_for_its_file_measures_nothing(tmp_path, monkeypatch):
    """A bad --out file is refused before the work model times anything on the CPU."""
    from harness import cli as climod

    def timed(*args, **kwargs):
        raise AssertionError("the work model ran before the refusal")

    monkeypatch.setattr(climod, "_work_model", timed)
    out = tmp_path / "r.parquet"
    out.write_bytes(b"garbage")
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "smoke", "--out", str(out)])
    assert res.exit_code == 2 and "not a readable Parquet file" in " ".join(res.output.split()), res.output


@pytest.mark.parametrize("make,needle", [
    (lambda d: d / "a_file" / "x.parquet", "is a file, not a folder"),
    (lambda d: d, "is a folder; give a file path"),
    (lambda d: d / "r.parquet", "(where its samples go) is a file"),
])
def test_bad_out_path_is_one_error_before_anything_is_measured(tmp_path, make, needle):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "r.samples").write_text("x")
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "64_64_64", "--out", str(make(tmp_path))])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "--out:" in said and needle in said and "Traceback" not in said, said
    assert "CPU path" not in said  # refused before the run was set up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "r.samples"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_out_folder_is_one_error(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "64_64_64",
                                  "--out", str(d / "x" / "r.parquet")])
        assert res.exit_code == 2 and "no permission to write in" in res.output
        res = runner.invoke(app, ["report", "whatever.parquet", "-o", str(d / "site")])
        assert res.exit_code == 2 and "no permission to write in" in res.output
    finally:
        d.chmod(0o700)


@pytest.mark.skipif(not os.path.isdir("/proc/self"),
                    reason="needs Linux's procfs: a folder that refuses new files to root too")
def test_out_folder_that_refuses_files_despite_its_permissions_is_one_error(tmp_path):
    """Permission bits can say yes where the filesystem says no (procfs, a read-only mount seen by
    root): the probe file catches it before anything is measured, and a probe leaves nothing behind."""
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "64_64_64", "--out", "/proc/hgemm-r.parquet"])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "/proc refuses new files" in said and "Traceback" not in said, said
    assert "CPU path" not in said  # refused before the run was set up
    import harness.paths as paths

    paths.check_output_file(tmp_path / "r.parquet")
    paths.check_output_dir(tmp_path / "site")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["search", "--budget", "1s"], ["tune"]])
def test_search_and_tune_refuse_a_file_as_their_out_folder(tmp_path, command):
    """Their --out is a folder (a DB they resume from): a file there is one error, the file untouched."""
    f = tmp_path / "r.parquet"
    f.write_bytes(b"kept")
    res = runner.invoke(app, [*command, "--device", "cpu", "--shapes", "64_64_64", "--out", str(f)])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and f"--out: {f} is a file; give a folder" in said and "Traceback" not in said, said
    assert f.read_bytes() == b"kept"


@pytest.mark.parametrize("typed", ["model:llama", "[bold]64_64"])
def test_an_error_prints_the_input_as_typed(typed):
    """An error line is not read as markup or emoji codes (``:llama:`` is one), and a pipe gets it on one line."""
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", typed])
    assert res.exit_code == 2 and typed in res.output, res.output
    assert res.output.strip().count("\n") == 0, res.output


def test_a_path_with_brackets_is_printed_whole_not_read_as_markup(tmp_path):
    """'[/x]' in a folder name is a closing tag to rich: the run, its resume and the report still print
    the path as it is."""
    out = tmp_path / "[/x]" / "r.parquet"
    for _ in range(2):  # the second run resumes
        res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "8_8_8", "--out", str(out)])
        assert res.exit_code == 0, res.output
    said = "".join(res.output.split())
    assert "resumingrun" in said and "".join(f"results: {out}".split()) in said
    res = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "[/x]" / "site")])
    assert res.exit_code == 0 and "".join(str(tmp_path / "[/x]" / "site").split()) in "".join(res.output.split())


def test_output_checks_follow_the_permissions(tmp_path, monkeypatch):
    """The same checks where this user may not write (simulated: root may write anywhere)."""
    import harness.paths as paths

    ro = tmp_path / "ro"
    (ro / "site").mkdir(parents=True)
    real = os.access
    monkeypatch.setattr(paths.os, "access", lambda p, mode: Path(p) not in (ro, ro / "site") and real(p, mode))
    with pytest.raises(paths.OutputPathError, match="no permission to write in .*ro$"):
        paths.check_output_file(ro / "deeper" / "r.parquet")
    with pytest.raises(paths.OutputPathError, match="no permission to write in .*ro$"):
        paths.check_output_file(ro / "r.parquet")
    with pytest.raises(paths.OutputPathError, match="permission denied"):
        paths.check_output_dir(ro / "site")
    paths.check_output_file(tmp_path / "new" / "r.parquet")  # a missing folder under a writable one is fine
    paths.check_output_dir(tmp_path / "new" / "site")


def test_a_shape_that_cannot_fit_is_refused_up_front(tmp_path):
    out = tmp_path / "r.parquet"
    res = runner.invoke(app, ["compare", "--device", "cpu", "--shapes", "64_64_64,99999_99999_99999",
                              "--out", str(out)])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in said, said
    assert "shape 99999_99999_99999 needs" in said and "GB" in said and "available RAM" in said, said
    assert not out.exists()


def test_report_refuses_a_folder_it_did_not_make(tmp_path):
    out = tmp_path / "r.parquet"
    assert run("compare", "--device", "cpu", "--shapes", "64_64_64", "--methods", "torch", "--budget", "0.2",
               "--out", str(out)).exit_code == 0
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "important.csv").write_text("keep me")
    res = runner.invoke(app, ["report", str(out), "-o", str(mine)])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "was not made by `hgemm-bench report`" in said, said
    assert [p.name for p in mine.rglob("*")] == ["data", "important.csv"]
    (tmp_path / "a_file.txt").write_text("x")
    res = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "a_file.txt")])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "is a file" in said and (tmp_path / "a_file.txt").read_text() == "x", said
    site = tmp_path / "site"
    res = runner.invoke(app, ["report", str(out), "-o", str(site)])
    assert res.exit_code == 0 and (site / "index.html").exists()


def test_batch_us_sets_the_calls_per_sample(tmp_path):
    """--batch-us reaches the offline sampler: a 20x longer target gives batches of more calls (the
    CPU path sizes them as the GPU path does: target / one call's time, at most 500)."""
    per_batch = {}
    for us in ("60", "1200"):
        out = tmp_path / f"b{us}.parquet"
        res = run("compare", "--device", "cpu", "--shapes", "8_8_8", "--methods", "torch", "--layouts", "nn",
                  "--budget", "0.2", "--batch-us", us, "--out", str(out), "--seed", "1")
        assert res.exit_code == 0, res.output
        per_batch[us] = int(read_results(out).to_pandas()["calls_per_batch"].iloc[0])
    assert per_batch["1200"] >= 4 * per_batch["60"], per_batch


def test_the_entry_point_keeps_the_exit_code_and_runs_exit_handlers(tmp_path):
    """``main`` (the console script) ends the process itself after Python's own exit steps: a refusal still exits 2
    with its error line, a success 0, and atexit handlers (Ray's shutdown, loggers) still run."""
    marker = tmp_path / "atexit-ran"
    prog = ("import atexit, os; atexit.register(lambda: open(os.environ['MARKER'], 'w').write('ran')); "
            "from harness.cli import main; main()")
    env = {**os.environ, "MARKER": str(marker), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    bad = subprocess.run([sys.executable, "-c", prog, "compare", "--device", "cpu", "--layouts", "xx"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 2 and "unknown layout" in bad.stderr and marker.read_text() == "ran"
    marker.unlink()
    ok = subprocess.run([sys.executable, "-c", prog, "methods"], capture_output=True, text=True, timeout=120, env=env)
    assert ok.returncode == 0 and "cublaslt-autotune" in ok.stdout and marker.read_text() == "ran"
