"""kernels_search/search/prior.py: earlier compare results folded into a learner."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.problem import Shape
from kernels_search.family import Family, Knob
from kernels_search.search.first_pick import FirstPick
from kernels_search.search.learner import Learner
from kernels_search.search.prior import PriorError, fold_prior, prior_paths, prior_shapes, read_prior
from kernels_search.search.settings import FirstPickSettings, LearnerSettings, SearchSettings

FAM = Family(name="f", knobs=(Knob("tile", (32, 64, 128), 64), Knob("stages", (2, 3), 2)))
A, B = FAM.spec({"tile": 32, "stages": 2}), FAM.spec({"tile": 128, "stages": 3})


def learner() -> Learner:
    return Learner({"f": FAM}, layouts=("nn", "tn"), settings=LearnerSettings(elites=0))


def row(run, shape, method, layout, us, *, baseline=False, status="ok", mode="offline"):
    return dict(run_id=run, shape=shape, method=method, layout=layout, is_baseline=baseline, status=status,
                status_reason="" if status == "ok" else "gate: wrong result", device_us_median=us,
                mode=mode, cache="warm")


def write(path: Path, rows) -> Path:
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_rewards_are_against_the_fastest_baseline_of_the_same_run_and_shape(tmp_path):
    rows = [
        # run 1: the fastest baseline is the tn row of cublaslt-autotune (8 us), over both layouts
        row("r1", "256_256_256", "cublaslt-autotune", "nn", 10.0, baseline=True),
        row("r1", "256_256_256", "cublaslt-autotune", "tn", 8.0, baseline=True),
        row("r1", "256_256_256", "cublas", "nn", 9.0, baseline=True),
        row("r1", "256_256_256", A, "nn", 4.0),
        row("r1", "256_256_256", B, "tn", 16.0),
        row("r1", "256_256_256", B, "nn", 1.0, status="gate_failed"),
        row("r1", "256_256_256", "library", "nn", 2.0),  # not a search family: skipped
        row("r1", "256_256_256", A, "tn", 1.0, mode="server"),  # not how the search measures
        # run 2, same shape: its own baseline (20 us)
        row("r2", "256_256_256", "cublaslt-autotune", "nn", 20.0, baseline=True),
        row("r2", "256_256_256", A, "nn", 30.0),
        # a shape without a correct baseline teaches nothing about speed
        row("r2", "512_512_512", "cublaslt-autotune", "nn", float("nan"), baseline=True, status="error"),
        row("r2", "512_512_512", A, "nn", 5.0),
    ]
    f = write(tmp_path / "p.parquet", rows)
    pol = learner()
    s = fold_prior(pol, [f])
    assert (s.rows, s.skipped, s.no_baseline, s.shapes) == (4, 1, 1, {"256_256_256"})
    # A's best reward on the shape: log(8/4) from run 1, not log(20/30) from run 2
    assert pol.measured_on[A]["256_256_256"] == pytest.approx(math.log(2.0))
    assert pol.measured_on[B]["256_256_256"] == pytest.approx(math.log(8 / 16))
    assert "512_512_512" not in pol.measured_on[A]
    # the failed B row is a -1 observation, not a measurement of B
    assert pol.model.n == 4
    # folding again, or into a copy that has it, adds nothing
    assert fold_prior(pol, [f]).rows == 0 and pol.model.n == 4
    assert FirstPick(pol).id("s", 10).endswith("-c10-p4")
    assert FirstPick(learner()).id("s", 10).endswith("-c10")


def test_excluded_shapes_are_not_learnt(tmp_path):
    f = write(tmp_path / "p.parquet", [
        row("r", "256_256_256", "cublaslt-autotune", "nn", 10.0, baseline=True), row("r", "256_256_256", A, "nn", 5.0),
        row("r", "64_64_64", "cublaslt-autotune", "nn", 10.0, baseline=True), row("r", "64_64_64", A, "nn", 5.0)])
    pol = learner()
    s = fold_prior(pol, [f], exclude_shapes=["64_64_64"])
    assert s.shapes == {"256_256_256"} and set(pol.measured_on[A]) == {"256_256_256"}
    assert prior_shapes([f]) == {"256_256_256", "64_64_64"}


def test_bad_prior_files_are_named_errors(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(PriorError, match="bad.parquet: not a readable Parquet"):
        read_prior(bad)
    other = write(tmp_path / "other.parquet", [{"shape": "1_1_1", "x": 1}])
    with pytest.raises(PriorError, match="other.parquet: not hgemm-bench compare results .*run_id"):
        read_prior(other)
    lst = tmp_path / "list.txt"
    lst.write_text("# comment\nother.parquet  # trailing\nmissing.parquet\n")
    with pytest.raises(PriorError, match="missing.parquet: no such file"):
        prior_paths([lst], root=tmp_path)
    lst.write_text("other.parquet\n")
    assert prior_paths([lst], root=tmp_path) == [tmp_path / "other.parquet"]


@pytest.mark.slow
def test_a_search_with_a_prior_learns_it_once_and_never_from_its_held_out_shapes(tmp_path):
    """``search_main(prior=...)`` on the CPU with the synthetic family: the prior's rows on a
    searched shape and on a shape never searched are learnt, its rows on the held-out shape are
    not; a resume folds nothing twice; the held-out check's id carries the prior's row count."""
    from test_search_plugin import FAMILY

    from kernels_search.search.run import search_main

    good, slow = FAMILY.spec(FAMILY.complete({"pad": 0})), FAMILY.spec(FAMILY.complete({"pad": 3}))
    rows = []
    for shape in ("16_16_32", "64_64_64", "16_16_16"):  # searched, elsewhere, held out
        rows += [row("old", shape, "torch", "nn", 10.0, baseline=True), row("old", shape, good, "nn", 8.0),
                 row("old", shape, slow, "nn", 40.0)]
    f = write(tmp_path / "prior.parquet", rows)
    lines = []
    cpu = SearchSettings(budget="60s", device="cpu", batch=2, layouts=("nn",), plugins=("test_search_plugin",),
                         timing_budget_s=0.1, prior=(f,), max_rounds=1)
    kw = dict(print_fn=lines.append, holdout=[Shape(16, 16, 16)])
    doc = search_main([Shape(16, 16, 32), Shape(32, 16, 64)], tmp_path / "s", cpu, **kw)
    assert any("prior: 4 rows on 2 shapes from 1 files" in ln for ln in lines), lines
    from kernels_search.search.db import KernelDB

    db = KernelDB(tmp_path / "s" / "db")
    ids = set(db.df["search_id"])
    assert any(i.endswith("-p4") and "-first-pick-" in i for i in ids), ids
    assert len(doc["first_pick"]) == 1
    lines.clear()
    from dataclasses import replace

    search_main([Shape(16, 16, 32), Shape(32, 16, 64)], tmp_path / "s", replace(cpu, max_rounds=2), **kw)
    assert any("prior: 0 rows" in ln for ln in lines), lines  # the checkpoint had them


def test_near_evidence_keeps_far_measured_configs_out_while_a_near_one_exists(monkeypatch):
    """A config measured on 12 large deep-K shapes (like the prior's split-K study) and one measured
    on 12 small shapes. Whatever the rule ranks first (here: the far config, as the model did for
    128_64_512 on the H200), with ``first_pick_min_near`` only configs with evidence near the
    held-out shape compete; where none has it, every config with the shape count does again."""
    import numpy as np

    from kernels_search.proposals import Candidate, Outcome

    pol = learner()
    far_k, near_k = FAM.parse(B.partition(":")[2]), FAM.parse(A.partition(":")[2])
    for i in range(12):
        big = Shape(2048 * (1 + i % 3), 1024 * (1 + i // 3 % 2), 8192 * (1 + i // 6))
        small = Shape(64 * (1 + i % 3), 64 * (1 + i // 3 % 2), 256 * (1 + i // 6))
        pol.observe(big, [Outcome(Candidate("f", far_k, B), "nn", "ok", 0.6, None, None)])
        pol.observe(small, [Outcome(Candidate("f", near_k, A), "nn", "ok", 0.05, None, None)])
    def picker(near: int) -> FirstPick:
        fp = FirstPick(pol, FirstPickSettings(rule="paired", min_shapes=10, min_near=near))
        monkeypatch.setattr(fp, "values", lambda shape, cands: np.array([float(c.spec == B) for c in cands]))
        return fp

    held = Shape(128, 64, 512)
    assert picker(2).near_evidence(B, held) == 0 and picker(2).near_evidence(A, held) >= 2
    assert picker(0).pick(held).spec == B
    assert picker(2).pick(held).spec == A
    assert "-m10-n2-" in picker(2).id("s", 5)
    # nobody has evidence near a huge short-K shape: the far config competes again, and wins
    huge = Shape(16384, 16384, 64)
    assert picker(2).near_evidence(A, huge) == picker(2).near_evidence(B, huge) == 0
    assert picker(2).pick(huge).spec == B


def test_rows_of_another_gpu_model_are_left_out_and_counted(tmp_path):
    """``fold_prior(gpu=...)`` learns only the rows of that model and counts the others in its line."""
    rows = []
    for gpu, us in (("NVIDIA H200", 5.0), ("NVIDIA B200", 20.0)):
        rows += [dict(row(gpu, "256_256_256", "cublaslt-autotune", "nn", 10.0, baseline=True), gpu_name=gpu),
                 dict(row(gpu, "256_256_256", A, "nn", us), gpu_name=gpu)]
    f = write(tmp_path / "two-gpus.parquet", rows)
    pol = learner()
    s = fold_prior(pol, [f], gpu="NVIDIA H200")
    assert (s.rows, s.other_gpu) == (1, 2) and "2 of another GPU model" in s.line()
    assert pol.measured_on[A] == {"256_256_256": pytest.approx(math.log(2.0))}  # the H200's 2x, not the B200's 0.5x
    both = fold_prior(learner(), [f])
    assert (both.rows, both.other_gpu) == (2, 0) and "another GPU" not in both.line()


@pytest.mark.slow
def test_the_first_pick_prior_reaches_only_the_held_out_pick_not_the_search(tmp_path):
    """``FirstPickSettings(prior=(f,))``: the search's learner (its checkpoint) learns none of
    the file's rows, the held-out check's copy does (its id carries them: ``-p``) and still leaves
    out the held-out shape's own rows; ``"auto"`` on the CPU (no committed list) adds none."""
    from test_search_plugin import FAMILY

    from dataclasses import replace

    from kernels_search.search.db import KernelDB
    from kernels_search.search.run import search_main

    good = FAMILY.spec(FAMILY.complete({"pad": 0}))
    rows = []
    for shape in ("64_64_64", "16_16_16"):  # elsewhere, held out
        rows += [row("old", shape, "torch", "nn", 10.0, baseline=True), row("old", shape, good, "nn", 8.0)]
    f = write(tmp_path / "prior.parquet", rows)
    lines = []
    cpu = SearchSettings(budget="60s", device="cpu", batch=2, layouts=("nn",), plugins=("test_search_plugin",),
                         timing_budget_s=0.1, max_rounds=1)
    kw = dict(print_fn=lines.append, holdout=[Shape(16, 16, 16)])
    doc = search_main([Shape(16, 16, 32)], tmp_path / "s", replace(cpu, first_pick=FirstPickSettings(prior=(f,))), **kw)
    assert any(ln.startswith("prior: 1 rows on 1 shapes from 1 files") and ln.endswith("for the first pick")
               for ln in lines), lines
    assert len(doc["first_pick"]) == 1
    ids = set(KernelDB(tmp_path / "s" / "db").df["search_id"])
    assert any("-first-pick-rk-m10-n2-" in i and i.endswith("-p1") for i in ids), ids
    searched = policy_of(tmp_path / "s")
    assert searched.seen and not any(r.startswith("prior:") for r in searched.seen)  # the checkpoint never saw the file
    lines.clear()
    search_main([Shape(16, 16, 32)], tmp_path / "auto", cpu, **kw)  # default "auto": the CPU has no evidence
    assert not any(ln.startswith("prior:") for ln in lines), lines
    assert not any(i.endswith("-p1") for i in set(KernelDB(tmp_path / "auto" / "db").df["search_id"]))


def policy_of(folder: Path):
    """The learner a search folder's checkpoint holds (its families as the test plug-in registers)."""
    from kernels_search.search.learner import default_families

    pol = Learner(default_families("cpu"), ("nn",), seed=0)
    assert pol.load(folder / "policy.npz")
    return pol


