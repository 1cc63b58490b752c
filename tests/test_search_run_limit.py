"""One search split over several invocations (``--run-limit``), on a fake evaluator and a fake clock.

A host whose commands may run 10 minutes runs a 20-minute search as 2-3 invocations of the same
command. Why these can fail: a run-limit stop that skips the checkpoint, the export or the
summary; a stop that abandons the shape being measured or starts a new one; background builds
started for shapes the run can no longer reach; the held-out check run after a partial run (or
not run at all when the budget is finished); totals that describe only the last invocation; a
rerun of a finished search that measures new candidates.

The evaluator measures nothing: it returns made-up times for the synthetic ``cpuk`` family of
``test_search_plugin`` and advances a fake clock by ``STEP`` seconds per call, which is all the
loop's budget and run-limit arithmetic sees, so the tests are exact and take a second or two.
"""

import json
import types

import pytest

import test_search_plugin  # noqa: F401  (registers the cpuk family and its search family here)
from harness.problem import Shape
from kernels_search.search import loop as loopmod
from kernels_search.search import run as runmod
from kernels_search.search.db import KernelDB
from kernels_search.search.loop import run_search, search_settings
from kernels_search.search.learner import Learner
from kernels_search.search.settings import SearchSettings

STEP = 10.0  # fake seconds per evaluate_shape call
SHAPES = [Shape(16, 16, 32), Shape(32, 16, 64), Shape(16, 32, 16)]
HELD = [Shape(48, 16, 16)]


class Clock:
    def __init__(self):
        self.t = 1000.0

    def perf_counter(self):
        return self.t


@pytest.fixture
def clock(monkeypatch):
    """The fake clock replaces ``time`` in the loop and in search_main (nothing else reads it)."""
    c = Clock()
    fake = types.SimpleNamespace(perf_counter=c.perf_counter, sleep=lambda s: None)
    monkeypatch.setattr(loopmod, "time", fake)
    monkeypatch.setattr(runmod, "time", fake)
    return c


class FakeEvaluator:
    """Stands in for harness.sandbox.Evaluator (same constructor and context manager): rows with
    made-up device times, STEP fake seconds per call; records which shapes it was asked about."""

    device = "cpu"
    calls: list = []  # (shape name, [specs]) of every call, across instances
    clock: Clock | None = None

    def __init__(self, device="cpu", env=None, plugins=(), **kw):
        # the env search_main collected (its gpu_name keys the search), as the real Evaluator gets it
        self.env = dict(env or {"gpu_uuid": "cpu", "gpu_name": "CPU: fake"}, device="cpu")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def evaluate_shape(self, shape, specs, settings, groups, run_id):
        from harness.registry import resolve

        FakeEvaluator.calls.append((shape.name, list(specs)))
        rows = []
        for m in resolve(specs):
            for lay in settings.layouts:
                us = 100.0 if m.is_baseline else 60.0 + 10.0 * m.config["pad"] + 3.0 * m.config["split"]
                rows.append(dict(self.env, measured_at="2026-12-01T00:00:00+00:00", shape=shape.name, m=shape.m,
                                 n=shape.n, k=shape.k, layout=lay, method=m.name, family=m.family,
                                 is_baseline=m.is_baseline, config=json.dumps(m.config, default=str), source_hash="",
                                 info="{}", setup_s=0.5, status="ok", status_reason="", gate_passed=True,
                                 device_us_median=us))
        FakeEvaluator.clock.t += STEP
        return [(rows, [])]


@pytest.fixture
def fake_eval(monkeypatch, clock):
    import harness.sandbox

    FakeEvaluator.calls = []
    FakeEvaluator.clock = clock
    monkeypatch.setattr(harness.sandbox, "Evaluator", FakeEvaluator)
    return FakeEvaluator


def _main(out, lines, budget="100s", holdout=HELD, **kw):
    from kernels_search.search.run import search_main

    settings = SearchSettings(**dict(dict(budget=budget, device="cpu", batch=2, layouts=("nn",),
                                          plugins=("test_search_plugin",), run_limit="35s"), **kw))
    return search_main(SHAPES, out, settings, holdout=holdout, print_fn=lines.append)


