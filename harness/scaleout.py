"""Scale-out of a compare run over Ray actors: one actor per GPU (or CPU worker), shapes sharded.

A shape is the unit of work: each actor measures whole shapes with the same evaluation as the
single-process run (``harness.evaluate.ShapeEvaluator``, or the sandbox's worker when the run is
isolated) and returns the finished rows; the driver alone writes the one results file, so the
resume rules are the store's (a group finished on any GPU of the run is not measured again,
whatever the actor count now). An actor whose process dies (killed, out of memory, a dead CUDA
context) costs the shape it was on: that shape is tried once more on another actor, then
recorded as ``error`` rows saying why, and the run goes on with a fresh actor in its place.

Ray is an optional dependency (``pip install hgemm-bench[ray]``); nothing here imports it until a
pool starts. This module knows no kernel: methods travel as their ``--methods`` specs.
"""

from __future__ import annotations

import importlib
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from harness.evaluate import HARNESS_ERROR, CompareSettings, ShapeEvaluator
from harness.method import ContextLost, Method
from harness.problem import Shape
from harness.progress import Reporter
from harness.results import ResultStore

ACTOR_START_S = 300.0  # an actor's start: imports torch, initialises its device, loads the plug-ins
ATTEMPTS_PER_SHAPE = 2  # a shape whose actor dies is tried once more on another actor


class ScaleOutError(RuntimeError):
    """Ray is missing, the cluster cannot be reached, or it lacks the GPUs asked for."""


@dataclass
class PoolSpec:
    """Where the actors run and how many: ``actors`` None means every GPU of the Ray instance;
    ``address`` None means a local instance started (or already running) in this process."""

    device: str  # cuda: one GPU per actor (num_gpus=1); cpu: one CPU per actor
    actors: int | None = None
    address: str | None = None
    plugins: Sequence[str] = ()
    isolated: bool = False  # each actor measures in its own sandboxed worker (harness.sandbox)


class ShapeActor:
    """One Ray actor: measures whole shapes on its device (Ray pins it to one GPU)."""

    def __init__(self, device: str, plugins: Sequence[str], isolated: bool):
        from harness import env as envmod
        from harness.registry import load_plugins

        for mod in plugins:
            importlib.import_module(mod)
        load_plugins()
        self.device = device
        self.env = envmod.collect(device)
        self.evaluator = None
        if isolated:
            from harness.sandbox import Evaluator

            self.evaluator = Evaluator(device, self.env, plugins=plugins)

    def info(self) -> tuple[dict, int]:
        """The environment columns this actor's rows carry, and its process id."""
        return self.env, os.getpid()

    def evaluate(self, shape: Shape, specs: Sequence[str], settings: CompareSettings,
                 groups: Sequence[tuple[str, str]], run_id: str) -> tuple[str, object]:
        """("done", [(rows, samples)] per group), or ("error", why) when the shape could not be
        measured here; a lost CUDA context ends this process after answering ("lost", why)."""
        from harness.registry import resolve

        if self.evaluator is not None:
            from harness.sandbox import EvaluatorError

            try:
                return "done", self.evaluator.evaluate_shape(shape, specs, settings, groups, run_id)
            except EvaluatorError as e:
                return "error", str(e)
        finished: list[tuple[list, list]] = []
        try:
            ShapeEvaluator(settings, resolve(specs), self.env, run_id).evaluate(
                shape, groups, lambda rows, samples: finished.append((rows, samples)))
        except ContextLost as e:
            return "lost", f"the CUDA context died ({e})"
        return "done", finished


@dataclass
class _Actor:
    handle: object
    env: dict = field(default_factory=dict)
    pid: int = 0


class ActorPool:
    """The Ray instance and its actors; ``envs`` are the environments the actors report."""

    def __init__(self, spec: PoolSpec):
        try:
            import ray
        except ImportError as e:
            raise ScaleOutError("scale-out needs Ray: pip install 'hgemm-bench[ray]'") from e
        self.ray = ray
        self.spec = spec
        self._started_ray = False
        if not ray.is_initialized():
            local = {"num_cpus": max(os.cpu_count() or 1, spec.actors or 1)}
            where = {"address": spec.address} if spec.address else local
            try:
                ray.init(include_dashboard=False, log_to_driver=True, configure_logging=False, **where)
            except Exception as e:
                at = f" at {spec.address}" if spec.address else ""
                raise ScaleOutError(f"cannot start or reach Ray{at}: {type(e).__name__}: {e}") from e
            self._started_ray = True
        self.count = self._actor_count()
        self._cls = ray.remote(**self._resources())(ShapeActor)
        self.actors = [self._start() for _ in range(self.count)]
        try:
            for a in self.actors:
                self._await_info(a)
        except Exception:
            self.close()
            raise

    def _resources(self) -> dict:
        return {"num_gpus": 1, "num_cpus": 1} if self.spec.device == "cuda" else {"num_cpus": 1}

    def _actor_count(self) -> int:
        have = self.ray.cluster_resources()
        kind = "GPU" if self.spec.device == "cuda" else "CPU"
        available = int(have.get(kind, 0))
        want = self.spec.actors if self.spec.actors is not None else available
        if want < 1 or want > available:
            self.close()
            raise ScaleOutError(f"asked for {want if self.spec.actors is not None else 'all'} {kind} actor(s) but the "
                                f"Ray instance has {available} {kind}(s)")
        return want

    def _start(self) -> _Actor:
        return _Actor(self._cls.remote(self.spec.device, list(self.spec.plugins), self.spec.isolated))

    def _await_info(self, actor: _Actor) -> None:
        try:
            actor.env, actor.pid = self.ray.get(actor.handle.info.remote(), timeout=ACTOR_START_S)
        except Exception as e:
            raise ScaleOutError(f"a Ray actor did not start within {ACTOR_START_S:.0f} s: "
                                f"{type(e).__name__}: {e}") from e

    @property
    def envs(self) -> list[dict]:
        return [a.env for a in self.actors]

    def replace(self, dead: _Actor) -> _Actor | None:
        """A fresh actor in the dead one's place, or None when none can start."""
        try:
            self.ray.kill(dead.handle)
        except Exception:
            pass
        self.actors.remove(dead)
        fresh = self._start()
        try:
            self._await_info(fresh)
        except ScaleOutError:
            return None
        self.actors.append(fresh)
        return fresh

    def close(self) -> None:
        for a in getattr(self, "actors", []):
            try:
                self.ray.kill(a.handle)
            except Exception:
                pass
        self.actors = []
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False


