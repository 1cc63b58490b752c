"""Offline mode: calls back to back, methods interleaved, stop when the medians are known.

Each round visits every entry (a method in one layout) in a fresh random order and takes one
device-time sample (a batch, see ``samplers``) and, in the first ``host_rounds`` rounds, one
host-time sample (one synchronous call).
Clock drift and throttling therefore hit all methods alike, and round ``r`` of one method is
paired with round ``r`` of another for speedup CIs. The loop stops when every entry's median
has a relative CI half-width under ``ci_target`` (after ``min_rounds``), at ``max_rounds``, or
when the time budget for the group ends.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence

from harness.tensors import InputSet
from harness.timing.clocks import ClockLog, ClockSampler
from harness.timing.kernel_clock import TAKE_BUFFER_BYTES, KernelClock, KernelClockUnavailable
from harness.timing.samplers import Sampler, estimate_call_us, host_call_us, make_sampler
from harness.timing.stats import rel_half_width


MIN_BUDGET_ROUNDS = 3  # the budget ends a group only after this many rounds (or min_rounds, if fewer)


@dataclass
class Entry:
    """One thing to time: a prepared call and the input sets it rotates through."""

    key: Hashable
    fn: Callable
    sets: Sequence[InputSet]
    capturable: bool = True


@dataclass
class OfflineSettings:
    ci_target: float = 0.01
    min_rounds: int = 5
    max_rounds: int = 200
    budget_s: float = 5.0
    target_batch_us: float = 1000.0
    flush_bytes: int = 0  # >0: cold cache by L2 flush before each call
    # host_us: one synchronous call per round, in the first ``host_rounds`` rounds (0: none). Its
    # median needs few samples, and on a long call it would double every later round's cost
    host_rounds: int = 10
    seed: int = 0
    # device us of one call, known beforehand (``time_candidates``: candidates of one problem);
    # None: each entry's sampler measures its own call to size its batch
    call_us: float | None = None
    warmed: bool = False  # every entry has already run on inputs of this shape (no warm-up call needed)
    prime: bool = True  # one eager call before each graph sample (samplers' docstring); off only for A/B
    # flush_bytes > 0 on CUDA: time each cold call by its kernels' CUPTI records (samplers' docstring) instead of
    # CUDA events around the one call; where CUPTI cannot trace, events serve and timing_note says why
    cold_by_cupti: bool = True


@dataclass
class Measurement:
    """Everything measured for one entry in one group."""

    device_us: list[float] = field(default_factory=list)
    host_us: list[float] = field(default_factory=list)
    # server mode, CUPTI: GPU idle before each call (nan: none known)
    idle_us: list[float] = field(default_factory=list)
    round_sm_mhz: list[float] = field(default_factory=list)
    timing_method: str = ""
    timing_note: str = ""  # why the timing method is not the mode's usual one
    calls_per_batch: int = 0
    stop_reason: str = ""
    starved: int = 0
    error: str | None = None

    @property
    def calls_measured(self) -> int:
        return len(self.device_us) * self.calls_per_batch + len(self.host_us)


def measure_offline(
    entries: Sequence[Entry],
    device: str,
    settings: OfflineSettings,
    clocks: ClockSampler | None = None,
    clock_log: ClockLog | None = None,
    on_round: Callable[[int], None] | None = None,
) -> dict[Hashable, Measurement]:
    rng = random.Random(settings.seed)
    out: dict[Hashable, Measurement] = {e.key: Measurement() for e in entries}
    samplers: dict[Hashable, Sampler] = {}
    clock, note = _cold_clock(device, settings)
    for e in entries:
        try:
            s = make_sampler(
                e.fn, e.sets, device, e.capturable, settings.target_batch_us, flush_bytes=settings.flush_bytes,
                call_us=settings.call_us, warmed=settings.warmed, prime=settings.prime, clock=clock,
            )
            samplers[e.key] = s
            out[e.key].timing_method = s.kind
            out[e.key].timing_note = note
            out[e.key].calls_per_batch = s.batch
        except Exception as ex:  # a method that fails to run is an error row, not a crash
            out[e.key].error = f"{type(ex).__name__}: {ex}"
    live = [e for e in entries if e.key in samplers]
    if on_round:
        # sampler set-up (each entry's warm-up and estimate calls, graph captures) is progress too: a
        # watcher's no-progress wait then bounds the set-up and each round apart, not their sum
        on_round(0)
    t0 = time.monotonic()
    rounds = 0
    stop = "max_rounds"
    try:
        while live and rounds < settings.max_rounds:
            order = live[:]
            rng.shuffle(order)
            for e in order:
                m = out[e.key]
                try:
                    m.device_us.append(samplers[e.key].sample())
                    if rounds < settings.host_rounds:
                        m.host_us.append(host_call_us(e.fn, e.sets[0], device))
                except Exception as ex:
                    m.error = f"{type(ex).__name__}: {ex}"
            live = [e for e in live if out[e.key].error is None]
            rounds += 1
            clk = clocks.sample() if clocks else None
            if clk is not None and clock_log is not None:
                clock_log.samples.append(clk)
            for e in live:
                out[e.key].round_sm_mhz.append(clk.sm_mhz if clk else float("nan"))
            if on_round:
                on_round(rounds)
            if rounds >= settings.min_rounds and all(
                rel_half_width(out[e.key].device_us) <= settings.ci_target for e in live
            ):
                stop = "ci"
                break
            if time.monotonic() - t0 > settings.budget_s and rounds >= min(MIN_BUDGET_ROUNDS, settings.min_rounds):
                stop = "budget"
                break
    finally:
        for k, s in samplers.items():
            out[k].starved = s.starved
            s.close()
        if clock is not None:
            clock.close()
    for m in out.values():
        m.stop_reason = stop if m.error is None else "error"
    return out


def _cold_clock(device: str, settings: OfflineSettings) -> tuple[KernelClock | None, str]:
    """The CUPTI session that times a flushed group's cold calls, or None and why not (the note its
    rows carry: their cold samples then come from CUDA events around one call)."""
    if not (settings.flush_bytes and device == "cuda" and settings.cold_by_cupti):
        return None, ""
    try:
        return KernelClock.open(buffer_bytes=TAKE_BUFFER_BYTES), ""
    except KernelClockUnavailable as ex:
        return None, f"CUPTI unavailable ({ex}): cold calls timed by CUDA events around one call"


SCREEN_BATCH_US = 100.0  # a screening sample's batch: enough to rank, a third of a final sample's
FINAL_BATCH_US = 300.0  # a finalist's sample: its median decides the autotune


def time_candidates(fns: Sequence[Callable], inputs: tuple, device: str, rounds: int = 7, seed: int = 0,
                    screen_rounds: int = 2, keep_fraction: float = 0.25, warmed: bool = False,
                    screen_batch_us: float = SCREEN_BATCH_US,
                    screened: Sequence[float] | None = None, drop_after: int = 0,
                    drop_margin: float = 0.05) -> list[float]:
    """Median device microseconds of each candidate on one input set, interleaved rounds.

    This is what ``PrepareContext.time_candidates`` lends to methods that autotune, so their
    choices are made by the same timing core as everything else. Successive halving: every
    candidate gets ``screen_rounds`` rounds of ``screen_batch_us`` (``SCREEN_BATCH_US``) samples; the best
    ``keep_fraction`` (at least 3) are then timed together for ``rounds`` rounds of
    ``FINAL_BATCH_US`` samples and their medians come from those. A call longer than a
    screening batch is screened in one round: a one-call sample of it already ranks it, and the
    finalists are timed again. Candidates compute one problem, so one call's time (the first
    candidate that runs) sizes every batch instead of each candidate measuring its own.
    ``warmed``: the caller has just run every candidate on inputs of this shape (a validation
    pass), so a sampler of one-call batches skips its warm-up call. A candidate that raises
    scores infinity.
    ``screened``: each candidate's device microseconds from one call the caller has already made
    and timed (``CallTimes``: cuBLASLt autotune's validation pass), inf for one that raised. It
    replaces the screening rounds: the finalists are the best ``keep_fraction`` by it, and a
    candidate that is not a finalist scores infinity, since one eager call's kernel time (no gap
    between calls) is not comparable with the finals' graph-timed medians.
    ``drop_after``: where a final sample is one call (calls of ``FINAL_BATCH_US`` or more, so each final
    round costs a full call a finalist), a finalist whose median after ``drop_after`` rounds trails the best
    finalist's by more than ``drop_margin`` is not timed further and scores that median; the others run all
    ``rounds``. 0 (the default) times every finalist in every round.
    """
    if screened is not None and len(screened) != len(fns):
        raise ValueError(f"screened has {len(screened)} times for {len(fns)} candidates")
    a, b, c = inputs
    sets = [InputSet(a, b, c)]
    call_us = None
    for fn in fns:
        try:
            call_us = max(estimate_call_us(fn, sets[0], device), 0.5)
            break
        except Exception:
            continue

    def samples(idx: list[int], n_rounds: int, batch_us: float) -> dict[int, list[float] | None]:
        """Each candidate's device-time samples over ``n_rounds`` interleaved rounds, None where it raised."""
        entries = [Entry(i, fns[i], sets) for i in idx]
        settings = OfflineSettings(ci_target=0.0, min_rounds=n_rounds, max_rounds=n_rounds, budget_s=1e9,
                                   seed=seed, target_batch_us=batch_us, host_rounds=0, call_us=call_us,
                                   warmed=warmed)
        res = measure_offline(entries, device, settings)
        return {i: None if res[i].error or not res[i].device_us else res[i].device_us for i in idx}

    def score(xs: list[float] | None) -> float:
        return float("inf") if xs is None else _median(xs)

    def run(idx: list[int], n_rounds: int, batch_us: float) -> dict[int, float]:
        return {i: score(xs) for i, xs in samples(idx, n_rounds, batch_us).items()}

    def finals(idx: list[int]) -> dict[int, float]:
        one_call = call_us is not None and call_us >= FINAL_BATCH_US
        if not (one_call and 0 < drop_after < rounds and len(idx) > 1):
            return run(idx, rounds, FINAL_BATCH_US)
        first = samples(idx, drop_after, FINAL_BATCH_US)
        best = min(score(xs) for xs in first.values())
        ahead = [i for i in idx if score(first[i]) <= best * (1 + drop_margin)]
        rest = samples(ahead, rounds - drop_after, FINAL_BATCH_US)
        both = {i: None if first[i] is None or rest[i] is None else first[i] + rest[i] for i in ahead}
        return {i: score(both[i]) if i in both else score(first[i]) for i in idx}

    everyone = list(range(len(fns)))
    if screened is None and (len(fns) <= 3 or screen_rounds >= rounds):
        out = finals(everyone)
        return [out[i] for i in everyone]
    if screened is None:
        screens = 1 if call_us is not None and call_us >= screen_batch_us else screen_rounds
        screen = out = run(everyone, screens, screen_batch_us)
    else:  # a non-finalist's eager kernel time is not a median of the finals' kind (docstring)
        screen, out = dict(enumerate(map(float, screened))), dict.fromkeys(everyone, float("inf"))
    n_keep = max(3, int(round(len(fns) * keep_fraction)))
    finalists = [i for i in sorted(everyone, key=screen.__getitem__)[:n_keep] if screen[i] != float("inf")]
    out.update(finals(finalists))
    return [out[i] for i in everyone]


def _median(xs: Sequence[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2
