"""What made a row: git commit, toolchain versions, and a CPU run that records them."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import harness
from harness import provenance
from harness.cli import app

ROOT = Path(harness.__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "tree"
    for rel in ("harness/__init__.py", "lab/notes.md", "results/runs/a.txt", "pyproject.toml"):
        (r / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / rel).write_text("x\n")
    git(r, "init", "-q")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "first")
    return r


def test_commit_clean_dirty_and_data_changes(repo, monkeypatch):
    monkeypatch.delenv(provenance.COMMIT_ENV, raising=False)
    sha = git(repo, "rev-parse", "HEAD")
    assert provenance.git_commit(repo) == sha
    (repo / "results" / "runs" / "a.txt").write_text("a new run\n")  # data, not code
    (repo / "lab" / "draft.py").write_text("y\n")  # untracked outside the product
    assert provenance.git_commit(repo) == sha
    (repo / "harness" / "new_module.py").write_text("y\n")  # untracked code the run imports
    assert provenance.git_commit(repo) == f"{sha}-dirty"
    (repo / "harness" / "new_module.py").unlink()
    (repo / "pyproject.toml").write_text("changed\n")  # a tracked file differs
    assert provenance.git_commit(repo) == f"{sha}-dirty"
    monkeypatch.setenv(provenance.COMMIT_ENV, "0123abcd")  # a shipped copy's stale .git does not speak for it
    assert provenance.git_commit(repo) == "0123abcd"


def test_commit_without_git(tmp_path, monkeypatch):
    plain = tmp_path / "copy"
    plain.mkdir()
    monkeypatch.delenv(provenance.COMMIT_ENV, raising=False)
    monkeypatch.setattr(provenance, "_installed_commit", lambda: None)
    assert provenance.git_commit(plain) == "unknown"
    monkeypatch.setenv(provenance.COMMIT_ENV, "0123abcd-dirty")  # a shipped copy says what it came from
    assert provenance.git_commit(plain) == "0123abcd-dirty"
    monkeypatch.delenv(provenance.COMMIT_ENV)
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert provenance.git_commit(empty) == "dirty"  # a repository with no commit vouches for nothing


def test_a_repository_around_an_installed_copy_is_not_its_commit(tmp_path, monkeypatch):
    """A package installed inside someone else's checkout (a .venv in their project) does not
    take that project's commit."""
    outer = tmp_path / "project"
    (outer / "venv" / "site").mkdir(parents=True)
    git(outer, "init", "-q")
    monkeypatch.delenv(provenance.COMMIT_ENV, raising=False)
    monkeypatch.setattr(provenance, "_installed_commit", lambda: None)
    assert provenance.git_commit(outer / "venv" / "site") == "unknown"


def test_nvcc_and_cutlass_versions(tmp_path, monkeypatch):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("HGEMM_NVCC", str(nvcc))
    assert provenance.nvcc_version() == "13.0.88"
    monkeypatch.setenv("HGEMM_NVCC", str(tmp_path / "absent"))
    assert provenance.nvcc_version() is None
    inc = tmp_path / "include" / "cutlass"
    inc.mkdir(parents=True)
    (inc / "version.h").write_text("#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 1\n")
    monkeypatch.setenv("HGEMM_CUTLASS_INCLUDE", str(inc.parent))
    assert provenance.cutlass_version() == "4.2.1"


def test_package_version_matches_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{harness.__version__}"' in text


def test_a_cpu_run_records_its_provenance(tmp_path):
    out = tmp_path / "r.parquet"
    res = CliRunner().invoke(app, ["compare", "--device", "cpu", "--shapes", "64_64_64", "--methods", "torch",
                                   "--layouts", "nn", "--budget", "0.2", "--out", str(out), "--seed", "1"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out)
    assert len(df) == 1
    r = df.iloc[0]
    expected_commit = provenance.git_commit()
    assert r["git_commit"] == expected_commit and expected_commit
    if (ROOT / ".git").exists():
        assert r["git_commit"].split("-")[0] == git(ROOT, "rev-parse", "HEAD")
    assert r["hgemm_bench_version"] == harness.__version__
    for col in ("nvcc_version", "cutlass_version", "triton_version"):  # null where the tool is absent
        expected = getattr(provenance, col)()
        assert (pd.isna(r[col]) and expected is None) or r[col] == expected, col
    if provenance.find_nvcc():  # the GPU image and this development machine have nvcc
        assert r["nvcc_version"]
    assert str(df["measured_at"].dtype) == "datetime64[us, UTC]"
    assert abs(pd.Timestamp.now(tz="UTC") - r["measured_at"]) < pd.Timedelta(minutes=10)
    assert pd.isna(r["power_limit_w"]) and pd.isna(r["app_sm_clock_mhz"])  # NVML figures: null on CPU
