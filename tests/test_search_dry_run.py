"""``hgemm-bench search --dry-run`` (kernels_search/search/picks.py): the first pick's ranked candidates
for new shapes, from a search folder and evidence, without a GPU.

Why these can fail: a dry run that ranks otherwise than the held-out check would (another learner,
another rule, the shape's own rows kept), that touches a GPU or needs one, that lists candidates
without the evidence they rest on, or that rejects shapes ``compare --shapes`` accepts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from harness.problem import Shape
from kernels_search.family import Family, Knob
from kernels_search.search import evidence, picks
from kernels_search.search.db import KernelDB
from kernels_search.search.first_pick import FirstPick
from kernels_search.search import learner as learnermod
from kernels_search.search.prior import with_prior
from kernels_search.search.settings import FirstPickSettings

# a CUDA-backend family of knobs only (nothing is built or run here)
DRY = Family(name="dryk", knobs=(Knob("tile", (16, 32, 64, 128), 32), Knob("stages", (2, 3), 2)))
SPECS = [DRY.spec({"tile": t, "stages": s}) for t in (16, 32, 64, 128) for s in (2, 3)]
GPU = "NVIDIA H200"


def _rows(shape: str, run: str, rewards: dict[str, float]):
    """compare-like rows: the baseline at 10 us, each spec at 10 / exp(reward) us."""
    m, n, k = map(int, shape.split("_"))
    base = dict(run_id=run, shape=shape, m=m, n=n, k=k, gpu_name=GPU, status="ok", status_reason="", mode="offline",
                cache="warm")
    out = [dict(base, method="cublaslt-autotune", layout="nn", is_baseline=True, device_us_median=10.0)]
    out += [dict(base, method=spec, layout="nn", is_baseline=False, device_us_median=10.0 / math.exp(r))
            for spec, r in rewards.items()]
    return out


def _reward(shape: str, spec: str) -> float:
    """Larger tiles win on larger shapes; 3 stages a little better."""
    m, n, k = map(int, shape.split("_"))
    tile = DRY.parse(spec.partition(":")[2])["tile"]
    return 0.3 - 0.1 * abs(math.log2(tile) - min(7, max(4, math.log2(min(m, n)) - 2))) + 0.02 * (spec.endswith("3"))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A finished 'search' of 6 shapes (its DB) and an evidence file of 10 more shapes, both of
    the dryk family (a search family for this test only); the packaged evidence is replaced by that file."""
    monkeypatch.setitem(learnermod._EXTRA_FAMILIES, DRY.name, DRY)
    shapes = ["64_64_1024", "128_128_1024", "256_256_2048", "512_512_2048", "1024_1024_4096", "2048_2048_4096"]
    db = KernelDB(tmp_path / "search" / "db")
    rows = []
    for i, shape in enumerate(shapes):
        for r in _rows(shape, "s", {spec: _reward(shape, spec) for spec in SPECS}):
            rows.append(dict(search_id="s", call_id=f"c{i}", round=0, gpu_name=GPU, shape=r["shape"], m=r["m"],
                             n=r["n"], k=r["k"], layout="nn", is_baseline=r["is_baseline"],
                             method=r["method"], family="baseline" if r["is_baseline"] else "dryk",
                             origin="policy", status="ok", status_reason="", failure="",
                             device_us_median=r["device_us_median"],
                             config="{}" if r["is_baseline"] else json.dumps(DRY.parse(r["method"].partition(":")[2])),
                             reward=None if r["is_baseline"] else _reward(shape, r["method"])))
    db.append(rows)
    ev_shapes = [f"{m}_{n}_{k}" for m, n, k in ((96, 96, 512), (192, 192, 1024), (384, 384, 1024), (768, 768, 2048),
                                                  (1536, 1536, 2048), (64, 1024, 4096), (64, 1024, 2048),
                                                  (128, 1024, 4096), (3072, 3072, 4096), (32, 32, 256))]
    ev_rows = [r for sh in ev_shapes for r in _rows(sh, f"e-{sh}", {spec: _reward(sh, spec) for spec in SPECS[::2]})]
    src = tmp_path / "ev-src.parquet"
    pd.DataFrame(ev_rows).to_parquet(src)
    ev_file = evidence.build([src], tmp_path / "evidence-h200.parquet", GPU)
    monkeypatch.setattr(evidence, "packaged", lambda gpu: ev_file if gpu == GPU else None)
    return tmp_path / "search"


