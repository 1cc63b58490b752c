"""The search loop end to end on the CPU evaluator, and resume after a kill.

Uses the synthetic ``cpuk`` family of ``test_search_plugin`` (real CPU work whose speed depends
on the knobs; wrong-result, crashing and non-building configs). Why these can fail: rewards not
paired with the same call's baselines, failures not scored -1, a killed search that loses or
re-measures candidates, a learner that does not see rows written before a kill.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import env as envmod
from harness.problem import Problem, Shape
from harness.sandbox import Evaluator, Timeouts
from kernels_search.search.db import KernelDB
from kernels_search.search.loop import run_search, search_settings
from kernels_search.search.learner import Learner
from kernels_search.proposals import Candidate

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FAST = Timeouts(start_s=120, prepare_s=20, run_s=20, timing_s=60)
SHAPES = [Shape(16, 16, 32), Shape(32, 16, 64)]


def settings():
    return search_settings(["nn", "tn"], timing_budget_s=0.15, min_rounds=3, seed=1)


def families():
    import test_search_plugin

    return {"cpuk": test_search_plugin.FAMILY}


class Fixed:
    """Proposes the three failure kinds once, on the first shape, so each is certain to occur."""

    name = "fixed"

    def __init__(self):
        import test_search_plugin

        self.fam = test_search_plugin.FAMILY
        self.done = False
        self.seen = []

    def propose(self, shape, context):
        if self.done or shape != SHAPES[0]:
            return []
        self.done = True
        out = []
        for knobs in ({"pad": 3, "split": 4, "bug": 2, "small": 0},  # crash
                      {"pad": 0, "split": 1, "bug": 1, "small": 0},  # wrong result
                      {"pad": 2, "split": 4, "bug": 0, "small": 0}):  # build failure
            out.append(Candidate("cpuk", knobs, self.fam.spec(knobs), origin="fixed"))
        return out

    def observe(self, shape, outcomes):
        self.seen.extend(outcomes)


@pytest.mark.slow
def test_search_loop_end_to_end_on_cpu(tmp_path):
    db = KernelDB(tmp_path / "db")
    policy = Learner(families(), seed=0)
    fixed = Fixed()
    progress = []
    with Evaluator("cpu", envmod.collect("cpu"), plugins=["test_search_plugin"], timeouts=FAST) as ev:
        summary = run_search(SHAPES, 14.0, ev, db, policy, [policy, fixed], batch_per_shape=2,
                             progress=progress.append, settings=settings(), checkpoint=tmp_path / "policy.npz")
    assert summary.stop_reason == "budget" and summary.rounds >= 1
    df = db.df
    cand = df[~df.is_baseline]
    base = df[df.is_baseline]
    # a DB row is the compare row as measured plus the search's columns
    from harness.results import RESULT_COLUMNS, SCHEMA_VERSION

    assert (set(RESULT_COLUMNS) <= set(df.columns) and df.run_id.notna().all()
            and (df.schema_version == SCHEMA_VERSION).all())
    assert (df[df.status == "ok"].timing_method.notna()).all() and df.tflops[df.status == "ok"].gt(0).all()
    # every call measured the baseline with the candidates, in both layouts, and paired them
    assert set(base.method) == {"torch"} and set(base.layout) == {"nn", "tn"}
    assert set(cand.call_id) <= set(base.call_id)
    for call_id, grp in cand[cand.status == "ok"].groupby("call_id"):
        b = base[base.call_id == call_id]
        assert (grp.baseline_us == b[b.status == "ok"].device_us_median.min()).all()
    # rewards: clipped log speedup for correct rows, -1 for each failure kind
    ok = cand[cand.status == "ok"]
    assert ok.reward.between(-1, 1).all() and ok.reward.notna().all()
    import numpy as np

    np.testing.assert_allclose(ok.reward, np.clip(np.log(ok.baseline_us / ok.device_us_median), -1, 1))
    kinds = dict(zip(cand.method, cand.failure))
    assert kinds["cpuk:pad=3,split=4,bug=2,small=0"] == "crash"
    assert kinds["cpuk:pad=0,split=1,bug=1,small=0"] == "wrong"
    assert kinds["cpuk:pad=2,split=4,bug=0,small=0"] == "compile"
    assert (cand[cand.failure != ""].reward == -1).all()
    # no (shape, spec, layout) measured twice; knob and ptxas columns present
    assert not cand.duplicated(["shape", "method", "layout"]).any()
    assert {"knob_pad", "knob_split", "registers"} <= set(df.columns)
    assert ok.registers.notna().all()
    # the build failure is never proposed again, on any shape (same binary = same compile key); `small` is a
    # compile-time knob, so pad=2,split=4,bug=0,small=1 is another binary (it fails too, and may be proposed once)
    broken = policy.compile_key("cpuk", {"pad": 2, "split": 4, "bug": 0, "small": 0})
    first = cand[cand.method == "cpuk:pad=2,split=4,bug=0,small=0"].recorded_at.min()
    later = cand[(cand.recorded_at > first) & (cand.origin != "fixed")]
    keys = [policy.compile_key("cpuk", {k: int(r[f"knob_{k}"]) for k in ("pad", "split", "bug", "small")})
            for _, r in later.iterrows()]
    assert broken not in keys
    # the fixed proposer was told about its own candidates only; the policy saw every row
    assert {o.candidate.origin for o in fixed.seen} == {"fixed"}
    assert set(cand.row_id) <= policy.seen
    # progress: per shape, with throughput and the compile/measure split
    assert progress and progress[-1].candidates == len(cand) // 2
    p = progress[-1]
    assert p.candidates_per_s > 0 and p.measure_s > 0 and p.compile_s >= 0
    assert p.shapes_total == 2 and 1 <= p.shapes_measured <= 2 and p.best_speedup > 0
    assert summary.per_shape and all(r["device_us"] > 0 for r in summary.per_shape)


RUNNER = textwrap.dedent("""
    import sys
    from pathlib import Path

    def main(out, budget, max_rounds):
        from harness import env as envmod
        from harness.problem import Shape
        from harness.sandbox import Evaluator, Timeouts
        from kernels_search.search.db import KernelDB
        from kernels_search.search.loop import run_search, search_settings
        from kernels_search.search.learner import Learner
        import test_search_plugin

        out = Path(out)
        db = KernelDB(out / "db")
        policy = Learner({"cpuk": test_search_plugin.FAMILY}, seed=0)
        with Evaluator("cpu", envmod.collect("cpu"), plugins=["test_search_plugin"],
                       timeouts=Timeouts(start_s=120, prepare_s=20, run_s=20, timing_s=60)) as ev:
            s = run_search([Shape(16, 16, 32), Shape(32, 16, 64), Shape(16, 32, 16)], float(budget), ev, db, policy,
                           batch_per_shape=2,
                           settings=search_settings(["nn"], timing_budget_s=0.1, min_rounds=3, seed=1),
                           checkpoint=out / "policy.npz", search_id="resume-test",
                           max_rounds=int(max_rounds) if max_rounds != "none" else None)
        print("STOP", s.stop_reason, s.rounds, s.candidates, flush=True)

    if __name__ == "__main__":
        main(*sys.argv[1:])
