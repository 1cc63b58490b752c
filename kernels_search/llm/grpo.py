"""Bridge to TRL's ``GRPOTrainer``: the trajectory export as its dataset, a reward function.

``TrajectoryStore.export_grpo(path)`` writes a Parquet file ``datasets.load_dataset("parquet",
data_files=path, split="train")`` loads; GRPO uses its ``prompt`` column and passes every other
column (``m``, ``n``, ``k``, ``layout``, the recorded ``reward``, ...) to reward functions as
keyword arguments. ``grpo_reward_function(evaluate)`` is such a function: each new completion is
parsed and statically checked exactly as the proposer does (invalid: ``invalid_reward``), and a
valid source is scored by ``evaluate(source, shape, layouts) -> reward | None`` (on a GPU: store
the source in a ``KernelStore``, measure ``llm:<hash>`` with the baselines through the sandboxed
evaluator, the search's reward). With ``store`` every (prompt, completion, reward) of training is
appended as trajectory rows too (backend "grpo").

Sketch (GPU machine)::

    ds = datasets.load_dataset("parquet", data_files="grpo.parquet", split="train")
    trainer = trl.GRPOTrainer(model=path, reward_funcs=grpo_reward_function(my_evaluate),
                              args=trl.GRPOConfig(num_generations=8, max_completion_length=8192, ...),
                              train_dataset=ds)
"""

from __future__ import annotations

from typing import Callable, Sequence

from harness.problem import Shape
from kernels_search.llm.parse import parse_completion
from kernels_search.llm.trajectories import TrajectoryStore, new_id, now_utc, reward_rows

Evaluate = Callable[[str, Shape, tuple], "float | None"]


def _text(completion) -> str:
    """A completion as text: plain string, or conversational [{"role", "content"}, ...]."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)) and completion:
        last = completion[-1]
        if isinstance(last, dict):
            return str(last.get("content", ""))
    return "" if completion is None else str(completion)


def _at(values, i, default=None):
    if values is None:
        return default
    if isinstance(values, (list, tuple)):
        return values[i] if i < len(values) else default
    return values


def grpo_reward_function(evaluate: Evaluate, *, invalid_reward: float = -1.0,
                         failed_reward: float = -1.0, store: TrajectoryStore | None = None,
                         model: str = "") -> Callable:
    """A TRL reward function (``f(prompts, completions, **columns) -> list[float | None]``)."""

    def hgemm_reward(prompts: Sequence, completions: Sequence, m=None, n=None, k=None, layout=None,
                     **_columns) -> list[float | None]:
        out: list[float | None] = []
        props, rews = [], []
        for i, comp in enumerate(completions):
            text = _text(comp)
            parsed = parse_completion(text)
            shape = Shape(int(_at(m, i, 1)), int(_at(n, i, 1)), int(_at(k, i, 1)))
            lays = tuple(x for x in str(_at(layout, i, "nn") or "nn").split(",") if x)
            gate, note = None, ""
            if not parsed.ok:
                r, gate, note = invalid_reward, "invalid completion", parsed.reason
            else:
                try:
                    r = evaluate(parsed.source, shape, lays)
                except Exception as e:  # an evaluator failure is a failed candidate, not a crash
                    r, note = failed_reward, f"evaluate failed: {type(e).__name__}: {e}"
            out.append(r)
            if store is not None:
                tid = new_id()
                prompt = _text(_at(prompts, i, ""))
                props.append({"traj_id": tid, "prompt": prompt, "completion": text, "shape": shape.name,
                              "m": shape.m, "n": shape.n, "k": shape.k, "layout": ",".join(lays), "backend": "grpo",
                              "model": model, "parse_ok": parsed.ok, "parse_reason": parsed.reason,
                              "t_proposed": now_utc()})
                if r is not None:
                    rews += reward_rows([tid], r, gate=gate, note=note)
        if store is not None:
            store.append_proposals(props)
            store.append_rewards(rews)
        return out

    return hgemm_reward