def test_run_limit_splits_one_search_over_invocations_with_the_holdout_in_the_last(tmp_path, fake_eval):
    out = tmp_path / "s"
    docs, lines = [], []
    # 1) 35 s allowed: calls start at 0, 10, 20, 30 s; at 40 s no new shape starts
    docs.append(_main(out, lines))
    d = docs[0]
    assert d["stop_reason"] == "run-limit" and not d["finished"]
    assert d["run_candidates"] == d["candidates"] == 8 and len(fake_eval.calls) == 4
    assert d["budget_used_s"] == d["wall_s"] == 40 and d["budget_left_s"] == 60 and d["run_limit_s"] == 35
    assert d["first_pick"] == [] and d["first_pick_geomean"] is None
    assert all(shape != HELD[0].name for shape, _ in fake_eval.calls)  # no holdout after a partial run
    # ... but everything a later run needs: checkpoint, library, summary, shape files
    assert ({"policy.npz", "library.json", "summary.json", "shapes.txt", "holdout.txt"}
            <= {p.name for p in out.iterdir()})
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "run-limit"
    assert any("60s of the 100s budget left" in ln and "rerun the same command" in ln for ln in lines)
    assert any("held-out first pick" in ln and "deferred" in ln for ln in lines)
    db = KernelDB(out / "db")
    assert not db.df.search_id.str.startswith("s-first-pick").any()
    # 2) the same command again: 4 more calls (the round cut in 1) is finished first), still a partial run
    docs.append(_main(out, lines))
    d = docs[1]
    assert d["stop_reason"] == "run-limit" and d["run_candidates"] == 8 and d["candidates"] == 16
    assert d["budget_used_s"] == 80 and d["first_pick"] == [] and len(fake_eval.calls) == 8
    # 3) and again: 2 calls spend the last 20 s of the budget, then the held-out check runs
    docs.append(_main(out, lines))
    d = docs[2]
    assert d["stop_reason"] == "budget" and d["finished"] and d["budget_left_s"] == 0
    assert d["run_candidates"] == 4 and d["candidates"] == 20 == sum(x["run_candidates"] for x in docs)
    assert [r["shape"] for r in d["first_pick"]] == [HELD[0].name] and d["first_pick_geomean"] > 0
    assert [shape for shape, _ in fake_eval.calls[10:]] == [HELD[0].name]
    # totals over the three runs: budget spent, candidates per minute, compile and measure split
    assert d["wall_s"] == d["budget_used_s"] == 100 and d["candidates_per_gpu_minute"] == pytest.approx(20 / (100 / 60))
    assert d["compile_s"] == pytest.approx(sum(x["run_compile_s"] for x in docs)) and d["compile_s"] > 0
    assert d["measure_s"] == pytest.approx(sum(x["run_measure_s"] for x in docs)) and d["measure_s"] > 0
    assert d["rounds"] == 4 and sum(x["run_rounds"] for x in docs) >= d["rounds"]
    db = KernelDB(out / "db")
    cand = db.candidates()
    sel = cand[cand.search_id == "s"]
    assert len(sel) == 20 and not sel.duplicated(["shape", "method", "layout"]).any()
    assert (db.df[db.df.search_id == "s"].groupby(["round", "shape"]).call_id.nunique() == 1).all()
    # 4) a rerun of the finished search measures nothing: the held-out result is read back from
    # the DB, then export and summary; the learner does not learn from the holdout's rows
    n_calls, n_lines = len(fake_eval.calls), len(lines)
    d4 = _main(out, lines)
    assert d4["stop_reason"] == "budget" and d4["run_candidates"] == 0 and d4["candidates"] == 20
    assert fake_eval.calls[n_calls:] == []
    assert d4["first_pick"] == d["first_pick"] and d4["first_pick_geomean"] == d["first_pick_geomean"]
    assert not any("replayed" in ln for ln in lines[n_lines:])
    # 5) a resume with a larger budget searches on, then measures the first pick of the learner
    # it has now (one more evaluation of the held-out shape, under a new id), not the old one
    n_calls = len(fake_eval.calls)
    d5 = _main(out, lines, budget="120s")
    assert d5["stop_reason"] == "budget" and d5["candidates"] > d["candidates"] == 20
    assert [shape for shape, _ in fake_eval.calls[n_calls:]][-1] == HELD[0].name
    assert sum(shape == HELD[0].name for shape, _ in fake_eval.calls) == 2
    assert [r["shape"] for r in d5["first_pick"]] == [HELD[0].name]
    ids = set(KernelDB(out / "db").df.search_id)
    # the default rule: ranked/m10/n2/d/c (the learned ranker, one-slice split-K and partly empty
    # clusters declined; no prior: the CPU has no list)
    assert {"s-first-pick-rk-m10-n2-d-pc-c20", f"s-first-pick-rk-m10-n2-d-pc-c{d5['candidates']}"} <= ids