""")


def _run(script, out, budget, max_rounds, **kw):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
    return subprocess.Popen([sys.executable, str(script), str(out), str(budget), str(max_rounds)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


@pytest.mark.slow
def test_resume_after_kill_loses_nothing_and_measures_nothing_twice(tmp_path):
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    parts = tmp_path / "db" / "parts"
    # 1) a long search, killed (whole process group: the loop and its evaluator worker) mid-run
    proc = _run(script, tmp_path, 600, "none", start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(parts.glob("part-*.parquet"))) < 4:
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = KernelDB(tmp_path / "db").df
    assert len(list(parts.glob("part-*.parquet"))) >= 4
    rounds_before = int(before["round"].max())
    n_before = int((~before.is_baseline).sum())
    ids_before = set(before.row_id)
    # 2) rerun the same command with a round limit: it continues where the DB stops
    proc = _run(script, tmp_path, 600, rounds_before + 2)
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 0, out
    assert "STOP rounds" in out, out
    after = KernelDB(tmp_path / "db").df
    cand = after[~after.is_baseline]
    assert ids_before <= set(after.row_id)  # nothing lost
    assert len(cand) > n_before  # continued
    assert after.row_id.is_unique
    assert not cand.duplicated(["shape", "method", "layout"]).any()  # nothing measured twice
    assert int(after["round"].max()) == rounds_before + 1
    # every (round, shape) measured at most once: the interrupted round was completed, not redone
    calls = after.groupby(["round", "shape"]).call_id.nunique()
    assert (calls == 1).all(), calls
    # the learner's checkpoint covers every candidate row (replayed or observed), budget was carried over
    from kernels_search.search.learner import Learner
    import test_search_plugin

    pol = Learner({"cpuk": test_search_plugin.FAMILY})
    assert pol.load(tmp_path / "policy.npz")
    assert set(cand.row_id) <= pol.seen
    db = KernelDB(tmp_path / "db")
    assert db.budget_used("resume-test") >= before.groupby("call_id").elapsed_s.first().sum()


@pytest.mark.slow
def test_search_main_runs_resumes_exports_and_checks_held_out_shapes(tmp_path, monkeypatch):
    """What the `search` CLI command calls: a tiny CPU search with the synthetic family, a
    held-out first-pick check, the library export, then a resume that only adds rounds."""
    from kernels_search.search.library import load_library
    from dataclasses import replace

    from kernels_search.search.run import holdout_shapes, parse_duration, search_main
    from kernels_search.search.settings import SearchSettings

    assert parse_duration("20m") == 1200 and parse_duration("90s") == 90 and parse_duration(5) == 5
    with pytest.raises(ValueError):
        parse_duration("20 minutes")
    held = holdout_shapes(SHAPES, 3)
    assert len(held) == 3 and not {s.name for s in held} & {s.name for s in SHAPES}
    lines = []
    cpu = SearchSettings(budget="60s", device="cpu", batch=2, layouts=("nn",), plugins=("test_search_plugin",),
                         timing_budget_s=0.1, max_rounds=1)
    doc = search_main(SHAPES, tmp_path / "s", cpu, holdout=[Shape(16, 16, 16)], print_fn=lines.append)
    assert doc["rounds"] == 1 and doc["candidates"] == 4 and doc["stop_reason"] == "rounds"
    assert len(doc["first_pick"]) == 1 and doc["first_pick"][0]["reference"] == "strongest"
    assert any("shapes" in ln and "cand" in ln for ln in lines) and any("per GPU-minute" in ln for ln in lines)
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["candidates"] == 4
    from harness.shapes import parse_shapes

    assert parse_shapes(str(tmp_path / "s" / "shapes.txt")) == SHAPES
    assert parse_shapes(str(tmp_path / "s" / "holdout.txt")) == [Shape(16, 16, 16)]
    entries = load_library(tmp_path / "s" / "library.json")
    assert {e["shape"] for e in entries} == {s.name for s in SHAPES}  # held-out shapes are not exported
    doc2 = search_main(SHAPES, tmp_path / "s", replace(cpu, max_rounds=2), print_fn=lines.append)
    # this run's numbers, and the whole search id's (both runs, from the DB)
    assert doc2["run_rounds"] == 1 and doc2["run_candidates"] == 4
    assert doc2["rounds"] == 2 and doc2["candidates"] == 8
    cand = KernelDB(tmp_path / "s" / "db").candidates()
    assert not cand.duplicated(["shape", "method", "layout"]).any()


@pytest.mark.slow
def test_lookahead_builds_next_shapes_while_the_current_one_is_measured(tmp_path):
    """With lookahead, candidates of the next shapes are 'compiled' (a recording prebuild) in the
    background before the current shape's measurement ends, each exactly once, and every
    measured candidate was built before its own measurement."""
    events = []

    def prebuild(specs):
        events.append(("build", time.perf_counter(), tuple(specs)))
        time.sleep(0.3)
        return 0.3

    shapes = [Shape(16, 16, 32), Shape(32, 16, 64), Shape(16, 32, 16)]
    db = KernelDB(tmp_path / "db")
    done = []
    with Evaluator("cpu", envmod.collect("cpu"), plugins=["test_search_plugin"], timeouts=FAST) as ev:
        run_search(shapes, 300, ev, db, Learner(families(), layouts=("nn",), seed=0), batch_per_shape=2,
                   progress=lambda p: done.append((p.shape, time.perf_counter(), p.compile_s, p.compile_wait_s)),
                   settings=search_settings(["nn"], timing_budget_s=0.1, min_rounds=3, seed=1), max_rounds=1,
                   prebuild=prebuild, lookahead=2)
    builds = [e for e in events if e[0] == "build"]
    assert len(builds) == 3  # one batch per shape, none twice
    built = {s for _, _, specs in builds for s in specs}
    assert set(db.candidates().method) <= built
    first_done = done[0][1]
    assert sum(t < first_done for _, t, _ in builds) == 3  # all three batches started while shape 1 ran
    assert done[-1][2] >= 0.9 - 1e-6  # compile seconds counted (3 x 0.3 s)


class FakeGpuEvaluator:
    """Stands in for a CUDA evaluator: resolves the real family specs (hopper, splitk, smalltile)
    and returns rows with a made-up device time, so the GPU code path of the loop (spec names,
    knobs, rewards, export) runs on a CPU machine. Nothing here is a measurement."""

    device = "cuda"
    env = {"gpu_uuid": "GPU-fake", "gpu_name": "NVIDIA H200", "device": "cuda"}

    def __init__(self):
        self.calls = []

    def evaluate_shape(self, shape, specs, settings, groups, run_id):
        from harness.registry import resolve

        self.calls.append(list(specs))
        rows = []
        for m in resolve(specs):
            for lay in settings.layouts:
                us = 100.0 if m.is_baseline else 80.0 + 10 * len(m.name) % 50
                rows.append(dict(self.env, measured_at="2026-11-30T00:00:00+00:00", shape=shape.name, m=shape.m,
                                 n=shape.n, k=shape.k, layout=lay, method=m.name, family=m.family,
                                 is_baseline=m.is_baseline, config=json.dumps(m.config, default=str),
                                 source_hash="", info=json.dumps({"ptxas_max_registers": 128}), setup_s=0.01,
                                 status="ok", status_reason="", gate_passed=True, device_us_median=us))
        return [(rows, [])]


def test_real_families_through_the_loop_with_a_fake_gpu_evaluator(tmp_path):
    from kernels_search.search.library import library_entries
    from kernels_search.search.learner import default_families

    fams = default_families("cuda")
    assert {"hopper", "splitk", "smalltile"} <= set(fams)
    db = KernelDB(tmp_path / "db")
    ev = FakeGpuEvaluator()
    policy = Learner(fams, seed=0)  # the default compile penalty
    shapes = [Shape(4096, 4096, 4096), Shape(256, 128, 16384)]
    s = run_search(shapes, 1e9, ev, db, policy, batch_per_shape=3,
                   max_rounds=2, prebuild=None, settings=search_settings())
    def serves_both(spec):  # decode-only families (gemv: M <= 32) serve neither shape
        fam, _, knobs = spec.partition(":")
        k = fams[fam].parse(knobs)
        return all(any(fams[fam].supports(k, Problem(sh, lay)) for lay in ("nn", "tn")) for sh in shapes)

    presets = sorted(sp for sp in policy.preset_specs if serves_both(sp))
    assert len(presets) >= 6 and {sp.split(":")[0] for sp in presets} >= {"hopper", "splitk", "smalltile", "splitk_tma"}
    assert not {sp.split(":")[0] for sp in presets} & {"gemv"}
    # round 0 is the initial design (every preset serving the shape), round 1 the model's 3 picks
    assert [sorted(c[4:]) for c in ev.calls[:2]] == [presets, presets]
    assert all(len(c) == 4 + 3 and not set(c[4:]) & set(presets) for c in ev.calls[2:]) and len(ev.calls) == 4
    assert s.rounds == 2 and s.candidates == 2 * (len(presets) + 3)
    assert all(c[:4] == ["torch", "cublas", "cublaslt", "cublaslt-autotune"] for c in ev.calls)
    cand = db.candidates()
    assert len(cand) == 2 * s.candidates and set(cand.family) <= set(fams) and cand.reward.notna().all()
    assert set(cand[cand["round"] == 0].origin) == {"policy:design"}
    assert cand.registers.eq(128).all() and not cand.duplicated(["shape", "method", "layout"]).any()
    entries = library_entries(db)
    assert len(entries) == 4 and all(e["kind"] == "kernel" and e["gpu_name"] == "NVIDIA H200" for e in entries)


def search_app():
    """A Typer app with the mountable `search` command (and a second command, so Typer keeps
    `search` as a subcommand)."""
    import typer

    from kernels_search.search.cli import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    return app


@pytest.mark.slow
def test_search_cli_command_on_cpu(tmp_path):
    """The mountable `search` command: flags reach search_main, bad input is exit code 2."""
    from typer.testing import CliRunner

    app = search_app()
    run = CliRunner()
    bad = run.invoke(app, ["search", "--shapes", "1_2", "--device", "cpu"])
    assert bad.exit_code == 2 and "malformed shape" in bad.output
    bad = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--budget", "soon"])
    assert bad.exit_code == 2 and "bad duration" in bad.output
    none = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--families", "hopper",
                            "--out", str(tmp_path / "x")])
    assert none.exit_code == 2 and "unknown or unavailable families" in none.output  # hopper is CUDA-only
    bad = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--first-pick-min-shapes", "0"])
    assert bad.exit_code == 2 and "--first-pick-min-shapes" in bad.output
    bad = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--first-pick-min-near", "-1"])
    assert bad.exit_code == 2 and "--first-pick-min-near" in bad.output
    bad = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--first-pick-prior", "nowhere.txt"])
    assert bad.exit_code == 2 and "--first-pick-prior: prior nowhere.txt: no such file" in bad.output
    # the product's rules only (lab/first_pick_rules.py registers the study rules when imported)
    from kernels_search.search import first_pick

    product = {name: first_pick.RULES[name] for name in ("ranked", "paired")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(first_pick, "RULES", product)
        for rule in ("model", "cautious", "neighbours", "geopaired"):
            bad = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--first-pick-rule", rule])
            assert bad.exit_code == 2 and f"--first-pick-rule {rule!r}: one of ranked, paired" in bad.output
    res = run.invoke(app, ["search", "--shapes", "16_16_32,32_16_64", "--device", "cpu", "--plugin",
                           "test_search_plugin", "--layouts", "nn", "--batch", "1", "--max-rounds", "1",
                           "--time-budget", "0.1", "--holdout", "1", "--budget", "2m", "--out", str(tmp_path / "s"),
                           "--library", str(tmp_path / "lib.json"), "--first-pick-min-shapes", "1"],
                     catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "per GPU-minute" in res.output and "first pick on 1 held-out" in res.output
    assert (tmp_path / "lib.json").exists() and (tmp_path / "s" / "summary.json").exists()
    from kernels_search.search.db import KernelDB

    # the held-out check ran under the default rule (ranked; unfitted here, one config a shape, so it
    # ranked as paired) and the evidence the flag asked for
    assert any("-first-pick-rk-m1-" in i for i in set(KernelDB(tmp_path / "s" / "db").df["search_id"]))


def test_holdout_never_draws_a_shape_measured_before():
    """The held-out first pick tests generalization only on shapes nobody tuned for: with seen
    shapes excluded, seed 3's draw holds none of them, while the same draw without the exclusion
    does hold some; with the whole grid excluded the draw is empty."""
    from harness.shapes import parse_shapes, sample_grid
    from kernels_search.search.run import holdout_shapes

    grid = sorted(parse_shapes("cuda-l2"), key=lambda s: (s.m * s.n * s.k, s.name))
    train = sample_grid(40, 0)
    assert holdout_shapes(train, 20, 3, exclude=grid) == []
    some = grid[: len(grid) * 3 // 4]  # the 750 smallest
    plain = holdout_shapes(train, 20, 3)
    clean = holdout_shapes(train, 20, 3, exclude=some)
    assert len(clean) == 20 and not {s.name for s in clean} & ({s.name for s in some} | {s.name for s in train})
    assert {s.name for s in plain} & {s.name for s in some}  # what the exclusion is for


def test_search_cli_holdout_options_and_a_resume_keeps_its_held_out_shapes(tmp_path):
    """--holdout-seed and --holdout-exclude pick the held-out shapes; a bad exclusion is named; a
    resumed search keeps the held-out shapes it started with, whatever the later command draws."""
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.shapes import parse_shapes

    run = CliRunner()
    res = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--holdout", "1",
                           "--holdout-exclude", "12_x", "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "--holdout-exclude" in res.output
    out = tmp_path / "s"
    base = ["search", "--shapes", "16_16_32,32_16_64", "--device", "cpu", "--plugin", "test_search_plugin",
            "--layouts", "nn", "--batch", "1", "--time-budget", "0.1", "--holdout", "1", "--budget", "2m",
            "--out", str(out), "--run-limit", "1s"]
    from kernels_search.search.run import holdout_shapes

    first = holdout_shapes(parse_shapes("16_16_32,32_16_64"), 1, 5, exclude=parse_shapes("64_64_64"))
    assert first != holdout_shapes(parse_shapes("16_16_32,32_16_64"), 1, 6)
    res = run.invoke(app, base + ["--holdout-seed", "5", "--holdout-exclude", "64_64_64"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert parse_shapes(str(out / "holdout.txt")) == first and "64_64_64" not in {s.name for s in first}
    res = run.invoke(app, base + ["--holdout-seed", "6"], catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "keeping the 1 held-out shapes" in res.output and parse_shapes(str(out / "holdout.txt")) == first
    # an exclusion that leaves the grid no shape: said, and the search runs without a held-out check
    res = run.invoke(app, base[:-4] + ["--out", str(tmp_path / "t"), "--run-limit", "1s",
                                       "--holdout-exclude", "cuda-l2"],
                     catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "--holdout 1: only 0 grid shapes are outside the searched shapes and --holdout-exclude" in res.output