class ScaleOutRunner:
    """The compare run's driver over an ``ActorPool``: same settings, store and progress hooks
    as ``harness.runner.CompareRunner``, shapes measured on the actors in parallel."""

    def __init__(self, settings: CompareSettings, methods: list[Method], specs: Sequence[str], store: ResultStore,
                 pool: ActorPool, reporter: Reporter | None = None):
        self.s = settings
        self.methods = methods
        self.specs = list(specs)
        self.store = store
        self.pool = pool
        self.reporter = reporter or Reporter()
        self.first_env = pool.envs[0]  # the rows of shapes no actor is left to measure name this device

    def pending(self) -> list[tuple[int, Shape, list[tuple[str, str]]]]:
        """(index, shape, groups left) for every shape with something to measure; a group done
        on any GPU is done (the actor count may have changed since)."""
        done = {key[1:] for key in self.store.done_groups(retry_reason_prefix=HARNESS_ERROR)}
        out = []
        for i, shape in enumerate(self.s.shapes):
            groups = [(m, c) for m in self.s.modes for c in self.s.caches if (shape.name, m, c) not in done]
            if groups:
                out.append((i, shape, groups))
            else:
                self.reporter.skipped(shape)
        return out

    def run(self) -> int:
        """Measure every shape not already finished; returns the number of groups written."""
        ray = self.pool.ray
        todo = deque(self.pending())
        tries: dict[int, list[str]] = {}
        idle = list(self.pool.actors)
        running: dict = {}
        written = 0
        total = len(self.s.shapes)
        while todo or running:
            while idle and todo:
                actor, item = idle.pop(), todo.popleft()
                i, shape, groups = item
                if i not in tries:
                    self.reporter.shape_started(i, total, shape)
                tries.setdefault(i, [])
                ref = actor.handle.evaluate.remote(shape, self.specs, self.s, groups, self.store.run_id)
                running[ref] = (actor, item)
            if not running:  # no actor left to run the shapes still to do
                for i, shape, groups in todo:
                    written += self._error(i, shape, groups, self.first_env, "no Ray actor left to measure it")
                break
            self.reporter.stage(f"{len(running)} shape(s) on {len(self.pool.actors)} actor(s)")
            (ref,), _ = ray.wait(list(running), num_returns=1)
            actor, (i, shape, groups) = running.pop(ref)
            try:
                kind, payload = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                kind, payload = "lost", f"actor process {actor.pid} died ({type(e).__name__})"
            except ray.exceptions.RayTaskError as e:
                kind, payload = "error", f"{type(e.cause).__name__}: {e.cause}" if e.cause else str(e)
            if kind == "done":
                rows = []
                for group_rows, samples in payload:
                    self.store.add_group(group_rows, samples, any_device=True)
                    rows.extend(group_rows)
                written += len(groups)
                self.reporter.shape_done(i, rows)
                idle.append(actor)
            elif kind == "lost":
                tries[i].append(payload)
                fresh = self.pool.replace(actor)
                if fresh is not None:
                    idle.append(fresh)
                if len(tries[i]) < ATTEMPTS_PER_SHAPE:
                    todo.appendleft((i, shape, groups))
                else:
                    written += self._error(i, shape, groups, actor.env, "; then ".join(tries[i]))
            else:
                written += self._error(i, shape, groups, actor.env, payload)
                idle.append(actor)
        return written

    def _error(self, i: int, shape: Shape, groups, env: dict, why: str) -> int:
        """Record the shape's groups as ``error`` rows (retried on resume) of the GPU it was on."""
        maker = ShapeEvaluator(self.s, self.methods, env, self.store.run_id)
        rows = []
        for mode, cache in groups:
            group = maker.error_rows(shape, mode, cache, f"{HARNESS_ERROR}: {why}")
            self.store.add_group(group, [], any_device=True)
            rows.extend(group)
        self.reporter.shape_done(i, rows)
        return len(groups)