def test_first_pick_eval_picks_every_shape_then_builds_them_in_one_batch(tmp_path, clock, fake_eval):
    """The held-out picks are made before any is measured and compiled together (one build's time
    on the GPU host, not one per shape); each shape is then measured once."""
    from test_search import families

    from kernels_search.search.loop import first_pick_eval

    events = []

    class Recording(FakeEvaluator):
        def evaluate_shape(self, shape, specs, settings, groups, run_id):
            events.append(("measure", shape.name))
            return super().evaluate_shape(shape, specs, settings, groups, run_id)

    def prebuild(specs):
        events.append(("build", tuple(specs)))
        return 3.0

    db = KernelDB(tmp_path / "db")
    held = [Shape(48, 16, 16), Shape(16, 48, 32), Shape(64, 16, 64)]
    from kernels_search.search.first_pick import FirstPick

    out = first_pick_eval(held, Recording(), db, FirstPick(Learner(families(), layouts=("nn",), seed=0)),
                          settings=search_settings(["nn"]), search_id="fp", prebuild=prebuild)
    assert [e[0] for e in events] == ["build", "measure", "measure", "measure"]
    assert events[0][1] == tuple(r["spec"] for r in out) and [r["shape"] for r in out] == [s.name for s in held]
    assert db.search_totals("fp")["compile_s"] == pytest.approx(3.0 + 3 * 0.5)  # the batch once + setups


def test_run_limit_finishes_the_shape_in_flight_and_builds_only_reachable_shapes(tmp_path, clock, fake_eval):
    """run_search directly: the limit passes during a call, that call is finished and recorded, no
    new shape starts; with lookahead, background builds are started only for shapes the run can
    still expect to reach; the next run completes the cut round."""
    import threading

    from test_search import families

    shapes = [Shape(16, 16, 16 * (i + 1)) for i in range(8)]
    built, lock = [], threading.Lock()

    def prebuild(specs):
        with lock:
            built.append(tuple(specs))
        return 0.0

    db = KernelDB(tmp_path / "db")
    kw = dict(batch_per_shape=2, settings=search_settings(["nn"]), checkpoint=tmp_path / "policy.npz",
              search_id="rl", prebuild=prebuild, lookahead=3)
    s = run_search(shapes, 1000, FakeEvaluator(), db, Learner(families(), layouts=("nn",), seed=0),
                   run_limit_s=35, run_t0=clock.t, **kw)
    # calls start at 0, 10, 20, 30 s (the last one ends past the limit and is kept); none at 40 s
    assert s.stop_reason == "run-limit" and s.candidates == 8 and s.elapsed_s == 40
    assert [c[0] for c in FakeEvaluator.calls] == [sh.name for sh in shapes[:4]]
    assert set(db.df["shape"]) == {sh.name for sh in shapes[:4]}
    # builds, one spec each and each spec once: those of shapes 0-3 (the first plan, before any time
    # per shape is known), none for shapes 4-7: at 10 s per shape, shape 4 was never reachable before 35 s
    from kernels_search.search.build_pool import THREAD_NAME

    for t in threading.enumerate():
        if t.name.startswith(THREAD_NAME):
            t.join(5)
    assert all(len(b) == 1 for b in built) and len(built) == len(set(built))
    assert {b[0] for b in built} == set(db.candidates().method)
    # the next invocation finishes round 0 (shapes 4-7, each once) and stops on the round limit
    s2 = run_search(shapes, 1000, FakeEvaluator(), db, Learner(families(), layouts=("nn",), seed=0), max_rounds=1,
                    run_limit_s=35, run_t0=clock.t, **kw)
    # (the limit passes during shape 7's call too, but the round is complete: the search is over)
    assert s2.stop_reason == "rounds" and s2.candidates == 8
    assert [c[0] for c in FakeEvaluator.calls[4:]] == [sh.name for sh in shapes[4:]]
    calls = db.df.groupby(["round", "shape"]).call_id.nunique()
    assert set(calls.index.get_level_values("shape")) == {sh.name for sh in shapes} and (calls == 1).all()
    assert db.search_totals("rl")["candidates"] == 16 == len(db.candidates())


def test_run_limit_between_rounds_and_no_limit(tmp_path, clock, fake_eval):
    """The limit passing exactly at a round's end stops before the next round; without a limit the
    budget decides, as before."""
    from test_search import families

    db = KernelDB(tmp_path / "db")
    kw = dict(batch_per_shape=1, settings=search_settings(["nn"]), search_id="b", prebuild=None)
    s = run_search(SHAPES, 1000, FakeEvaluator(), db, Learner(families(), layouts=("nn",), seed=0),
                   run_limit_s=30, run_t0=clock.t, **kw)
    assert s.stop_reason == "run-limit" and s.rounds == 1 and s.candidates == 3
    assert db.last_round("b") == 0
    s = run_search(SHAPES, 60, FakeEvaluator(), db, Learner(families(), layouts=("nn",), seed=0), **kw)
    assert s.stop_reason == "budget" and s.candidates == 3 and s.elapsed_s == 60
    assert db.last_round("b") == 1


