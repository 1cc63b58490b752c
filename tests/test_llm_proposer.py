"""The LLM proposer end to end on CPU, and its trajectory Parquet.

* a local OpenAI-protocol server returns a mix of one honest kernel (twice), a cheat, garbage and a
  truncated reply: exactly one candidate reaches the "evaluator", every completion is a
  trajectory row, invalid ones are rewarded -1 at once, the candidate's reward arrives through
  ``observe`` and is written for both completions that produced it;
* a tiny randomly initialised transformers model (garbage output): no candidate, no exception,
  every completion an invalid-completion trajectory;
* a server that keeps failing: ``propose`` returns [] and counts it;
* the Parquet round trip, the GRPO export (and ``datasets`` loading it, if installed), kill
  safety (a torn temporary file is ignored);
* the prompt context from a real kernel DB; the evaluator plug-in resolving ``llm:<hash>``;
* (slow, needs nvcc) ``precompile``: a kernel that does not build is rewarded -1 without the
  evaluator and its compiler error shows up in the next prompt for the shape.
"""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from harness.problem import Shape
from kernels_search.llm.kernels import KernelStore, spec_for
from kernels_search.llm.parse import parse_completion
from kernels_search.llm.proposer import LLMConfig, LLMProposer, aggregate_outcomes, context_from_db
from kernels_search.llm.prompt import PromptContext
from kernels_search.llm.trajectories import PROPOSAL_SCHEMA, TRAJECTORY_COLUMNS, TrajectoryStore, reward_rows
from kernels_search.proposals import Candidate, Outcome, SearchContext
from tests.test_llm_backends import FakeOpenAI, tiny_lm
from tests.test_llm_parse import CHEATS, HONEST, fenced

SHAPE = Shape(256, 256, 1024)


def mixed_replies():
    honest = parse_completion(fenced(HONEST)).source
    replies = [
        fenced(HONEST),
        "Sure! " + fenced(HONEST, before="Same kernel again:\n"),  # identical source: one candidate
        fenced(CHEATS["own stream"][0]),
        "\x00\x01\x02 garbage \xff" * 50,
        "I would tile it 128x128.",
        fenced(HONEST)[:900],  # cut off by max_tokens
    ]
    return honest, replies


def make(tmp_path, backend, **cfg):
    return LLMProposer(backend, tmp_path / "traj", KernelStore(tmp_path / "kernels"), LLMConfig(**cfg))


def test_proposer_against_openai_server(tmp_path):
    from kernels_search.llm.backends import OpenAIBackend

    honest, replies = mixed_replies()
    with FakeOpenAI(reply=lambda prompt, i: replies[i]) as srv:
        prop = make(tmp_path, OpenAIBackend(srv.url, backoff_s=0.01), n=len(replies), max_tokens=2048)
        ctx = SearchContext(shape=SHAPE, n=4, exclude=set(), layouts=("nn", "tn"))
        cands = prop.propose(SHAPE, ctx)
        sent = srv.posts[0]
    # the request carried the contrastive prompt as chat messages
    assert sent["messages"][0]["role"] == "system" and "M=256, N=256, K=1024" in sent["messages"][1]["content"]
    assert sent["n"] == len(replies) and sent["max_tokens"] == 2048

    assert len(cands) == 1
    c = cands[0]
    assert isinstance(c, Candidate) and c.origin == "llm" and c.family == "llm"
    assert c.spec == spec_for(honest) and len(c.meta["traj_ids"]) == 2
    assert KernelStore(tmp_path / "kernels").get(c.spec) == honest
    assert prop.stats["invalid"] == 4 and prop.stats["duplicates"] == 1

    store = TrajectoryStore(tmp_path / "traj")
    df = store.load()
    assert len(df) == len(replies) and list(df.columns) == TRAJECTORY_COLUMNS
    assert (df["backend"] == "openai").all() and (df["model"] == "fake-model").all()
    assert (df["layout"] == "nn,tn").all() and (df["shape"] == "256_256_1024").all()
    assert df["group_id"].nunique() == 1 and df["prompt"].str.contains("hgemm_run").all()
    inv = df[~df["parse_ok"]]
    assert len(inv) == 4 and (inv["reward"] == -1.0).all() and (inv["gate"] == "invalid completion").all()
    assert inv["parse_reason"].str.contains("creates its own CUDA stream").any()
    assert df[df["parse_ok"]]["reward"].isna().all()  # not evaluated yet

    # the loop measures it in both layouts and hands back outcomes
    outs = [Outcome(c, "nn", "ok", math.log(1.2), 10.0, 12.0),
            Outcome(c, "tn", "ok", math.log(0.9), 10.0, 9.0)]
    prop.observe(SHAPE, outs)
    assert prop.pending() == {}
    df = TrajectoryStore(tmp_path / "traj").load()
    ok = df[df["parse_ok"]]
    assert len(ok) == 2
    assert ok["reward"].tolist() == pytest.approx([(math.log(1.2) + math.log(0.9)) / 2] * 2)
    assert ok["speedup"].tolist() == pytest.approx([math.sqrt(1.2 * 0.9)] * 2)
    assert (ok["gate"] == "pass").all() and ok["build_ok"].all()
    assert df["t_reward"].notna().all() and df["t_proposed"].notna().all()

    # the same source proposed again later: rewarded from memory, not re-evaluated
    with FakeOpenAI(reply=lambda prompt, i: fenced(HONEST)) as srv:
        prop.backend = OpenAIBackend(srv.url, backoff_s=0.01)
        assert prop.propose(SHAPE, ctx) == []
    df = TrajectoryStore(tmp_path / "traj").load()
    assert df["reward"].notna().all() and len(df) == 2 * len(replies)


