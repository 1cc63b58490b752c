"""Evaluator sandbox: untrusted kernels run in a worker process that may die without harm.

Candidate code can hang, corrupt memory or kill its CUDA context (an illegal address poisons the
context for the rest of the process). So an ``Evaluator`` keeps one long-lived worker process
per GPU and sends it whole shapes: the worker prepares, gates, anti-cheat checks and times every
method of the shape with the same evaluation as an in-process run (``harness.evaluate``;
baselines included, so speedups stay paired within one process and one run), and sends the
finished rows back.

Before any untrusted call the worker says which (method, layout) is in flight and at which stage
(``prepare``, ``gate``, ``anticheat``, ``timing``). The parent waits with that stage's timeout,
scaled by the time one call of the shape is expected to take (``Timeouts``).
When the worker hangs (no message within the timeout) it is killed; when it dies or reports a
lost CUDA context it is restarted. Either way the culprit is excluded (its rows say why:
``timeout in gate`` / ``worker died``) and the shape is measured again without it. A death
during timing, where several methods are in flight, excludes every non-baseline method of that
shape. Finished shapes are already in the store, so nothing measured is lost.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing as mp
import os
import traceback
from dataclasses import dataclass
from typing import Sequence

from harness.evaluate import CompareSettings, ShapeEvaluator
from harness.method import ContextLost
from harness.problem import Shape
from harness.progress import Reporter


class EvaluatorError(RuntimeError):
    """The sandbox could not measure a shape at all (even baselines alone kill the worker)."""


@dataclass
class Timeouts:
    """How long the parent waits for the worker's next message in each stage.

    ``start_s`` and ``prepare_s`` are fixed: a start imports torch and a prepare may compile (its
    compiler has its own timeout). Once the worker has measured how long one call of the shape
    takes (``Reporter.expect``: its baselines' call, else the physical floor), the stages that
    run the kernel wait in proportion to it, never less than ``floor_s`` nor more than the fixed
    caps: the gate (one call per message, plus the high-precision reference) ``GATE_CALLS`` calls,
    the anti-cheat checks of one method (~2,000 calls in the side-stream and skipped-work
    checks) ``ANTICHEAT_CALLS`` calls, and the timing of a group its budget and server pacing
    (``timing_for``) or ``TIMING_CALLS`` calls per method, whichever is longer. The worker reports
    progress each offline round and every 16th server call, so in timing the wait bounds one round,
    never the group as a whole. A hang on a small shape then costs ``floor_s`` per stage (timing:
    three times the budget), not the cap."""

    start_s: float = 180.0  # worker start: imports torch, initialises CUDA, loads plug-ins
    prepare_s: float = 900.0  # compile + load of one method (a CUTLASS sm90 build takes 1-2 min)
    run_s: float = 120.0  # cap of one method's first calls: gate, anti-cheat
    timing_s: float = 1800.0  # cap of one (mode, cache) group of the shape, all methods together
    floor_s: float = 10.0  # the least any scaled stage waits: harness work and first-call set-up fit in it

    GATE_CALLS = 1000  # per message: the call, and the reference (fp64 runs ~60x slower than fp16 tensor cores)
    ANTICHEAT_CALLS = 20000  # ~10x the calls the checks make, for the flushes and spins between them
    TIMING_CALLS = 100000  # per method of a group: batches of up to ~1000 calls, up to 200 rounds in the budget

    def for_stage(self, stage: str, call_s: float | None = None, timing_floor_s: float = 0.0,
                  methods: int = 1) -> float:
        """The timeout of ``stage``; scaled when ``call_s`` (seconds of one call) is known."""
        if stage in ("start", "prepare"):
            return self.start_s if stage == "start" else self.prepare_s
        if stage == "timing":
            if call_s is None:
                return self.timing_s
            return min(self.timing_s, max(self.floor_s, timing_floor_s, self.TIMING_CALLS * methods * call_s))
        if call_s is None:
            return self.run_s
        calls = self.ANTICHEAT_CALLS if stage == "anticheat" else self.GATE_CALLS
        return min(self.run_s, max(self.floor_s, calls * call_s))


def timing_for(settings: CompareSettings, entries: int) -> float:
    """Seconds a timing group needs besides its calls: three times the offline budget (the rounds
    that end past it, graph captures, flushes), or three times the server pacing (``server_calls``
    calls per method at ``qps``), whichever is longer."""
    return 3.0 * max(settings.budget_s, entries * settings.server_calls / max(settings.qps, 1e-9))


# ---------------------------------------------------------------------------------- worker side
class _PipeReporter(Reporter):
    def __init__(self, conn):
        self.conn = conn
        self.text = ""

    def stage(self, text: str) -> None:
        self.text = text

    def candidate(self, stage: str, key) -> None:
        self.conn.send(("stage", stage, key, self.text))

    def expect(self, call_s: float) -> None:
        self.conn.send(("expect", call_s))


def _worker_main(conn, device: str, plugins: Sequence[str], env: dict) -> None:
    """Worker loop: import plug-ins, then measure shapes until told to stop."""
    from harness.registry import load_plugins, resolve

    for mod in plugins:
        importlib.import_module(mod)
    load_plugins()
    if device == "cuda":
        import torch

        torch.cuda.init()
    conn.send(("ready",))
    while True:
        req = conn.recv()
        if req is None:
            return
        shape, specs, settings, groups, run_id = req
        finished: list[tuple[list[dict], list[dict]]] = []
        try:
            evaluator = ShapeEvaluator(settings, resolve(specs), env, run_id, _PipeReporter(conn))
            evaluator.evaluate(shape, groups, lambda rows, samples: finished.append((rows, samples)))
            conn.send(("done", finished))
        except Exception as e:
            lost = e if isinstance(e, ContextLost) else _lost_context(e)
            if lost is not None:
                conn.send(("lost", lost.key, lost.reason))
                conn.close()
                os._exit(3)  # the CUDA context is gone: this process is done
            conn.send(("error", traceback.format_exc()))


def _lost_context(e: Exception) -> ContextLost | None:
    """A harness-level exception that left the CUDA context dead is a lost context (culprit
    unknown), not a harness bug: the parent restarts the worker instead of giving up."""
    from harness.method import check_cuda_context

    try:
        import torch

        if torch.cuda.is_initialized():
            check_cuda_context(None, f"{type(e).__name__}: {e}")
    except ContextLost as lost:
        return lost
    return None


# ---------------------------------------------------------------------------------- parent side
class Evaluator:
    """One worker process for one device; ``evaluate_shape`` is crash- and hang-proof."""

    def __init__(self, device: str, env: dict, plugins: Sequence[str] = (), timeouts: Timeouts | None = None,
                 reporter: Reporter | None = None):
        self.device = device
        self.env = env
        self.plugins = list(plugins)
        for mod in self.plugins:  # the parent resolves specs too (names, trust), never runs them
            importlib.import_module(mod)
        self.timeouts = timeouts or Timeouts()
        self.reporter = reporter or Reporter()
        self._ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited CUDA state
        self._proc = None
        self._conn = None
        self.restarts = 0

    # -- process management
    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker_main, args=(child, self.device, self.plugins, self.env),
                                       daemon=True, name="hgemm-bench-evaluator")
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.timeouts.start_s):
            self._kill()
            raise EvaluatorError(f"evaluator worker did not start within {self.timeouts.start_s:.0f} s")
        msg = parent.recv()
        if msg[0] != "ready":
            self._kill()
            raise EvaluatorError(f"evaluator worker failed to start: {msg}")

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(timeout=30)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(timeout=10)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- one shape
    def evaluate_shape(self, shape: Shape, specs: Sequence[str], settings: CompareSettings,
                       groups: Sequence[tuple[str, str]], run_id: str) -> list[tuple[list, list]]:
        """Measure one shape in the worker; returns [(rows, samples)] per (mode, cache) group."""
        from harness.registry import resolve

        methods = resolve(specs)  # names and trust, known here without running any of them
        untrusted = [f"{m.name}|{lay}" for m in methods if not m.is_baseline for lay in settings.layouts]
        excluded = dict(settings.excluded)
        for _attempt in range(2 + len(methods) * len(settings.layouts)):
            if self._proc is None or not self._proc.is_alive():
                self._start()
            self._conn.send((shape, list(specs), dataclasses.replace(settings, excluded=dict(excluded)),
                             list(groups), run_id))
            entries = sum(1 for m in methods for _ in settings.layouts)
            failure = self._await(shape, timing_for(settings, entries), entries)
            if isinstance(failure, list):
                return failure
            key, what = failure
            if key is not None:
                excluded[f"{key[0]}|{key[1]}"] = what
                continue
            # several methods were in flight (timing): every untrusted one is taken out
            left = [k for k in untrusted if k not in excluded]
            if not left:
                raise EvaluatorError(f"{shape.name}: the worker failed with only baselines left: {what}")
            for k in left:
                excluded[k] = f"{what}; culprit unknown, every non-baseline method of this shape is excluded"
        raise EvaluatorError(f"{shape.name}: gave up after repeated worker failures ({excluded})")

    def _await(self, shape: Shape, timing_floor_s: float = 0.0, entries: int = 1):
        """Follow the worker through one request: its groups, or (culprit key, what happened)."""
        stage, key, text, call_s = "start", None, "", None
        while True:
            timeout = self.timeouts.for_stage(stage, call_s, timing_floor_s, entries)
            if not self._conn.poll(timeout):
                self._kill()
                self.restarts += 1
                return key, f"timeout: no progress for {timeout:.0f} s in {stage}" + (f" ({text})" if text else "")
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                self._proc.join(timeout=10)
                code = self._proc.exitcode
                self._kill()
                self.restarts += 1
                how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                return key, f"worker died in {stage} ({how})"
            if msg[0] == "stage":
                _, stage, key, text = msg
                self.reporter.stage(text)
            elif msg[0] == "expect":
                call_s = msg[1]
                self.reporter.expect(call_s)
            elif msg[0] == "done":
                return msg[1]
            elif msg[0] == "lost":
                self._proc.join(timeout=30)
                self._kill()
                self.restarts += 1
                return (msg[1] if msg[1] is not None else key), f"killed the CUDA context in {stage}: {msg[2]}"
            elif msg[0] == "error":
                raise EvaluatorError(f"evaluator worker failed on {shape.name}:\n{msg[1]}")