def test_search_totals_and_progress_count_candidates_not_rows(tmp_path, clock, fake_eval):
    """Two layouts = two rows per candidate: the totals and the progress count candidates."""
    from test_search import families

    db = KernelDB(tmp_path / "db")
    seen = []
    kw = dict(batch_per_shape=2, settings=search_settings(["nn", "tn"]), search_id="t", prebuild=None,
              progress=seen.append)
    run_search(SHAPES[:1], 20, FakeEvaluator(), db, Learner(families(), seed=0), **kw)
    run_search(SHAPES[:1], 40, FakeEvaluator(), db, Learner(families(), seed=0), **kw)
    assert [p.candidates for p in seen] == [2, 4, 2, 4] and [p.candidates_total for p in seen] == [2, 4, 6, 8]
    tot = db.search_totals("t")
    assert tot["candidates"] == 8 == len(db.candidates()) // 2 and tot["calls"] == 4 and tot["budget_used_s"] == 40
    # per call: eval 10 s minus the setup of 2 baseline + 4 candidate rows (0.5 s each); compile = candidates' setup
    assert tot["measure_s"] == pytest.approx(4 * (10 - 6 * 0.5)) and tot["compile_s"] == pytest.approx(4 * 4 * 0.5)
    assert db.search_totals("nope") == dict(candidates=0, calls=0, budget_used_s=0.0, compile_s=0.0, measure_s=0.0)


def test_search_cli_run_limit_flag(monkeypatch):
    """--run-limit reaches search_main as given; a bad value is exit code 2."""
    from typer.testing import CliRunner

    from test_search import search_app

    got = {}
    monkeypatch.setattr(runmod, "search_main", lambda shapes, out, settings, **kw: got.update(settings=settings))
    app = search_app()
    run = CliRunner()
    res = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--run-limit", "8m"])
    assert res.exit_code == 0, res.output
    assert got["settings"].run_limit == "8m" and runmod.parse_duration(got["settings"].run_limit) == 480
    got.clear()
    run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu"])
    assert got["settings"].run_limit is None
    for bad in ("soon", "0s"):
        res = run.invoke(app, ["search", "--shapes", "16_16_16", "--device", "cpu", "--run-limit", bad])
        assert res.exit_code == 2, res.output


def test_a_search_resumes_on_another_machine_of_the_same_gpu_model(tmp_path, fake_eval, monkeypatch):
    """Device calls may land on different machines: the second run resumes (same model), rows
    keep the uuid that measured them, the library is built from both; another model is refused."""
    import harness.env

    real = harness.env.collect
    uuid = {"v": "GPU-aaaa"}
    monkeypatch.setattr(harness.env, "collect",
                        lambda device: dict(real(device), gpu_uuid=uuid["v"], gpu_name="NVIDIA H200"))
    out, lines = tmp_path / "s", []
    _main(out, lines)
    uuid["v"] = "GPU-bbbb"
    d = _main(out, lines)
    assert any("resuming on another NVIDIA H200 (GPU-bbbb)" in ln for ln in lines)
    assert d["candidates"] == 16 and d["run_candidates"] == 8
    db = KernelDB(out / "db")
    assert set(db.df["gpu_uuid"]) == {"GPU-aaaa", "GPU-bbbb"} and set(db.df["gpu_name"]) == {"NVIDIA H200"}
    lib = json.loads((out / "library.json").read_text())
    assert {e["shape"] for e in lib["entries"]} == {s.name for s in SHAPES}
    assert {e["gpu_uuid"] for e in lib["entries"]} <= {"GPU-aaaa", "GPU-bbbb"}
    monkeypatch.setattr(harness.env, "collect",
                        lambda device: dict(real(device), gpu_uuid="GPU-c", gpu_name="NVIDIA H100"))
    with pytest.raises(ValueError, match="another GPU model"):
        _main(out, lines)


def test_the_budget_is_wall_time_including_the_learner_and_bookkeeping(tmp_path, fake_eval, monkeypatch):
    """Time spent outside the paired call (proposing, the learner's update and checkpoint) is spent
    budget too: a 20-minute search must not run for 30 minutes of wall time."""
    orig = Learner.observe

    def slow_observe(self, shape, outcomes):
        fake_eval.clock.t += 5.0  # 5 fake seconds of learner work after every call
        return orig(self, shape, outcomes)

    monkeypatch.setattr(Learner, "observe", slow_observe)
    out, lines = tmp_path / "s", []
    d = _main(out, lines, run_limit=None, holdout=())
    # every call costs 10 s measuring + 5 s learner: 100 s of budget is 6 calls, not 10; a 7th,
    # started at 90 s, would end at 105 s, past the budget, so none is started
    assert d["stop_reason"] == "budget" and len(fake_eval.calls) == 6
    assert d["budget_used_s"] == pytest.approx(6 * 15 - 5)  # the last call's learner update is after its rows
    assert any("stopped: the next call would end past the budget" in ln for ln in lines)