def test_the_dry_run_ranks_as_the_held_out_pick_and_says_why(folder):
    lines = []
    shapes = [Shape(64, 1024, 4096), Shape(100, 1000, 3000)]
    got = picks.dry_run(shapes, folder=folder, print_fn=lines.append, top=8)
    assert lines[0].startswith("dry run, no GPU used: first picks for NVIDIA H200 by ranked/m10/n2/d/c with the "
                               "learner of search")
    assert "and the packaged NVIDIA H200 evidence (1 run) (36 rows on 9 other shapes)" in lines[0]
    # the same ranking as the held-out check: that learner, the evidence without the shapes' own rows
    learner, db = picks.learner_for_search(folder)
    ev = evidence.load(GPU)
    held, _ = with_prior(learner, ev.parts, [s.name for s in shapes], GPU)
    fp = FirstPick(held, FirstPickSettings())
    for shape in shapes:
        ranked = got[shape.name]
        assert [r.spec for r in ranked] == [c.spec for c in fp.ranking(shape, db, GPU, top=8)]
        assert ranked[0].spec == fp.pick(shape, db, GPU).spec and 1 <= len(ranked) <= 8
        assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
        assert all(a.score >= b.score for a, b in zip(ranked, ranked[1:]))
        e = ranked[0].evidence
        assert e["shapes"] >= 10 and e["near"] >= 2 and e["nearest"] != shape.name and e["speedup"] > 0
    # 64_1024_4096 is in the evidence: left out, as for a held-out shape
    assert all(r.evidence["nearest"] != "64_1024_4096" for r in got["64_1024_4096"])
    at = next(i for i, ln in enumerate(lines) if ln.startswith("64_1024_4096: "))
    first, why = lines[at + 1], lines[at + 2]
    assert first.split()[0] == "#1" and first.endswith(got["64_1024_4096"][0].spec)
    assert why.strip().startswith("measured on ") and "near); nearest" in why and "of the strongest baseline" in why


def test_the_dry_run_under_the_paired_rule_and_without_evidence(folder):
    lines = []
    st = FirstPickSettings(rule="paired", min_shapes=2, min_near=0, prior="none")
    got = picks.dry_run([Shape(300, 300, 2048)], st, folder=folder, print_fn=lines.append, top=3)
    assert "by paired/m2/d/c with the learner of search (" in lines[0] and "evidence" not in lines[0]
    ranked = got["300_300_2048"]
    assert len(ranked) == 3 and all(r.evidence["shapes"] >= 2 for r in ranked)


def test_search_dry_run_command_prints_the_ranking_and_exits_0_without_a_gpu(folder, monkeypatch):
    """``search --dry-run --shapes ...`` takes what ``compare --shapes`` takes (a list, a file, a
    named set), measures nothing and never resolves a device or starts an evaluator."""
    from typer.testing import CliRunner

    import harness.env
    import harness.sandbox
    from test_search import search_app

    def no_gpu(*a, **kw):
        raise AssertionError("the dry run touched the device path")

    monkeypatch.setattr(harness.env, "resolve_device", no_gpu)
    monkeypatch.setattr(harness.env, "collect", no_gpu)
    monkeypatch.setattr(harness.sandbox, "Evaluator", no_gpu)
    monkeypatch.setattr(picks, "record_folder", lambda: folder)
    app = search_app()
    run = CliRunner()
    res = run.invoke(app, ["search", "--dry-run", "--shapes", "64_1024_4096"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "dry run, no GPU used" in res.output and "64_1024_4096:" in res.output
    assert sum(ln.split()[0] in {f"#{i}" for i in range(1, 9)} for ln in res.output.splitlines() if ln.strip()) >= 1
    shapes = Path(folder).parent / "shapes.txt"
    shapes.write_text("# two shapes\n128_256_512\n96_96_96\n")
    res = run.invoke(app, ["search", "--dry-run", "--shapes", str(shapes), "--first-pick-rule", "paired"],
                     env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "128_256_512:" in res.output and "96_96_96:" in res.output and "by paired/" in res.output
    bad = run.invoke(app, ["search", "--dry-run", "--shapes", "1_2"])
    assert bad.exit_code == 2 and "malformed shape" in bad.output
    bad = run.invoke(app, ["search", "--dry-run", "--shapes", "64_64_64", "--first-pick-rule", "best"])
    assert bad.exit_code == 2 and "--first-pick-rule 'best': one of" in bad.output


def test_the_packaged_search_of_record_is_package_data():
    """The dry run's default learner: the packaged search's DB, read from the installed package."""
    folder = picks.record_folder()
    assert folder.name == picks.RECORD and (folder / "db" / "parts").is_dir()
    assert list((folder / "db" / "parts").glob("part-*.parquet")) and (folder / "shapes.txt").is_file()


def test_the_search_command_module_imports_nothing_heavy():
    """The harness mounts ``search`` at start-up (``register(app)``): importing its module must not
    import torch, numpy, pandas, pyarrow or LightGBM, or ``hgemm-bench --help`` pays for them."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = ("import sys, kernels_search.search.cli as c; assert callable(c.register); "
            "print(sorted(m for m in ('torch', 'numpy', 'pandas', 'pyarrow', 'lightgbm', 'scipy') "
            "if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "[]"
