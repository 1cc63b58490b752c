"""The search keeps its wall-clock budget and the build pool busy (CPU evaluator, fake builds).

Why these can fail: a round that waits for every build of a shape before measuring any, a failed
build sent to the GPU (or recorded once per layout, or not at all), a call started that ends past
the budget, builds left running (or waited for) after the deadline, a compiler that a kill does
not reach, progress that stays in a pipe's buffer until the search ends, a build pool smaller
than the cores the process may use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import test_search_plugin  # noqa: F401  (registers the cpuk family and its search family here)
from harness.problem import Shape
from kernels_search import build as build_mod
from kernels_search.search.build_pool import BuildPool
from kernels_search.search.db import KernelDB
from kernels_search.search.learner import Learner
from kernels_search.search.loop import run_search, search_settings

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [Shape(16, 16, 32), Shape(32, 16, 64)]
CALL_S = 0.3  # seconds a fake call takes


class SleepyEvaluator:
    """evaluate_shape that takes CALL_S real seconds and returns made-up correct rows."""

    device = "cpu"

    def __init__(self):
        self.env = {"gpu_uuid": "cpu", "gpu_name": "CPU: fake", "device": "cpu"}
        self.calls: list[tuple[str, list[str], float]] = []

    def evaluate_shape(self, shape, specs, settings, groups, run_id):
        t0 = time.perf_counter()
        rows = test_search_plugin.made_up_rows(self.env, shape, specs, settings.layouts)
        time.sleep(CALL_S)
        self.calls.append((shape.name, list(specs), t0))
        return [(rows, [])]


def learner():
    return Learner({"cpuk": test_search_plugin.FAMILY}, layouts=("nn", "tn"), seed=0)


def test_builds_run_while_the_gpu_measures_failed_builds_are_one_row_and_the_budget_holds(tmp_path):
    """A build that never ends does not hold up its shape (the others are measured as they are
    built) nor the stop (the search ends on its budget); a build that fails is one row with the
    compiler's reason and never reaches the evaluator."""
    release = threading.Event()
    slow: list[str] = []
    started = time.perf_counter()

    def prebuild(specs):
        (spec,) = specs
        if "pad=2" in spec:
            raise RuntimeError("nvcc: error: bad tile")
        if "pad=3" in spec and not slow:  # the first pad=3 config compiles for ever
            slow.append(spec)
        if spec in slow:
            release.wait(60)
        else:
            time.sleep(0.05)

    ev, lines = SleepyEvaluator(), []
    db = KernelDB(tmp_path / "db")
    budget = 4.0
    try:
        s = run_search(SHAPES, budget, ev, db, learner(), batch_per_shape=6, settings=search_settings(["nn", "tn"]),
                       search_id="b", prebuild=prebuild, lookahead=1, log=lines.append, run_t0=started)
        wall = time.perf_counter() - started
    finally:
        release.set()
    assert s.stop_reason == "budget" and wall <= budget + 1.0
    measured = {sp for _, specs, _ in ev.calls for sp in specs}
    cand = db.candidates()
    failed = cand[cand.failure == "compile"]
    assert len(failed) >= 1 and not failed.duplicated(["call_id", "method"]).any()  # one row each
    assert failed.status_reason.str.contains("bad tile").all() and (failed.reward == -1.0).all()
    assert not set(failed.method) & measured
    assert slow and slow[0] not in measured and slow[0] not in set(cand.method)
    # the slow build's shape was measured anyway, in the first round
    first = cand[cand["round"] == 0]
    assert set(first["shape"]) == {sh.name for sh in SHAPES} and (first.failure == "").any()
    rounds = [ln for ln in lines if ln.startswith("round ")]
    assert rounds and "candidates measured" in rounds[0] and "failed" in rounds[0] and "budget left" in rounds[0]
    assert any("1 build(s) still running at the stop were killed" in ln for ln in lines)


def test_no_call_starts_that_would_end_past_the_budget(tmp_path):
    """Calls take CALL_S (plus the loop's own work); with less than a call's cost left, the search
    stops instead of overrunning: it ends within a fraction of one call of the budget, on either side."""
    ev = SleepyEvaluator()
    budget = 3.0
    started = time.perf_counter()
    s = run_search(SHAPES, budget, ev, KernelDB(tmp_path / "db"), learner(), batch_per_shape=1,
                   settings=search_settings(["nn"], timing_budget_s=0.2), search_id="c", prebuild=None, run_t0=started)
    wall = time.perf_counter() - started
    assert s.stop_reason == "budget" and budget - 2 * CALL_S <= wall <= budget + CALL_S
    assert len(ev.calls) >= 4 and all(t0 + CALL_S <= started + budget + CALL_S for _, _, t0 in ev.calls)