def test_failed_outcomes_and_aggregation():
    c = Candidate("llm", {}, "llm:0123456789ab", origin="llm")
    f = aggregate_outcomes([Outcome(c, "nn", "error", -1.0, None, 10.0, "BuildError: build failed ...\nerror: x"),
                            Outcome(c, "tn", "error", -1.0, None, 10.0, "BuildError: build failed")])
    assert f["reward"] == -1.0 and f["build_ok"] is False and f["speedup"] is None and "nn: error" in f["gate"]
    g = aggregate_outcomes([Outcome(c, "nn", "gate_failed", -1.0, None, 10.0, "wrong"),
                            Outcome(c, "tn", "ok", 0.5, 6.0, 10.0)])
    assert g["reward"] == pytest.approx(-0.25) and g["gate"].startswith("nn: gate_failed")
    assert aggregate_outcomes([Outcome(c, "nn", "ok", None, 5.0, None)])["reward"] is None


def test_proposer_survives_tiny_random_transformers_model(tmp_path):
    from kernels_search.llm.backends import TransformersBackend

    model, tok = tiny_lm(n_positions=512)
    be = TransformersBackend(model, tok, device="cpu", seed=0, model_name="tiny-random-gpt2")
    prop = make(tmp_path, be, n=3, max_tokens=24, temperature=1.0)
    assert prop.propose(SHAPE, SearchContext(shape=SHAPE, n=3, exclude=set())) == []
    assert prop.stats["backend_errors"] == 0 and prop.stats["completions"] == 3
    df = TrajectoryStore(tmp_path / "traj").load()
    assert len(df) == 3 and (~df["parse_ok"]).all()
    assert (df["reward"] == -1.0).all() and (df["model"] == "tiny-random-gpt2").all()
    assert (df["backend"] == "transformers").all()
    assert df["parse_reason"].str.startswith("invalid completion").all()


def test_backend_failure_is_survived(tmp_path):
    from kernels_search.llm.backends import OpenAIBackend

    with FakeOpenAI(script=["500"] * 20) as srv:
        prop = make(tmp_path, OpenAIBackend(srv.url, model="m", retries=1, backoff_s=0.01))
        assert prop.propose(SHAPE, SearchContext(shape=SHAPE, n=2, exclude=set())) == []
    assert prop.stats["backend_errors"] == 1 and "HTTP 500" in prop.last_error
    assert len(TrajectoryStore(tmp_path / "traj").load()) == 0


class Canned:
    name, model = "canned", "none"

    def __init__(self, texts):
        self.texts = texts

    def generate(self, prompts, n, max_tokens, temperature):
        return [self.texts[i % len(self.texts)] for i in range(len(prompts) * n)]


def test_trajectory_parquet_round_trip_and_grpo_export(tmp_path):
    prop = make(tmp_path, Canned([fenced(HONEST), "no code"]), n=2)
    (c,) = prop.propose(SHAPE, PromptContext())
    prop.record_reward(c, 0.25, build_ok=True, gate="pass", speedup=1.28)
    assert prop.record_reward(c, 0.9) == 0  # not pending any more: nothing written
    store = TrajectoryStore(tmp_path / "traj")
    files = list((tmp_path / "traj" / "proposals").glob("part-*.parquet"))
    assert len(files) == 1 and pq.read_schema(files[0]).remove_metadata().equals(PROPOSAL_SCHEMA)
    # a later reward event for the same trajectory wins; a torn temporary file is ignored
    tid = c.meta["traj_ids"][0]
    store.append_rewards(reward_rows([tid], 0.5, build_ok=True, gate="pass", speedup=1.6, note="re-measured"))
    (tmp_path / "traj" / "rewards" / ".part-999.parquet.tmp").write_bytes(b"PAR1 torn")
    df = store.load()
    assert sorted(df["reward"].tolist()) == [-1.0, 0.5]

    out = store.export_grpo(tmp_path / "grpo.parquet")
    t = pq.read_table(out)
    assert {"prompt", "completion", "reward", "shape", "layout", "backend", "model", "build_ok", "gate",
            "speedup", "t_proposed", "t_reward"} <= set(t.column_names)
    assert t.num_rows == 2 and isinstance(t.column("prompt")[0].as_py(), str)
    conv = pq.read_table(store.export_grpo(tmp_path / "grpo_chat.parquet", conversational=True))
    msgs = conv.column("prompt")[0].as_py()
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert conv.column("completion")[0].as_py()[0]["role"] == "assistant"

    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("parquet", data_files=str(out), split="train")
    assert ds.num_rows == 2 and {"prompt", "completion", "reward"} <= set(ds.column_names)
    assert sorted(ds["reward"]) == [-1.0, 0.5]
    ds2 = datasets.load_dataset("parquet", data_files=str(tmp_path / "grpo_chat.parquet"), split="train")
    assert ds2[0]["prompt"][1]["role"] == "user"


