"""Evaluation of one shape: prepare, gate, anti-cheat check and time every method on it.

This is the one place a shape is measured. The in-process runner (``harness.runner``) and the
sandbox's worker process (``harness.sandbox``) both call ``ShapeEvaluator.evaluate``; it knows
neither the results store nor the process it runs in, and hands each finished (mode, cache)
group to a callback.

Per shape, every (method, layout) is prepared once, gated once, then timed in each requested
(mode, cache) group with all methods and both layouts interleaved in the same rounds, so any
two rows of a group pair up for speedups. Nothing a method does (raise, refuse, fail the gate)
stops the evaluation: it becomes that row's status. A harness-level failure on the shape (for
example out of memory) becomes an ``error`` row in each group not yet finished.
"""

from __future__ import annotations

import json
import math
import secrets
import statistics
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property, partial
from typing import Callable

import torch

from harness import compare_defaults as defaults
from harness.anticheat import CheatReport, run_anticheat
from harness.gate import FP64_MAX_MNK, GateCandidate, GateResult, run_gate
from harness.method import (ContextLost, Method, Prepared, PrepareContext, Support, Unsupported,
                            check_cuda_context, unsupported)
from harness.problem import Problem, Shape
from harness.progress import Reporter
from harness.results import SCHEMA_VERSION, config_json
from harness.shapes import ShapeOrigin, origin_columns
from harness.tensors import GUARD_ELEMS, InputSet, cold_set_count, set_bytes, timing_sets
from harness.timing import Entry, Measurement, OfflineSettings, measure_offline, measure_server, time_candidates
from harness.timing.clocks import ClockLog, ClockSampler
from harness.timing.kernel_clock import CallTimes
from harness.timing.stats import summarize

MODES = ("offline", "server")
CACHES = ("warm", "cold")
HARNESS_ERROR = "harness error on this shape"  # groups with this reason are retried on resume
ENV_COLUMNS = (
    "device", "gpu_name", "gpu_uuid", "driver", "cuda_version", "torch_version", "cublas_version",
    "cublaslt_version", "nvmath_version", "hgemm_bench_version", "git_commit", "nvcc_version",
    "cutlass_version", "triton_version", "hostname", "power_limit_w", "app_sm_clock_mhz", "app_mem_clock_mhz",
)

Emit = Callable[[list[dict], list[dict]], None]  # (rows, samples) of one finished (mode, cache) group


@dataclass
class CompareSettings:
    shapes: list[Shape]
    layouts: list[str] = field(default_factory=lambda: ["nn", "tn"])
    modes: list[str] = field(default_factory=lambda: ["offline"])
    caches: list[str] = field(default_factory=lambda: ["warm"])
    ci_target: float = defaults.CI_TARGET
    min_rounds: int = defaults.MIN_ROUNDS
    max_rounds: int = defaults.MAX_ROUNDS
    budget_s: float = defaults.BUDGET_S
    # offline: GPU time of one device-time sample (a batch of calls, one CUDA graph): calls per batch =
    # this / one call's time. Shorter batches cost less GPU and capture time a round; see
    # BENCHMARKS.md's throughput section before changing the default
    batch_us: float = OfflineSettings.target_batch_us
    prime: bool = True  # offline: one eager call before each graph sample (harness.timing.samplers says why)
    cold_by_cupti: bool = True  # offline cold on shapes that flush: CUPTI times each call (OfflineSettings says why)
    qps: float = defaults.QPS
    server_calls: int = defaults.SERVER_CALLS
    seed: int | None = None  # None: a fresh unpredictable seed for the gate's draws
    anticheat: bool = True  # run harness.anticheat on every non-baseline method that passed the gate
    # "method|layout" -> reason: slots the sandbox took out after they hung or killed a worker
    excluded: dict[str, str] = field(default_factory=dict)
    # shape name -> the method names measured on it (``compare --plan``); a shape not in it, or an
    # empty map, gets every method. The methods of one shape still share its rounds, so a per-shape
    # plan changes which pairs are measured, not how: a held-out check measures each shape's own
    # picks and the reference instead of every pick on every shape.
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # shape name -> the (model, layer)s it comes from (``--shapes model:...``, see
    # harness.shapes.resolve_shapes); recorded in the rows' source_model / source_layer columns
    origins: dict[str, tuple[ShapeOrigin, ...]] = field(default_factory=dict)
    label: str = ""  # the run's name for people (``compare --label``), in every row's run_label


