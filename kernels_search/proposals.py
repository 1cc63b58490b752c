"""The proposer interface: anything that suggests kernels for a shape plugs into the search loop.

Two kinds of proposer exist: the knob-level learner (``kernels_search.search.learner``, the
default) and the code-level LLM proposer (``kernels_search.llm``, opt-in). Both return
``Candidate`` objects whose ``spec`` is a method spec the evaluator's worker can resolve through
``harness.registry`` (``splitk:bm=64,...`` for a family config; an LLM proposer that writes new
source registers its own method name, e.g. ``llm:<source hash>``, in a plug-in module the
evaluator's worker imports). The loop measures every candidate together with the baselines in
one ``evaluate_shape`` call, writes the rows to the kernel DB and hands each proposer the
outcomes of the candidates it proposed through the optional ``observe``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from harness.problem import Shape


@dataclass
class Candidate:
    """One kernel to measure on one shape.

    ``family`` and ``knobs`` describe it for the DB and the learner (every knob, runtime ones
    included); ``spec`` is what the evaluator resolves. ``origin`` names the proposer;
    ``meta`` is the proposer's own (JSON-able) data: the LLM proposer keeps its prompt and
    completion there so the loop can hand them back with the reward in ``observe``.
    """

    family: str
    knobs: dict[str, Any]
    spec: str
    origin: str = "policy"
    meta: dict[str, Any] = field(default_factory=dict)

    def knobs_json(self) -> str:
        return json.dumps(self.knobs, sort_keys=True, default=str)


@dataclass
class SearchContext:
    """What a proposer may use when proposing for one shape.

    ``n``: how many candidates are wanted; ``exclude``: specs already measured (or proposed
    this round) on this shape, never to be proposed again; ``db``: the kernel DB (best and worse
    kernels of this and nearby shapes, compiler errors, via its query helpers); ``gpu``: the
    GPU model (gpu_name) whose rows count; ``layouts``: the B layouts every candidate is measured in;
    ``round``: the search round (0-based); ``seed``: a per (round, shape) seed.
    """

    shape: Shape
    n: int
    exclude: set[str]
    db: Any = None  # the search's kernels_search.search.db.KernelDB, when there is one
    gpu: str | None = None
    layouts: Sequence[str] = ("nn", "tn")
    round: int = 0
    seed: int = 0


@dataclass
class Outcome:
    """One measured (candidate, layout): its verdict and reward (None: no baseline to compare)."""

    candidate: Candidate
    layout: str
    status: str
    reward: float | None
    device_us: float | None
    baseline_us: float | None
    status_reason: str = ""
    failure: str = ""  # reward.failure_kind: '' | compile | wrong | crash | timeout | unsupported | error
    row_id: str = ""


@runtime_checkable
class Proposer(Protocol):
    """Suggests kernels for a shape. ``observe`` is optional (checked with hasattr)."""

    name: str

    def propose(self, shape: Shape, context: SearchContext) -> list[Candidate]: ...


def observe(proposer: Proposer, shape: Shape, outcomes: list[Outcome]) -> None:
    """Hand outcomes to a proposer that wants them (its ``observe(shape, outcomes)``)."""
    fn = getattr(proposer, "observe", None)
    if fn is not None and outcomes:
        fn(shape, outcomes)