def test_context_from_kernel_db(tmp_path):
    """Examples come from the search's DB: family sources re-rendered, LLM sources from the store,
    figures and the last LLM compiler error of the shape."""
    from kernels_search.search.db import KernelDB

    kstore = KernelStore(tmp_path / "kernels")
    llm_spec = kstore.put(HONEST)
    db = KernelDB(tmp_path / "db")

    def row(method, family, knobs, m, n, k, layout, status, speedup, origin="policy", failure=None, reason=""):
        return {"is_baseline": False, "method": method, "family": family, "config": json.dumps(knobs),
                "origin": origin, "shape": f"{m}_{n}_{k}", "m": m, "n": n, "k": k, "layout": layout,
                "status": status, "status_reason": reason, "failure": failure, "speedup": speedup,
                "device_us_median": 10.0 if status == "ok" else None, "registers": 90.0, "spill_bytes": 0.0,
                "gpu_uuid": "GPU-x", "gpu_name": "NVIDIA H200"}

    db.append([
        row("smalltile:bm=32", "smalltile", {"bm": 32}, 256, 256, 1024, "nn", "ok", 1.1),
        row(llm_spec, "llm", {}, 256, 256, 1024, "nn", "ok", 0.7, origin="llm"),
        row("llm:ffffffffffff", "llm", {}, 256, 256, 1024, "nn", "error", None, origin="llm", failure="compile",
            reason="BuildError: kernel.cu(9): error: expected a ';'"),
        row("splitk:bm=64", "splitk", {"bm": 64}, 256, 512, 1024, "nn", "ok", 1.4),
        row("hopper:x", "hopper", {}, 256, 256, 512, "nn", "ok", 1.3),
    ])
    ctx = context_from_db(db, SHAPE, ("nn",), gpu="NVIDIA H200", kernels=kstore)
    names = [e.name for e in ctx.examples]
    assert names[0] == "smalltile:bm=32" and llm_spec in names and "splitk:bm=64" in names
    by = {e.name: e for e in ctx.examples}
    assert "hgemm-bench family smalltile" in by["smalltile:bm=32"].source
    assert by[llm_spec].source == HONEST and by["llm:ffffffffffff"].verdict.startswith("error")
    assert "expected a ';'" in ctx.last_compile_error
    # the CUTLASS-based family's figures are shown, its source (unusable for an LLM kernel) is not
    assert "hopper:x" in names and by["hopper:x"].source == "" and "CUTLASS" in by["hopper:x"].note
    prop = make(tmp_path, Canned(["x"]))
    p = prop.build_prompt(SHAPE, SearchContext(shape=SHAPE, n=1, exclude=set(), db=db, gpu="NVIDIA H200",
                                               layouts=("nn",)))
    assert "speedup 1.100x" in p.user and "expected a ';'" in p.user and "M=256 N=512 K=1024" in p.user


def test_plugin_resolves_llm_specs(tmp_path, monkeypatch):
    monkeypatch.setenv("HGEMM_LLM_KERNELS", str(tmp_path / "k"))
    spec = KernelStore().put(HONEST)
    import kernels_search.llm.plugin  # noqa: F401  (registers "llm")
    from harness.registry import resolve

    (m,) = resolve([spec])
    assert m.name == spec and not m.is_baseline
    from harness.registry import MethodSpecError

    with pytest.raises(MethodSpecError):
        resolve(["llm:000000000000"])


