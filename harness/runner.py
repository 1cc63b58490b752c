"""The compare pipeline for one run: shapes -> evaluation -> result store.

For each shape the runner asks which (mode, cache) groups are still to measure (a rerun with
the same output skips finished groups), has them evaluated (``harness.evaluate``) in this
process or in the sandbox's worker process, and writes each finished group to the store at once.
"""

from __future__ import annotations

from harness.evaluate import (CACHES, ENV_COLUMNS, HARNESS_ERROR, MODES, CompareSettings,  # noqa: F401
                              ShapeEvaluator)
from harness.method import Method
from harness.problem import Shape
from harness.progress import Reporter
from harness.results import ResultStore
from harness.sandbox import EvaluatorError

__all__ = ["CACHES", "ENV_COLUMNS", "HARNESS_ERROR", "MODES", "CompareRunner", "CompareSettings", "Reporter"]


class CompareRunner:
    def __init__(self, settings: CompareSettings, methods: list[Method], store: ResultStore, env: dict,
                 reporter: Reporter | None = None, evaluator=None, specs: list[str] | None = None):
        """``evaluator`` (a harness.sandbox.Evaluator) runs each shape in its worker process;
        ``specs`` are then the --methods strings the worker resolves again."""
        self.s = settings
        self.evaluator = evaluator
        self.specs = specs
        self.store = store
        self.env = env
        self.reporter = reporter or Reporter()
        self.shapes = ShapeEvaluator(settings, methods, env, store.run_id, reporter=self.reporter)

    def _groups(self) -> list[tuple[str, str]]:
        return [(m, c) for m in self.s.modes for c in self.s.caches]

    def run(self) -> int:
        """Measure every shape not already finished; returns the number of groups written."""
        done = self.store.done_groups(retry_reason_prefix=HARNESS_ERROR)
        uuid = self.env.get("gpu_uuid")
        written = 0
        total = len(self.s.shapes)
        for i, shape in enumerate(self.s.shapes):
            groups = [g for g in self._groups() if (uuid, shape.name, g[0], g[1]) not in done]
            if not groups:
                self.reporter.skipped(shape)
                continue
            self.reporter.shape_started(i, total, shape)
            if self.evaluator:
                rows = self._run_shape_isolated(shape, groups)
            else:
                rows = self.shapes.evaluate(shape, groups, self.store.add_group)
            written += len(groups)
            self.reporter.shape_done(i, rows)
        return written

    def _run_shape_isolated(self, shape: Shape, groups: list[tuple[str, str]]) -> list[dict]:
        """The shape measured in the sandbox's worker; its groups land in our store."""
        all_rows: list[dict] = []
        try:
            for rows, samples in self.evaluator.evaluate_shape(shape, self.specs, self.s, groups, self.store.run_id):
                self.store.add_group(rows, samples)
                all_rows.extend(rows)
        except EvaluatorError as e:
            for mode, cache in groups:
                rows = self.shapes.error_rows(shape, mode, cache, f"{HARNESS_ERROR}: {e}")
                self.store.add_group(rows, [])
                all_rows.extend(rows)
        return all_rows