def run_bytes(problem: Problem, layouts: int, gate_candidates: int, device: str, cold: bool = False,
              l2_bytes: int = 50 << 20) -> int:
    """Peak bytes a compare run allocates for one shape: what must fit before it is measured.

    Kept through the shape: one (A, B, C) timing set per layout. On top, the larger of
    * the gate (one layout at a time): A, B and their pristine copies, a guarded C and the
      previous draw's output per candidate, the high-precision reference (fp64 up to
      ``gate.FP64_MAX_MNK`` multiply-adds, else fp32) with A and B converted to it, and the
      error computation's two temporaries of C's size in that precision;
    * cold-cache timing on a GPU: the rotated input sets of every layout (``cold_set_count``).
    A method's own workspace is not counted (the method owns it, and it is small next to these).
    """
    m, n, k = problem.m, problem.n, problem.k
    half = 2  # bytes of an fp16 element
    mk, kn, mn = m * k, k * n, m * n
    kept = layouts * half * (mk + kn + mn)
    ref = 8 if m * n * k <= FP64_MAX_MNK else 4
    gate = (2 * half * (mk + kn) + gate_candidates * half * (2 * mn + 2 * GUARD_ELEMS)
            + ref * (mk + kn + mn) + 2 * ref * mn)
    rotated = 0
    if cold and device == "cuda":
        rotated = layouts * cold_set_count(problem, l2_bytes) * set_bytes(problem)
    return int(kept + max(gate, rotated))


@dataclass
class _Slot:
    """One (method, layout) of the shape being measured."""

    method: Method
    problem: Problem
    support: Support
    prepared: Prepared | None = None
    error: str = ""
    gate: GateResult | None = None
    cheat: CheatReport | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.method.name, self.problem.layout)


def serves_any_shape(method: Method) -> bool:
    """Whether ``method`` computes every shape its ``supports`` accepts, so that a probe on another
    shape is a fair test of it (the precision check's large-K probe). A method says no with
    ``any_shape = False`` (a kernel built for its own shapes, e.g. an external per-shape release);
    one that says nothing is taken to serve any shape, as library calls and kernel families do."""
    return bool(getattr(method, "any_shape", True))


def _support(method: Method, problem: Problem, device: str) -> Support:
    if device not in method.devices:
        return unsupported(f"unsupported on {device}")
    try:
        return method.supports(problem, device)
    except Exception as e:
        return unsupported(f"supports() raised {type(e).__name__}: {e}")