def test_a_kill_reaches_the_compiler_and_is_not_cached(tmp_path):
    """The deadline's kill: a running compiler (its own process group, children included) dies at
    once, and the pool's close cancels what has not started."""
    got = {}

    def run():
        got["res"] = build_mod._compile(["sh", "-c", "sleep 60 & sleep 60"], tmp_path, 120)

    t = threading.Thread(target=run)
    t.start()
    for _ in range(100):
        if build_mod._RUNNING:
            break
        time.sleep(0.02)
    t0 = time.perf_counter()
    assert build_mod.kill_running() == 1
    t.join(10)
    rc, log, interrupted = got["res"]
    assert time.perf_counter() - t0 < 5 and rc < 0 and interrupted and "killed" in log
    pool = BuildPool(lambda specs: build_mod._compile(["sleep", "60"], tmp_path, 120), workers=1)
    pool.submit(["a", "b"])
    time.sleep(0.3)
    t0 = time.perf_counter()
    assert pool.close() == 2
    while not pool.ready("a") and time.perf_counter() - t0 < 5:
        time.sleep(0.05)
    assert pool.ready("a") and time.perf_counter() - t0 < 5


def test_the_build_pool_uses_every_core_this_process_may_run_on():
    assert build_mod.default_workers() == len(os.sched_getaffinity(0))
    pool = BuildPool(lambda specs: None)
    assert pool.workers == build_mod.default_workers()
    pool.submit(["x"])
    assert pool.wait_any(["x"], 5) and pool.ready("x") and pool.failure("x") == ""
    pool.close()


def test_a_cli_search_keeps_its_budget_and_prints_each_round_to_a_pipe(tmp_path):
    """``hgemm-bench search --budget 20s`` on the CPU evaluator, its output a pipe: round lines
    arrive while it runs (not when it exits), and it ends within the issue's allowance of the budget
    (5 % or 10 s, whichever is larger: on 2 loaded cores one CPU call can overrun 1 s)."""
    out = tmp_path / "s"
    cmd = [sys.executable, "-m", "harness.cli", "search", "--device", "cpu", "--shapes", "16_16_32,32_16_64,16_32_16",
           "--families", "cpuk", "--plugin", "test_search_plugin", "--budget", "20s", "--time-budget", "0.2",
           "--batch", "2", "--out", str(out)]
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    seen_running, lines = False, []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("round ") and not seen_running:
            seen_running = proc.poll() is None
    proc.wait(60)
    wall = time.perf_counter() - t0
    text = "".join(lines)
    assert proc.returncode == 0, text
    assert seen_running, text  # a round line reached the pipe before the search ended
    assert wall <= 30, text
    doc = json.loads((out / "summary.json").read_text())
    assert doc["budget_used_s"] <= 20 + max(0.05 * 20, 10) and doc["stop_reason"] == "budget"


class LayoutDecliningEvaluator(SleepyEvaluator):
    """Rows as SleepyEvaluator's, except that pad=1 configs decline layout nn (one ``unsupported`` row, as a
    tn-only kernel does) and pad=2 configs fail the gate in every layout."""

    def evaluate_shape(self, shape, specs, settings, groups, run_id):
        ((rows, extra),) = super().evaluate_shape(shape, specs, settings, groups, run_id)
        for r in rows:
            if "pad=1" in r["method"] and r["layout"] == "nn":
                r.update(status="unsupported", status_reason="serves layout tn only", gate_passed=None,
                         device_us_median=None)
            elif "pad=2" in r["method"]:
                r.update(status="gate_failed", status_reason="max error 1.0", gate_passed=False)
        return [(rows, extra)]


def test_progress_counts_a_declined_layout_apart_from_failures(tmp_path):
    """A config that declines one layout has not failed: each round's line counts failures (here the gate's) and
    declined layouts separately, from the rows the DB holds."""
    ev, lines = LayoutDecliningEvaluator(), []
    db = KernelDB(tmp_path / "db")
    run_search(SHAPES, 30.0, ev, db, learner(), batch_per_shape=8, max_rounds=2,
               settings=search_settings(["nn", "tn"], timing_budget_s=0.2), search_id="d", prebuild=None,
               log=lines.append, run_t0=time.perf_counter())
    cand = db.candidates()
    by_round = {}
    for rnd, g in cand.groupby("round"):
        wrong = set(g[g.failure == "wrong"].method)
        declined = set(g[g.failure == "unsupported"].method) - wrong
        by_round[int(rnd)] = (len(wrong), len(declined))
    assert any(d for _, d in by_round.values()) and any(w for w, _ in by_round.values())  # both kinds occurred
    rounds = [ln for ln in lines if ln.startswith("round ")]
    for rnd, (wrong, declined) in by_round.items():
        line = next(ln for ln in rounds if ln.startswith(f"round {rnd}:") or ln.startswith(f"round {rnd} "))
        assert f", {wrong} failed" in line
        assert (f"({declined} declined a layout)" in line) if declined else "declined" not in line