@pytest.mark.slow
def test_precompile_with_local_nvcc(tmp_path, monkeypatch):
    from kernels_search import toolchain

    if not toolchain.find_nvcc():
        pytest.skip("nvcc not found")
    monkeypatch.setenv("HGEMM_BUILD_CACHE", str(tmp_path / "build"))
    broken = HONEST.replace("float acc = 0.0f;", "float acc = 0.0f  // missing semicolon")
    prop = make(tmp_path, Canned([fenced(HONEST), fenced(broken)]), n=2, precompile=True)
    (c,) = prop.propose(SHAPE, PromptContext())  # the honest one builds; the broken one is rewarded -1 here
    assert prop.stats["compile_failed"] == 1
    df = TrajectoryStore(tmp_path / "traj").load()
    bad = df[df["gate"] == "compile error"]
    assert len(bad) == 1 and bad["reward"].iloc[0] == -1.0 and bad["build_ok"].iloc[0] == False  # noqa: E712
    good = df[df["candidate"] == c.spec]
    assert good["registers"].iloc[0] > 0 and good["spill_bytes"].iloc[0] == 0
    nxt = prop.build_prompt(SHAPE, PromptContext())
    assert "## Last compiler error" in nxt.user and "error" in nxt.user.split("## Last compiler error")[1]


def test_grpo_reward_function(tmp_path):
    """Valid sources go to ``evaluate`` with the row's shape and layouts; invalid and cheating
    completions get -1 without it; an evaluator exception is a failed candidate; rows recorded."""
    from kernels_search.llm.grpo import grpo_reward_function

    seen = []

    def evaluate(src, shape, layouts):
        seen.append((shape, layouts))
        if "T = 8" in src:
            raise RuntimeError("worker died")
        return 0.3

    store = TrajectoryStore(tmp_path / "g")
    f = grpo_reward_function(evaluate, store=store, model="tiny")
    comps = [fenced(HONEST), [{"role": "assistant", "content": fenced(CHEATS["own stream"][0])}], "junk",
             fenced(HONEST.replace("T = 16", "T = 8"))]
    r = f(["p"] * 4, comps, m=[64] * 4, n=[32] * 4, k=[128] * 4, layout=["nn,tn"] * 4, reward=[0.0] * 4)
    assert r == [0.3, -1.0, -1.0, -1.0]
    assert seen == [(Shape(64, 32, 128), ("nn", "tn"))] * 2
    df = store.load()
    assert len(df) == 4 and df["reward"].tolist() == [0.3, -1.0, -1.0, -1.0] and (df["backend"] == "grpo").all()


@pytest.mark.slow
def test_trl_grpo_trainer_consumes_export(tmp_path):
    """One GRPO step with TRL on the exported trajectories (tiny random model, CPU): the dataset's
    prompt column is used and the shape columns reach the reward function."""
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from kernels_search.llm.grpo import grpo_reward_function

    prop = make(tmp_path, Canned([fenced(HONEST), "junk"]), n=2)
    for s in (Shape(64, 64, 64), Shape(128, 64, 64)):
        for c in prop.propose(s, PromptContext()):
            prop.record_reward(c, 0.2)
    ds = datasets.load_dataset("parquet", data_files=str(TrajectoryStore(tmp_path / "traj").export_grpo(
        tmp_path / "grpo.parquet")), split="train")
    model, tok = tiny_lm(n_positions=8192)
    shapes = []
    fn = grpo_reward_function(lambda src, shape, lays: 0.5)

    def reward(prompts, completions, **cols):
        shapes.extend(zip(cols["m"], cols["n"], cols["k"]))
        return fn(prompts, completions, **cols)

    args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
                          max_completion_length=8, max_steps=1, report_to=[], use_cpu=True, save_strategy="no")
    trainer = trl.GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok)
    trainer.train()
    assert shapes and set(shapes) <= {(64, 64, 64), (128, 64, 64)}


@pytest.mark.slow
def test_parsed_candidate_compiles_through_plugin_method(tmp_path, monkeypatch):
    """The Method the evaluator's worker gets for ``llm:<hash>`` (plug-in -> raw_source) builds
    the stored source with nvcc (compile only: no GPU here) and exposes the C ABI symbols."""
    import ctypes

    from kernels_search import toolchain

    if not toolchain.find_nvcc():
        pytest.skip("nvcc not found")
    monkeypatch.setenv("HGEMM_BUILD_CACHE", str(tmp_path / "build"))
    prop = make(tmp_path, Canned([fenced(HONEST)]), n=1)
    (c,) = prop.propose(SHAPE, PromptContext())
    from kernels_search.llm.plugin import method

    m = method(c.spec, KernelStore(tmp_path / "kernels"))
    assert m.name == c.spec and m.source_hash == c.meta["source_hash"]
    res = m.build()
    assert res.ok, res.log[-2000:]
    assert res.resources["max_registers"] > 0 and res.spill_bytes == 0
    lib = ctypes.CDLL(res.lib_path)  # loads without a GPU; the symbols are there with C linkage
    assert lib.hgemm_run and lib.hgemm_workspace