class ShapeEvaluator:
    """Measures shapes with one set of methods and settings, for one run.

    ``seed`` drives the gate's draws and the round order (None: ``settings.seed``, else a fresh
    unpredictable one). ``reporter`` hears the stages and which untrusted call is in flight.
    """

    def __init__(self, settings: CompareSettings, methods: list[Method], env: dict, run_id: str,
                 reporter: Reporter | None = None):
        self.s = settings
        self.methods = methods
        self.env = env
        self.run_id = run_id
        self.device = env["device"]
        self.reporter = reporter or Reporter()
        # a fixed --seed, else a fresh one per evaluator (one per shape in a sandbox worker)
        self.seed = settings.seed if settings.seed is not None else secrets.randbits(31)
        self.l2_bytes = int(env.get("l2_bytes", 50 << 20))

    @cached_property
    def clocks(self) -> ClockSampler:
        """NVML for this process's GPU, opened at the first timing: an evaluator that only writes
        error rows (a scale-out driver, which may have no GPU) never touches the device."""
        return ClockSampler(torch.cuda.current_device() if self.device == "cuda" else None)

    def _base_row(self, slot: _Slot, mode: str, cache: str) -> dict:
        p, m = slot.problem, slot.method
        row = {c: self.env.get(c) for c in ENV_COLUMNS}
        row.update(
            schema_version=SCHEMA_VERSION,
            run_id=self.run_id,
            measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            shape=p.shape.name, m=p.m, n=p.n, k=p.k, layout=p.layout, dtype=p.dtype,
            method=m.name, family=m.family, is_baseline=bool(m.is_baseline),
            config=config_json(m.config), source_hash=m.source_hash or "",
            info=config_json(dict(slot.prepared.info if slot.prepared else {},
                                  **({"anticheat": slot.cheat.figures()} if slot.cheat else {}))),
            setup_s=slot.prepared.setup_s if slot.prepared else None,
            compile_s=slot.prepared.compile_s if slot.prepared else None,
            run_label=self.s.label or None,
            mode=mode, cache=cache, qps=self.s.qps if mode == "server" else None,
            ci_target=self.s.ci_target if mode == "offline" else None,
            floor_us=p.floor_us(self.env.get("gpu_name")) if self.device == "cuda" else None,
            **origin_columns(self.s.origins.get(p.shape.name)),
        )
        if slot.gate:
            row.update(slot.gate.columns())
        if not slot.support:
            row.update(status="unsupported", status_reason=slot.support.reason)
        elif slot.gate and slot.gate.unsupported:
            row.update(status="unsupported", status_reason=slot.gate.reason)
        elif slot.error:
            row.update(status="error", status_reason=slot.error)
        elif slot.gate and not slot.gate.passed:
            row.update(status="gate_failed", status_reason=slot.gate.reason)
        elif slot.cheat and not slot.cheat.passed:
            row.update(status="gate_failed", status_reason=f"anti-cheat: {slot.cheat.reason}")
        else:
            row.update(status="ok", status_reason="")
        return row

    # ------------------------------------------------------------------ stages
    def _prepare(self, slots: list[_Slot]) -> dict[str, tuple]:
        inputs = {}
        for layout in self.s.layouts:
            p = Problem(slots[0].problem.shape, layout)
            (st,) = timing_sets(p, self.device, 1, self.seed)
            inputs[layout] = (st.a, st.b, st.c)
        for slot in slots:
            if not slot.support or slot.error:
                continue
            self.reporter.stage(f"prepare {slot.method.name} {slot.problem.layout}")
            self.reporter.candidate("prepare", slot.key)
            ins = inputs[slot.problem.layout]
            ctx = PrepareContext(self.device, ins, partial(time_candidates, inputs=ins, device=self.device),
                                 CallTimes if self.device == "cuda" else None)
            t0 = time.perf_counter()
            try:
                prep = slot.method.prepare(slot.problem, ctx)
                if not prep.setup_s:
                    prep.setup_s = time.perf_counter() - t0
                slot.prepared = prep
            except Unsupported as e:
                slot.support = unsupported(str(e))
            except Exception as e:
                slot.error = f"prepare raised {type(e).__name__}: {e}"
                self._check_context(slot.key, slot.error)
        return inputs

    def _expected_call_s(self, slots: list[_Slot], inputs: dict) -> float:
        """Seconds one call of this shape is expected to take: the slowest prepared baseline's
        second call (the first may initialise libraries), synchronized, on the timing inputs; the
        physical floor (``Problem.floor_us``) when no baseline is prepared."""
        sync = torch.cuda.synchronize if self.device == "cuda" else (lambda: None)
        times = []
        for s in slots:
            if not (s.method.is_baseline and s.prepared and not s.error):
                continue
            a, b, c = inputs[s.problem.layout]
            try:
                for _ in range(2):
                    sync()
                    t0 = time.perf_counter()
                    s.prepared.fn(a, b, c)
                    sync()
                times.append(time.perf_counter() - t0)
            except Exception:  # the gate says what is wrong with it
                continue
        if times:
            return max(times)
        return slots[0].problem.floor_us(self.env.get("gpu_name")) * 1e-6

    def _check_context(self, key, what: str) -> None:
        """After a method raised: is the CUDA context still usable? If not, nothing more can
        run in this process (the sandbox restarts its worker and excludes ``key``)."""
        if self.device == "cuda":
            check_cuda_context(key, what)

    def _gate(self, slots: list[_Slot]) -> None:
        for li, layout in enumerate(self.s.layouts):
            ready = [s for s in slots if s.prepared and s.problem.layout == layout]
            if not ready:
                continue
            self.reporter.stage(f"gate {layout}")
            res = run_gate(
                ready[0].problem,
                [GateCandidate(s.key, s.prepared.fn, anchor=s.method.is_baseline) for s in ready],
                self.device,
                seed=self.seed + 1000 * (li + 1),
                on_candidate=lambda k: self.reporter.candidate("gate", k),
            )
            for s in ready:
                s.gate = res[s.key]

    def _anticheat(self, slots: list[_Slot]) -> None:
        """Anti-cheat checks for every non-baseline method that passed the gate, on its own shape;
        only a method that serves any shape is also prepared for the large-K precision probe."""
        if not self.s.anticheat:
            return
        for slot in slots:
            if slot.method.is_baseline or not (slot.prepared and slot.gate and slot.gate.passed):
                continue
            self.reporter.stage(f"anti-cheat {slot.method.name} {slot.problem.layout}")
            self.reporter.candidate("anticheat", slot.key)
            probes: list[Prepared] = []

            def probe_fn(probe: Problem, m=slot.method, key=slot.key):
                if not _support(m, probe, self.device):
                    return None
                (st,) = timing_sets(probe, self.device, 1, self.seed)
                ins = (st.a, st.b, st.c)
                self.reporter.candidate("prepare", key)  # a compile: the prepare stage's timeout
                prep = m.prepare(probe, PrepareContext(self.device, ins, partial(time_candidates, inputs=ins,
                                                                                   device=self.device)))
                self.reporter.candidate("anticheat", key)
                probes.append(prep)
                return prep.fn

            try:
                slot.cheat = run_anticheat(slot.problem, slot.prepared.fn, self.device, slot.prepared.capturable,
                                           make_probe_fn=probe_fn if serves_any_shape(slot.method) else None,
                                           seed=self.seed)
            except Exception as e:
                slot.error = f"anti-cheat checks raised {type(e).__name__}: {e}"
                self._check_context(slot.key, slot.error)
            finally:
                for p in probes:
                    if p.close:
                        p.close()

    def _measure(self, slots: list[_Slot], mode: str, cache: str, inputs: dict) -> tuple[list[dict], list[dict]]:
        ok = [s for s in slots if s.prepared and not s.error and s.gate and s.gate.passed
              and (s.cheat is None or s.cheat.passed)]
        shape = slots[0].problem.shape
        sets_by_layout, flush = {}, 0
        for layout in self.s.layouts:
            a, b, c = inputs[layout]
            sets_by_layout[layout] = [InputSet(a, b, c)]
            if cache == "cold" and self.device == "cuda":
                n = cold_set_count(Problem(shape, layout), self.l2_bytes)
                if n > 1:
                    sets_by_layout[layout] = timing_sets(Problem(shape, layout), self.device, n, self.seed + 1)
                elif n == 0:
                    flush = 2 * self.l2_bytes
        entries = [Entry(s.key, s.prepared.fn, sets_by_layout[s.problem.layout], s.prepared.capturable) for s in ok]
        log = ClockLog()
        self.reporter.stage(f"{mode} {cache}: timing {len(entries)} methods")
        self.reporter.candidate("timing", None)
        if mode == "offline":
            st = OfflineSettings(
                ci_target=self.s.ci_target, min_rounds=self.s.min_rounds, max_rounds=self.s.max_rounds,
                budget_s=self.s.budget_s, flush_bytes=flush, seed=self.seed, target_batch_us=self.s.batch_us,
                prime=self.s.prime, cold_by_cupti=self.s.cold_by_cupti,
            )
            meas = measure_offline(entries, self.device, st, self.clocks, log, on_round=self._heartbeat)
        else:
            meas = measure_server(entries, self.device, self.s.qps, self.s.server_calls, self.seed, self.clocks, log,
                                  on_call=lambda n: self._heartbeat(n) if n % 16 == 0 else None, flush_bytes=flush)
        clock_cols = log.columns() if self.device == "cuda" else {}
        rows, samples = [], []
        for s in slots:
            row = self._base_row(s, mode, cache)
            m = meas.get(s.key)
            if m is not None:
                n_sets = len(sets_by_layout[s.problem.layout])
                row.update(self._timing_columns(m, row, n_sets))
                row.update(clock_cols)
                samples.extend(self._sample_rows(m, row))
            rows.append(row)
        return rows, samples

    def _heartbeat(self, _count: int) -> None:
        """Progress inside a timing group (each offline round, every 16th server call): a sandbox's
        no-progress timeout then bounds one round, not the whole group."""
        self.reporter.candidate("timing", None)

    def _timing_columns(self, m: Measurement, row: dict, n_sets: int) -> dict:
        cols: dict = {"timing_method": m.timing_method, "calls_per_batch": m.calls_per_batch,
                      "rounds": len(m.device_us), "calls_measured": m.calls_measured,
                      "stop_reason": m.stop_reason, "input_sets": n_sets}
        if m.error:
            cols.update(status="error", status_reason=f"timing raised {m.error}")
        if m.device_us:
            d = summarize(m.device_us)
            cols.update({f"device_us_{k}": v for k, v in (
                ("median", d["median"]), ("mean", d["mean"]), ("p10", d["p10"]), ("p90", d["p90"]),
                ("p99", d["p99"]), ("ci_lo", d["ci_lo"]), ("ci_hi", d["ci_hi"]))})
            p = Problem(Shape(row["m"], row["n"], row["k"]), row["layout"])
            cols["tflops"] = p.flops / d["median"] / 1e6 if d["median"] > 0 else None
            if row.get("floor_us") is not None:
                cols["below_floor"] = bool(d["median"] < row["floor_us"])
        if m.host_us:
            h = summarize(m.host_us)
            cols.update(host_us_median=h["median"], host_us_mean=h["mean"], host_us_p90=h["p90"], host_us_p99=h["p99"])
        idle = [v for v in m.idle_us if math.isfinite(v)]
        if idle:
            cols["idle_us_median"] = statistics.median(idle)
        if m.starved or m.timing_note:
            info = json.loads(row.get("info") or "{}")
            if m.starved:
                info["starved_samples"] = m.starved
            if m.timing_note:
                info["timing_note"] = m.timing_note
                if m.timing_method == "events":  # a server row timed with host dispatch in it: said on screen
                    info["warnings"] = list(info.get("warnings") or []) + [
                        "server device_us from CUDA events, host dispatch included (" + m.timing_note + ")"]
                elif m.timing_method == "events+flush":  # the events' own cost is in each cold call's time
                    info["warnings"] = list(info.get("warnings") or []) + [
                        "cold device_us from CUDA events around one call, their own cost included ("
                        + m.timing_note + ")"]
            cols["info"] = config_json(info)
        return cols

    @staticmethod
    def _sample_rows(m: Measurement, row: dict) -> list[dict]:
        base = {k: row[k] for k in ("run_id", "gpu_uuid", "shape", "layout", "method", "mode", "cache")}
        clk = m.round_sm_mhz
        out = [dict(base, round=i, metric="device_us", value=v, sm_clock_mhz=clk[i] if i < len(clk) else None)
               for i, v in enumerate(m.device_us)]
        out += [dict(base, round=i, metric="host_us", value=v, sm_clock_mhz=clk[i] if i < len(clk) else None)
                for i, v in enumerate(m.host_us)]
        out += [dict(base, round=i, metric="idle_us", value=v, sm_clock_mhz=clk[i] if i < len(clk) else None)
                for i, v in enumerate(m.idle_us) if math.isfinite(v)]
        return out

    def _slots(self, shape: Shape) -> list[_Slot]:
        only = self.s.only.get(shape.name)
        return [_Slot(m, Problem(shape, lay), _support(m, Problem(shape, lay), self.device),
                       error=self.s.excluded.get(f"{m.name}|{lay}", ""))
                 for m in self.methods if only is None or m.name in only for lay in self.s.layouts]

    def error_rows(self, shape: Shape, mode: str, cache: str, reason: str) -> list[dict]:
        """Rows of one group that could not be measured: every slot an ``error`` with ``reason``."""
        return self._error_rows(self._slots(shape), mode, cache, reason)

    def _error_rows(self, slots: list[_Slot], mode: str, cache: str, reason: str) -> list[dict]:
        rows = []
        for s in slots:
            row = self._base_row(s, mode, cache)
            row.update(status="error", status_reason=reason)
            rows.append(row)
        return rows

    def evaluate(self, shape: Shape, groups: list[tuple[str, str]], emit: Emit) -> list[dict]:
        """Measure ``shape`` in each (mode, cache) of ``groups``; ``emit`` gets each group as it
        finishes. Returns every row emitted. ContextLost (the CUDA context died) propagates."""
        slots = self._slots(shape)
        all_rows: list[dict] = []
        try:
            inputs = self._prepare(slots)
            self.reporter.expect(self._expected_call_s(slots, inputs))
            self._gate(slots)
            self._anticheat(slots)
            for mode, cache in groups:
                rows, samples = self._measure(slots, mode, cache, inputs)
                emit(rows, samples)
                all_rows.extend(rows)
        except (KeyboardInterrupt, SystemExit, ContextLost):
            raise
        except Exception as e:
            # A harness-level failure on this shape (e.g. out of memory): record it, go on.
            reason = f"{HARNESS_ERROR}: {type(e).__name__}: {e}"
            traceback.print_exc()
            for mode, cache in groups:
                if not any(r["mode"] == mode and r["cache"] == cache for r in all_rows):
                    rows = self._error_rows(slots, mode, cache, reason)
                    emit(rows, [])
                    all_rows.extend(rows)
        finally:
            for s in slots:
                if s.prepared and s.prepared.close:
                    try:
                        s.prepared.close()
                    except Exception:
                        pass
            if self.device == "cuda":
                try:
                    torch.cuda.empty_cache()
                except Exception:  # a dead context: ContextLost is already on its way up
                    pass
        return all_rows
