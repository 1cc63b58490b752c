"""Progress of a compare run: the hooks the runner calls, and an estimate of the time left.

Torch-free on purpose: the CLI imports this at start-up (``--help`` must stay fast).

The time left is estimated from the work left, not from a per-shape average: the shapes of one
set differ by up to 10^6x in multiply-adds, so after three small shapes an average says minutes
where hours remain. ``WorkModel`` predicts each shape's seconds from its FLOPs and the run's
settings (gate calls, rounds, the time budget per group); ``Eta`` rescales the prediction by
how far it was off on the shapes finished so far, and says nothing before the first one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

from harness.problem import Shape


class Reporter:
    """Progress hooks; the CLI subclasses this with rich progress bars."""

    def shape_started(self, index: int, total: int, shape: Shape) -> None: ...

    def stage(self, text: str) -> None: ...

    def shape_done(self, index: int, rows: list[dict]) -> None: ...

    def skipped(self, shape: Shape) -> None: ...

    def candidate(self, stage: str, key: tuple[str, str] | None) -> None:
        """Called before untrusted code runs: stage is prepare, gate, anticheat or timing;
        key the (method, layout) in flight, None when several are (timing)."""

    def expect(self, call_s: float) -> None:
        """The seconds one call of the shape being measured is expected to take (its baselines'
        measured call, else the physical floor): a supervisor scales its stage timeouts by it."""


# Mirrors of the measurement's settings (this module imports no torch; a test keeps them equal):
GATE_DRAWS = 3  # len(harness.gate.DISTRIBUTIONS): calls per method and layout before timing
MIN_BUDGET_ROUNDS = 3  # harness.timing.offline.MIN_BUDGET_ROUNDS: the budget stops a group only after this many rounds
BATCH_S = 1e-3  # harness.timing.offline.OfflineSettings.target_batch_us: a device sample's batch
SECONDS_PER_SHAPE = 0.2  # fixed cost of a shape besides its calls: input draws, prepare, bookkeeping


@dataclass(frozen=True)
class WorkModel:
    """Predicted seconds per shape: fixed cost + the calls the run makes x one call's time.

    ``flops_per_s`` is the rate of one call (``harness.env.fp16_flops_per_s``); ``entries`` the
    (method, layout) pairs that run on the device; ``modes`` x ``caches`` the groups. An offline
    group ends on its CI target or at the budget, and never before 3 rounds; the model assumes
    the budget (the usual end on a busy machine; the rescaling corrects it where the CI ends
    groups sooner). A round is one device sample (a batch of calls lasting ``BATCH_S``, or one
    call when a call lasts longer) and one host call per entry. Server mode makes
    ``server_calls`` calls per entry plus the idle gaps at ``qps``.
    """

    flops_per_s: float
    entries: int
    modes: tuple[str, ...] = ("offline",)
    caches: int = 1
    max_rounds: int = 200
    budget_s: float = 5.0
    server_calls: int = 50
    qps: float = 200.0

    def call_s(self, shape: Shape) -> float:
        return 2.0 * shape.m * shape.n * shape.k / self.flops_per_s

    def shape_s(self, shape: Shape) -> float:
        call = self.call_s(shape)
        total = SECONDS_PER_SHAPE + self.entries * GATE_DRAWS * call
        for mode in self.modes:
            if mode == "offline":
                round_s = self.entries * (max(BATCH_S, call) + call)
                group = max(MIN_BUDGET_ROUNDS * round_s, min(self.budget_s, self.max_rounds * round_s))
            else:
                group = self.entries * self.server_calls * (call + 1.0 / self.qps)
            total += self.caches * group
        return total

    def total_s(self, shapes: Sequence[Shape]) -> float:
        return sum(self.shape_s(s) for s in shapes)


class Eta:
    """Seconds left in a run: the model's prediction for the shapes left, scaled by the ratio of
    measured to predicted seconds over the shapes finished so far. ``workers`` shapes run at once
    (a scale-out run's actors), so the work left is shared among them."""

    def __init__(self, model: WorkModel, shapes: Sequence[Shape], clock=time.monotonic, workers: int = 1):
        self.model = model
        self.clock = clock
        self.workers = max(1, workers)
        self.left = {s: model.shape_s(s) for s in shapes}
        self.done_predicted = 0.0
        self.done_measured = 0.0
        self._running: dict[Shape, float] = {}  # shapes in flight -> when they started

    def skipped(self, shape: Shape) -> None:
        """A shape finished in an earlier run: no time to wait for, nothing learned."""
        self.left.pop(shape, None)

    def started(self, shape: Shape) -> None:
        self._running[shape] = self.clock()

    def done(self, shape: Shape) -> None:
        predicted = self.left.pop(shape, None)
        started = self._running.pop(shape, None)
        if predicted is not None and started is not None:
            self.done_predicted += predicted
            self.done_measured += self.clock() - started

    @property
    def scale(self) -> float:
        return self.done_measured / self.done_predicted if self.done_predicted > 0 else 1.0

    def remaining_s(self) -> float | None:
        """Predicted seconds until the run ends, a shape in flight counting what is left of it;
        None until a shape has finished (before that nothing calibrates the model)."""
        if self.done_predicted <= 0:
            return None
        total = 0.0
        now = self.clock()
        for shape, predicted in self.left.items():
            started = self._running.get(shape)
            total += predicted * self.scale - (0.0 if started is None else min(predicted * self.scale, now - started))
        return total / self.workers


def format_duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.5 h``: a rough figure for an estimate."""
    if not math.isfinite(seconds):
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
