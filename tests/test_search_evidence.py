"""kernels_search/search/evidence.py: the packaged evidence the first pick learns from.

Why these can fail: a build that keeps rows the search never measures (server, cold, another GPU)
or reorders them (the learner's state, and so the picks, would differ from the source files'), a
dataset of another format version read silently, a packaged file missing from the package or
stale against its source list, a fold that differs between the files and the dataset.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.problem import Shape
from kernels_search.family import Family, Knob
from kernels_search.search import evidence
from kernels_search.search.first_pick import FirstPick
from kernels_search.search.learner import Learner
from kernels_search.search.prior import fold_prior, prior_paths, with_prior
from kernels_search.search.settings import FirstPickSettings, LearnerSettings

ROOT = Path(__file__).resolve().parents[1]
FAM = Family(name="f", knobs=(Knob("tile", (32, 64, 128), 64), Knob("stages", (2, 3), 2)))
SPECS = [FAM.spec({"tile": t, "stages": s}) for t in (32, 64, 128) for s in (2, 3)]


def row(run, shape, method, layout, us, *, baseline=False, mode="offline", cache="warm", gpu="NVIDIA H200"):
    return dict(run_id=run, shape=shape, method=method, layout=layout, is_baseline=baseline, status="ok",
                status_reason="", device_us_median=us, mode=mode, cache=cache, gpu_name=gpu, tflops=1.0)


def compare_files(tmp_path: Path) -> list[Path]:
    """Three compare Parquets, 12 shapes, every config on each, with rows the evidence must drop."""
    rng = np.random.default_rng(0)
    paths = []
    for f in range(3):
        rows = []
        for i in range(4):
            m, n, k = 64 * 2 ** (i + f), 128 * 2 ** i, 256 * 2 ** f
            shape = f"{m}_{n}_{k}"
            rows.append(row(f"r{f}", shape, "cublaslt-autotune", "nn", 10.0, baseline=True))
            for spec in SPECS:
                for lay in ("nn", "tn"):
                    rows.append(row(f"r{f}", shape, spec, lay, float(rng.uniform(5, 20))))
            rows.append(row(f"r{f}", shape, SPECS[0], "nn", 0.1, mode="server"))  # not how the search measures
            rows.append(row(f"r{f}", shape, SPECS[1], "nn", 0.1, cache="cold"))
            rows.append(row(f"r{f}", shape, SPECS[2], "nn", 0.1, gpu="NVIDIA B200"))  # another GPU model
        p = tmp_path / f"{f}.parquet"
        pd.DataFrame(rows).to_parquet(p)
        paths.append(p)
    return paths


def learner() -> Learner:
    return Learner({"f": FAM}, ("nn", "tn"), LearnerSettings(elites=0))


def test_the_evidence_keeps_offline_warm_rows_of_the_gpu_model_in_source_order(tmp_path):
    paths = compare_files(tmp_path)
    out = evidence.build(paths, tmp_path / "ev.parquet", "NVIDIA H200")
    ev = evidence.read(out)
    assert ev.gpu_name == "NVIDIA H200" and ev.sources == ["0.parquet", "1.parquet", "2.parquet"]
    assert len(ev.parts) == 3 and ev.rows == 3 * 4 * (1 + len(SPECS) * 2)
    for part, path in zip(ev.parts, paths):
        src = pd.read_parquet(path)
        src = src[(src["mode"] == "offline") & (src["cache"] == "warm") & (src["gpu_name"] == "NVIDIA H200")]
        assert list(part.columns) == list(evidence.COLUMNS)
        pd.testing.assert_frame_equal(part, src[list(evidence.COLUMNS)].reset_index(drop=True))


def test_folding_the_evidence_equals_folding_its_source_files(tmp_path):
    """The learner's state (posterior, evidence per config, rows seen) is bitwise the same, so every
    first pick and ranking is too."""
    paths = compare_files(tmp_path)
    ev = evidence.read(evidence.build(paths, tmp_path / "ev.parquet", "NVIDIA H200"))
    base = learner()
    a, sa = with_prior(base, paths, ["128_256_256"], "NVIDIA H200")
    b, sb = with_prior(base, ev.parts, ["128_256_256"], "NVIDIA H200", ev.label)
    assert sa.rows == sb.rows > 0 and sa.shapes == sb.shapes and "128_256_256" not in sb.shapes
    assert sb.line().startswith(f"prior: {sb.rows} rows on {len(sb.shapes)} shapes "
                                "from the packaged NVIDIA H200 evidence (3 runs)")
    # the build left the other model's rows out already (one excluded shape)
    assert sa.other_gpu == 11 and sb.other_gpu == 0
    assert np.array_equal(a.model.A, b.model.A) and np.array_equal(a.model.b, b.model.b)
    assert a.measured_on == b.measured_on and a.seen == b.seen and a.history == b.history
    assert [list(v) for v in a.measured_on.values()] == [list(v) for v in b.measured_on.values()]
    for rule in ("paired", "ranked"):
        st = FirstPickSettings(rule=rule, min_shapes=2, min_near=0)
        for shape in (Shape(128, 256, 256), Shape(96, 200, 300), Shape(4096, 256, 1024)):
            got_a, got_b = FirstPick(a, st).scored(shape), FirstPick(b, st).scored(shape)
            assert [c.spec for c in got_a[0]] == [c.spec for c in got_b[0]] and np.array_equal(got_a[1], got_b[1])
    assert fold_prior(b, ev.parts).rows == 12  # only the held-out shape's rows are new


def test_a_file_of_another_format_version_or_not_evidence_is_a_named_error(tmp_path):
    import pyarrow.parquet as pq

    out = evidence.build(compare_files(tmp_path), tmp_path / "ev.parquet", "NVIDIA H200")
    table = pq.read_table(out)
    meta = dict(table.schema.metadata)
    meta[evidence.VERSION_KEY] = b"99"
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "v99.parquet")
    with pytest.raises(evidence.EvidenceError, match="format version 99, this code reads 1"):
        evidence.read(tmp_path / "v99.parquet")
    with pytest.raises(evidence.EvidenceError, match="format version none"):
        evidence.read(compare_files(tmp_path)[0])
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(evidence.EvidenceError, match="not a readable Parquet"):
        evidence.read(tmp_path / "junk.parquet")


def test_the_build_command_takes_files_and_lists_and_prints_what_it_wrote(tmp_path, capsys):
    paths = compare_files(tmp_path)
    (tmp_path / "list.txt").write_text("# two of them\n" + "".join(f"{p.name}\n" for p in paths[1:]))
    out = tmp_path / "ev.parquet"
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)  # a list's paths are relative to the current directory
    try:
        assert evidence.main(["build", "--gpu", "NVIDIA H200", "--out", str(out), str(paths[0]), "list.txt"]) == 0
    finally:
        os.chdir(cwd)
    assert "NVIDIA H200, 156 rows on 12 shapes from 3 runs" in capsys.readouterr().out
    assert evidence.read(out).sources == ["0.parquet", "1.parquet", "2.parquet"]
    assert evidence.main(["build", "--gpu", "NVIDIA H200", "--out", str(out), str(tmp_path / "none.parquet")]) == 2
    assert "none.parquet: no such file" in capsys.readouterr().err
    assert evidence.main(["show", str(out)]) == 0


def test_the_packaged_h200_evidence_is_package_data_matching_its_source_list():
    """Read through importlib.resources (as from a wheel); its sources are the runs the lab list
    names, in order: a list edited without a rebuild fails here."""
    ev = evidence.load("NVIDIA H200")
    assert ev is not None and ev.gpu_name == "NVIDIA H200"
    res = evidence.packaged("NVIDIA H200")
    assert res.name == "evidence-h200.parquet" and res.is_file()
    listed = prior_paths([ROOT / "lab/evidence/h200-sources.txt"], root=ROOT)
    assert ev.sources == [p.name for p in listed]
    assert ev.rows > 40000 and len(ev.shapes()) > 1000
    for part in ev.parts:
        assert (~part["is_baseline"]).any() and (part["method"] == "cublaslt-autotune").any()
    assert evidence.load("NVIDIA H100 80GB HBM3") is None and evidence.load("CPU: x86_64") is None
    assert evidence.load(None) is None
    assert evidence.gpu_model_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert math.isfinite(ev.parts[0]["device_us_median"].iloc[0])
