"""The LLM proposer inside the real search loop with the sandboxed CPU evaluator.

The OpenAI-protocol test server answers one honest kernel and one garbage reply per prompt. The
loop must route the ``llm:<hash>`` spec through the plug-in in both processes (parent resolves
names, the worker measures), record the DB rows, and hand the outcomes back to the proposer,
whose trajectory rows then all carry a reward. On a CPU the CUDA kernel is "unsupported", so the
reward is -1: this checks the plumbing, not the kernel. The test fails if the spec does not
resolve in the worker (no DB row for it), if observe is not routed (reward stays null) or if the
garbage reply breaks the round.
"""

from __future__ import annotations

import pytest

from harness import env as envmod
from harness.problem import Shape
from harness.sandbox import Evaluator, Timeouts
from kernels_search.llm.backends import OpenAIBackend
from kernels_search.llm.kernels import KernelStore
from kernels_search.llm.proposer import LLMConfig, LLMProposer
from kernels_search.llm.trajectories import TrajectoryStore
from tests.test_llm_backends import FakeOpenAI
from tests.test_llm_parse import HONEST, fenced


def test_llm_proposer_in_search_loop_cpu(tmp_path, monkeypatch):
    loop = pytest.importorskip("kernels_search.search.loop")
    from kernels_search.search.db import KernelDB

    monkeypatch.setenv("HGEMM_LLM_KERNELS", str(tmp_path / "kernels"))  # inherited by the worker
    import kernels_search.llm.plugin  # noqa: F401

    replies = [fenced(HONEST), "garbage \x00\x01"]
    with FakeOpenAI(reply=lambda p, i: replies[i % 2]) as srv:
        prop = LLMProposer(OpenAIBackend(srv.url, backoff_s=0.01), tmp_path / "traj", KernelStore(), LLMConfig(n=2))
        with Evaluator("cpu", envmod.collect("cpu"), plugins=["kernels_search.llm.plugin"],
                       timeouts=Timeouts(start_s=120, prepare_s=30, run_s=30, timing_s=60)) as ev:
            db = KernelDB(tmp_path / "db")
            summary = loop.run_search([Shape(64, 64, 64)], 300, ev, db, None, proposers=[prop],
                                      settings=loop.search_settings(timing_budget_s=0.2, min_rounds=2), max_rounds=1)
    assert summary.candidates == 1
    df = KernelDB(tmp_path / "db").df
    cand = df[~df["is_baseline"]]
    assert len(cand) == 2 and cand["method"].str.startswith("llm:").all()
    assert set(cand["layout"]) == {"nn", "tn"} and (cand["origin"] == "llm").all()
    traj = TrajectoryStore(tmp_path / "traj").load()
    assert len(traj) == 2 and traj["reward"].notna().all()
    assert prop.pending() == {}
    assert traj[traj["parse_ok"]]["gate"].iloc[0].startswith("nn: unsupported")
