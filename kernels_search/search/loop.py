"""The search loop: propose -> measure with the baselines (paired) -> DB -> reward -> learner.

Per round, for each shape: every proposer suggests up to ``batch_per_shape`` candidates it has
not measured on that shape; CUDA candidates compile in the background on every core
(``build_pool.BuildPool``, cache hits cost nothing), the next shapes' too; one
``Evaluator.evaluate_shape`` call measures the candidates already built *together with* the
baselines (same worker, same interleaved timing rounds) while the others compile on (they are
measured on the shape's next visit); a candidate whose build failed is one failed row with the
compiler's reason, never sent to the GPU. The rows go to the kernel DB as one atomic part, rewards
go to the learner (and each proposer's ``observe``), and the learner is checkpointed; each round
ends with one progress line. The loop stops when the budget is spent or the next call could not
finish within it (builds still running are killed then), ``max_rounds`` are done, no proposer has
anything new, or (``run_limit_s``) this invocation has run for as long as it may: then the shape
being measured is finished, no new one is started, and a rerun resumes.

Resume: the budget is the total for ``search_id`` (what earlier runs spent is read back from the
DB), the round restarts where the DB says it stopped (shapes already measured in that round are
skipped), the learner loads its checkpoint and replays DB rows it has not seen, and what was
measured is never proposed again for that shape. A kill loses at most the one call in flight.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from harness.problem import Shape
from harness.results import RESULT_COLUMNS
from harness.runner import CompareSettings
from harness.timing.stats import geomean
from kernels_search.search.db import KernelDB, finite_float, ptxas_of
from kernels_search.proposals import Candidate, Outcome, Proposer, SearchContext, observe
from kernels_search.search.build_pool import BuildPool
from kernels_search.search.reward import FAIL, failure_kind, reward, strongest_baseline
from kernels_search.search.settings import SearchSettings

CUDA_BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")
CPU_BASELINES = ("torch",)


def default_baselines(device: str) -> tuple[str, ...]:
    return CUDA_BASELINES if device == "cuda" else CPU_BASELINES


def search_settings(layouts: Sequence[str] = SearchSettings.layouts, *,
                    timing_budget_s: float = SearchSettings.timing_budget_s,
                    ci_target: float = SearchSettings.ci_target,
                    min_rounds: int = 5, max_rounds: int = 100, seed: int | None = None,
                    anticheat: bool = True) -> CompareSettings:
    """CompareSettings for search calls: offline warm timing, a shorter budget than ``compare``."""
    return CompareSettings(shapes=[], layouts=list(layouts), ci_target=ci_target, min_rounds=min_rounds,
                           max_rounds=max_rounds, budget_s=timing_budget_s, seed=seed, anticheat=anticheat)


@dataclass
class SearchProgress:
    """What a progress callback receives after every measured shape."""

    round: int
    shape: str
    shapes_total: int
    shapes_measured: int  # shapes with at least one correct candidate (whole search_id)
    shapes_beating_baseline: int  # ... whose best candidate beats the strongest baseline
    best_speedup: float | None  # max over shapes of best candidate / strongest baseline
    geomean_best_speedup: float | None  # geomean over measured shapes
    candidates: int  # candidate evaluations by this invocation
    candidates_total: int  # ... by the whole search_id (KernelDB.search_totals)
    elapsed_s: float  # budget spent, whole search_id
    budget_s: float
    candidates_per_s: float  # this invocation
    compile_s: float  # this invocation: parallel prebuild + candidates' setup (build/load) in the worker
    measure_s: float  # this invocation: gate, anti-cheat and timing (evaluate_shape wall minus setup)
    compile_wait_s: float = 0.0  # this invocation: time the loop waited on background builds
    last: list[Outcome] = field(default_factory=list)


@dataclass
class SearchSummary:
    search_id: str
    rounds: int
    candidates: int
    elapsed_s: float
    stop_reason: str  # budget | rounds | exhausted (the search is over) | run-limit (a rerun resumes)
    per_shape: list[dict]  # shape, layout, best spec, device_us, baseline_us, speedup


def _seed(*parts: Any) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _names(spec: str) -> list[str]:
    """Method names a spec resolves to (the rows' ``method``); the spec itself if it cannot."""
    from harness.registry import resolve

    try:
        return [m.name for m in resolve([spec])] or [spec]
    except Exception:
        return [spec]


def auto_prebuild(specs: Sequence[str]) -> float:
    """Compile every CUDA family candidate in parallel (build pool); returns the seconds spent."""
    from harness.registry import resolve

    from kernels_search.cuda_method import CudaKernelMethod, prebuild

    t0 = time.perf_counter()
    methods = []
    for spec in specs:
        try:
            methods += [m for m in resolve([spec]) if isinstance(m, CudaKernelMethod)]
        except Exception:
            continue
    if methods:
        prebuild(methods)
    return time.perf_counter() - t0


def build_or_raise(specs: Sequence[str]) -> None:
    """Compile the CUDA family candidates among ``specs`` (the build pool's job); raises
    ``BuildError`` (its log's tail) for one that did not compile."""
    from harness.registry import resolve

    from kernels_search.cuda_method import BuildError, CudaKernelMethod, prebuild

    methods = [m for spec in specs for m in resolve([spec]) if isinstance(m, CudaKernelMethod)]
    for res in prebuild(methods, workers=1) if methods else []:
        if not res.ok:
            raise BuildError(res)


def _db_row(r: dict, cand: Candidate | None, base_us: float | None, base_who: str | None, meta: dict) -> dict:
    """The kernel DB row of one compare row (``db.FIELDS``): the compare row as measured, a failed
    row's time nulled, plus the search's columns."""
    info = json.loads(r.get("info") or "{}")
    ptx = ptxas_of(info)
    fk = failure_kind(r)
    us = finite_float(r.get("device_us_median"))
    rew = reward(r, base_us) if cand is not None else None
    return dict(
        {f: r.get(f) for f in RESULT_COLUMNS}, **meta,
        is_baseline=cand is None, family=cand.family if cand is not None else r.get("family"),
        origin=cand.origin if cand is not None else "baseline",
        config=cand.knobs_json() if cand is not None else (r.get("config") or "{}"),
        source_hash=r.get("source_hash") or "", status_reason=r.get("status_reason") or "",
        failure=fk, device_us_median=us if not fk else None,
        device_us_ci_lo=finite_float(r.get("device_us_ci_lo")), device_us_ci_hi=finite_float(r.get("device_us_ci_hi")),
        setup_s=finite_float(r.get("setup_s")), compile_s=finite_float(info.get("compile_s")),
        build_cached=info.get("build_cached"), registers=finite_float(ptx.get("max_registers", ptx.get("registers"))),
        spill_bytes=finite_float(ptx.get("spill_bytes")), ptxas=json.dumps(ptx, default=str) if ptx else "",
        baseline_us=base_us, baseline_method=base_who,
        speedup=(base_us / us) if (base_us and us and not fk) else None, reward=rew,
        info=r.get("info") or "{}",
    )


def _summary_rows(db: KernelDB, gpu: str | None, shapes: Sequence[Shape]) -> list[dict]:
    names = {s.name for s in shapes}
    best = db.best(gpu)
    out = []
    for r in best.itertuples(index=False):
        if r.shape in names:
            out.append(dict(shape=r.shape, layout=r.layout, spec=r.method, family=r.family,
                            device_us=r.device_us_median,
                            baseline_us=r.baseline_us, speedup=r.speedup))
    return sorted(out, key=lambda d: (d["shape"], d["layout"]))


def _failed_methods(rows: Sequence[Mapping]) -> set[str]:
    """Candidates of one call with a failure other than declining a layout (compile, wrong, crash, timeout, error)."""
    return {r["method"] for r in rows if not r["is_baseline"] and r.get("failure") not in ("", None, "unsupported")}


def _shape_stats(db: KernelDB, gpu: str | None, shapes: Sequence[Shape]) -> tuple[int, int, float | None, float | None]:
    """(measured, beating, max speedup, geomean speedup) of each shape's best candidate."""
    names = {s.name for s in shapes}
    best = db.best(gpu)
    if best.empty:
        return 0, 0, None, None
    best = best[best["shape"].isin(names) & best["speedup"].notna()]
    per_shape = best.groupby("shape")["speedup"].max()
    if per_shape.empty:
        return 0, 0, None, None
    gm = geomean(per_shape)
    return len(per_shape), int((per_shape > 1.0).sum()), float(per_shape.max()), gm


def measure_candidates(shape: Shape, cands: Sequence[Candidate], evaluator, db: KernelDB, settings: CompareSettings,
                       baselines: Sequence[str], meta: dict, prebuild=None, run_id: str = "search",
                       log: Callable[[str], None] = lambda s: None, t0: float | None = None,
                       prebuilt_s: float = 0.0, failed: Sequence[tuple[Candidate, str]] = ()):
    """One paired call: prebuild, ``evaluate_shape(baselines + candidates)``, rows -> one DB part.

    ``failed``: (candidate, reason) pairs whose build failed before the call: each is one row of the
    part (the first layout, ``failure="compile"``, reward -1, the reason), never measured; with no
    candidate left to measure, the part holds only those rows and nothing is measured.
    ``prebuilt_s``: seconds a build done elsewhere (in the background) spent on these candidates;
    recorded with this call's own prebuild time in the rows' ``prebuild_s``.
    Returns (prebuild seconds, evaluate_shape seconds, the DB rows written, strongest baseline us).
    Candidates the evaluator produced no row for (it gave up on the shape) are recorded as
    ``failure="harness"`` with no reward: the harness failed, not necessarily the kernel.
    """
    from harness.sandbox import EvaluatorError

    t0 = time.perf_counter() if t0 is None else t0
    env = getattr(evaluator, "env", {}) or {}
    groups = [(m, c) for m in settings.modes for c in settings.caches]
    specs = list(baselines) + [c.spec for c in cands]
    pre_s = 0.0
    if prebuild is not None:
        try:
            pre_s = float(prebuild([c.spec for c in cands]) or 0.0)
        except Exception:
            log(f"{shape.name}: prebuild failed:\n{traceback.format_exc()}")
    t_eval = time.perf_counter()
    rows, harness_error = [], ""
    if cands:
        try:
            result = evaluator.evaluate_shape(shape, specs, settings, groups, run_id)
            rows = result[0][0] if result else []
        except EvaluatorError as e:
            harness_error = str(e)
    eval_s = time.perf_counter() - t_eval
    by_name: dict[str, Candidate] = {}
    for c in cands:
        for nm in _names(c.spec):
            by_name.setdefault(nm, c)
    base_us, base_who = strongest_baseline(rows)
    call = dict(meta, call_id=uuid.uuid4().hex, eval_s=eval_s, prebuild_s=pre_s + prebuilt_s)
    db_rows = []
    for r in rows:
        cand = None if r.get("is_baseline") else by_name.get(r["method"])
        if not r.get("is_baseline") and cand is None:
            continue  # a method nobody proposed (never expected)
        db_rows.append(_db_row(r, cand, base_us, base_who, call))
    seen_specs = {r["method"] for r in db_rows}
    for c in cands:
        if not any(nm in seen_specs for nm in _names(c.spec)):
            for lay in settings.layouts:
                db_rows.append(dict(call, gpu_uuid=env.get("gpu_uuid"), gpu_name=env.get("gpu_name"),
                                    device=getattr(evaluator, "device", None), shape=shape.name, m=shape.m, n=shape.n,
                                    k=shape.k, layout=lay, is_baseline=False, method=c.spec, family=c.family,
                                    origin=c.origin, config=c.knobs_json(), status="error",
                                    status_reason=harness_error or "no result row", failure="harness",
                                    reward=None, info="{}"))
    for c, why in failed:
        db_rows.append(dict(call, gpu_uuid=env.get("gpu_uuid"), gpu_name=env.get("gpu_name"),
                            device=getattr(evaluator, "device", None), shape=shape.name, m=shape.m, n=shape.n,
                            k=shape.k, layout=settings.layouts[0], is_baseline=False, method=c.spec, family=c.family,
                            origin=c.origin, config=c.knobs_json(), status="error",
                            status_reason=f"build failed: {why}"[-2000:], failure="compile", reward=FAIL, info="{}"))
    elapsed = time.perf_counter() - t0
    for r in db_rows:
        r["elapsed_s"] = elapsed
    db.append(db_rows)
    return pre_s, eval_s, db_rows, base_us


def measured_specs(db: KernelDB, shape: Shape, gpu: str | None, families: Mapping[str, Any]) -> set[str]:
    """Specs measured on ``shape`` as recorded, plus each one's current canonical name: a row
    recorded before its family gained a knob (e.g. splitk's ``kslices``) names the same config
    as the spec the learner now writes with that knob at its default, and is not measured again."""
    out = db.measured_specs(shape, gpu)
    sel = db.candidates(gpu, shape)
    for fam_name, knobs in zip(sel["family"], sel["config"]):
        fam = families.get(fam_name)
        if fam is not None:
            out.add(fam.spec(fam.complete(json.loads(knobs or "{}"))))
    return out


def first_pick_eval(shapes: Sequence[Shape], evaluator, db: KernelDB, picker, *,
                    settings: CompareSettings | None = None,
                    baselines: Sequence[str] | None = None, reference: str = "cublaslt-autotune",
                    search_id: str = "first-pick", prebuild="auto", run_id: str | None = None,
                    progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Generalization check: one evaluation per shape of ``picker``'s pick (a ``first_pick.FirstPick``),
    paired with the baselines. Per shape: the pick, its best-of-layouts time,
    ``reference``'s best-of-layouts time (the strongest baseline where ``reference`` has no
    correct row) and the speedup. Rows are recorded in the DB under ``search_id``; the learner
    is not updated here. Every pick is made before any is measured (no held-out shape's result
    informs another's pick) and, with a prebuild, all picks compile in one parallel batch first
    (one build's time, not one per shape)."""
    device = getattr(evaluator, "device", "cuda")
    gpu = (getattr(evaluator, "env", {}) or {}).get("gpu_name")
    settings = settings or search_settings()
    baselines = list(baselines if baselines is not None else default_baselines(device))
    if prebuild == "auto":
        prebuild = auto_prebuild if device == "cuda" else None
    # a rerun of a finished search reports the held-out shapes already measured under this id
    # (their rows are in the DB) instead of measuring them again
    earlier = db.df[(db.df["search_id"] == search_id)] if not db.df.empty else db.df
    out_by_shape: dict[str, dict] = {}
    for shape in shapes:
        rows = earlier[earlier["shape"] == shape.name] if not earlier.empty else earlier
        cand_rows = rows[~rows["is_baseline"].astype(bool)] if not rows.empty else rows
        if cand_rows.empty:
            continue
        last = rows[rows["call_id"] == cand_rows["call_id"].iloc[-1]].to_dict("records")
        # every row of a call stores that call's strongest baseline (measure_candidates' base_us)
        out_by_shape[shape.name] = _first_pick_record(shape, cand_rows["method"].iloc[-1], last,
                                                      finite_float(cand_rows["baseline_us"].iloc[-1]), reference)
    todo = [s for s in shapes if s.name not in out_by_shape]
    picks = []
    for shape in todo:
        cand = picker.pick(shape, db, gpu)
        cand.origin = "policy:first-pick"
        picks.append(cand)
    pre_s = 0.0
    if prebuild is not None and picks:
        try:
            pre_s = float(prebuild([c.spec for c in picks]) or 0.0)
        except Exception:
            traceback.print_exc()  # each call's prepare builds (and reports) what is missing
    run_id = run_id or f"{search_id}-{uuid.uuid4().hex[:8]}"
    for i, (shape, cand) in enumerate(zip(todo, picks)):
        _, _, rows, base_us = measure_candidates(shape, [cand], evaluator, db, settings, baselines,
                                                 dict(search_id=search_id, round=0), None, run_id,
                                                 prebuilt_s=pre_s if i == 0 else 0.0)
        out_by_shape[shape.name] = _first_pick_record(shape, cand.spec, rows, base_us, reference)
    out = [out_by_shape[s.name] for s in shapes]
    if progress is not None:
        for rec in out:
            progress(rec)
    return out


def _first_pick_record(shape: Shape, spec: str, rows: Sequence[Mapping], base_us: float | None,
                       reference: str) -> dict:
    """One held-out shape's result from its call's rows: the pick's best-of-layouts time against
    ``reference``'s (the strongest baseline of the call where ``reference`` has no correct row)."""
    mine = [r["device_us_median"] for r in rows if not r["is_baseline"] and finite_float(r.get("device_us_median"))
            and not r.get("failure")]
    ref = [r["device_us_median"] for r in rows if r["is_baseline"] and r["method"] == reference
           and finite_float(r.get("device_us_median")) and not r.get("failure")]
    ref_us = min(ref) if ref else base_us
    cand_us = min(mine) if mine else None
    return dict(shape=shape.name, spec=spec, device_us=cand_us, reference=reference if ref else "strongest",
                reference_us=ref_us, speedup=(ref_us / cand_us) if (ref_us and cand_us) else 0.0,
                failure=next((r["failure"] for r in rows if not r["is_baseline"] and r.get("failure")), ""))


def run_search(shapes: Sequence[Shape], budget_s: float, evaluator, db: KernelDB, learner,
               proposers: Sequence[Proposer] | None = None, batch_per_shape: int = 4,
               progress: Callable[[SearchProgress], None] | None = None, *,
               settings: CompareSettings | None = None, baselines: Sequence[str] | None = None,
               search_id: str = "search", checkpoint: str | Path | None = None,
               max_rounds: int | None = None, prebuild: Callable[[Sequence[str]], float] | str | None = "auto",
               run_id: str | None = None, log: Callable[[str], None] | None = None,
               lookahead: int = 0, run_limit_s: float | None = None, run_t0: float | None = None,
               prior: Sequence[Path] = (), prior_exclude: Sequence[str] = ()) -> SearchSummary:
    """Search kernels for ``shapes`` until ``budget_s`` seconds (total for ``search_id``) are spent.

    ``evaluator``: a harness.sandbox.Evaluator (its ``env`` names the GPU). ``learner``: the
    ``learner.Learner``; it learns from every outcome and is checkpointed to ``checkpoint`` after
    every shape. ``proposers``: who proposes (default ``[learner]``; add an LLM proposer for
    code-level search). ``settings``: timing settings (default ``search_settings()``).
    ``baselines``: method specs measured with the candidates in every call (default: every
    cuBLAS-family method on CUDA, torch on CPU). ``prebuild``: how one candidate is compiled
    (``prebuild([spec])``, raising when it does not compile): "auto" is ``build_or_raise`` on CUDA
    devices, None compiles nothing ahead (the worker builds in the call). The builds run on a
    ``BuildPool`` of every core; a call measures the shape's candidates already built and leaves the
    rest to the shape's next visit. ``lookahead``: also propose the next ``lookahead`` shapes of the
    round early, so their candidates compile while the GPU measures the current shape (their
    proposals miss the results of at most ``lookahead`` shapes); 0 = one shape at a time.
    ``budget_s`` is wall time: no call starts that is expected (the longest of the last three calls)
    to end past it, no build is waited for past it, and builds still running at the stop are killed.
    ``run_limit_s``: stop this invocation (stop reason ``run-limit``) once ``run_limit_s``
    seconds have passed since ``run_t0`` (a ``time.perf_counter()`` value; default: when this
    call started), whatever budget is left: the shape being measured is finished, no new shape
    is started, and background builds are only started for shapes this run can still expect to
    reach (by its mean time per shape so far). Everything is in the DB and the checkpoint; the
    same call again resumes.
    ``prior``: compare Parquets of earlier measurements folded into the learner after its checkpoint
    and DB (``search.prior.fold_prior``; rows of the ``prior_exclude`` shapes left out, e.g. the
    held-out ones); a checkpoint that has them already takes none twice.
    """
    log = log or (lambda s: None)
    env = getattr(evaluator, "env", {}) or {}
    device = getattr(evaluator, "device", env.get("device", "cuda"))
    gpu = env.get("gpu_name")  # rows of every machine of this GPU model count (paired per call)
    settings = settings or search_settings()
    baselines = list(baselines if baselines is not None else default_baselines(device))
    proposers = list(proposers) if proposers else [learner]
    run_id = run_id or f"{search_id}-{uuid.uuid4().hex[:8]}"
    if prebuild == "auto":
        prebuild = build_or_raise if device == "cuda" else None

    if checkpoint is not None and learner is not None:
        if learner.load(checkpoint):
            log(f"learner checkpoint {checkpoint} loaded ({learner.model.n} observations)")
    if learner is not None:
        replayed = learner.sync(db)
        if replayed:
            log(f"learner: replayed {replayed} DB row(s) the checkpoint had not seen")
    if learner is not None and prior:
        from kernels_search.search.prior import fold_prior

        log(fold_prior(learner, list(prior), exclude_shapes=prior_exclude, gpu=gpu).line())

    spent = db.budget_used(search_id)
    rnd = max(db.last_round(search_id), 0)
    ours = db.df[db.df["search_id"] == search_id] if not db.df.empty else db.df
    done_in_round = set(ours[ours["round"] == rnd]["shape"]) if not ours.empty else set()
    if done_in_round >= {s.name for s in shapes}:
        rnd, done_in_round = rnd + 1, set()
    total_before = db.search_totals(search_id)["candidates"]
    exhausted: set[str] = set()
    n_cand, compile_s, measure_s, rounds_run = 0, 0.0, 0.0, 0
    t_start = time.perf_counter()
    t_run = t_start if run_t0 is None else run_t0
    shape_walls: list[float] = []  # wall time per measured shape, this run
    stop = "budget"

    def run_left() -> float:
        """Seconds this invocation may still run (inf without a run limit)."""
        return math.inf if run_limit_s is None else run_limit_s - (time.perf_counter() - t_run)

    def reachable(ahead: int) -> bool:
        """Can this run expect to measure the shape ``ahead`` places after the current one (within
        the run limit and the budget)?"""
        if not shape_walls:
            return True
        return ahead * (sum(shape_walls) / len(shape_walls)) < min(run_left(), budget_s - spent)

    def plan(shape: Shape, waiting: Sequence[Candidate] = ()):
        """Ask every proposer for candidates for ``shape`` (none of those ``waiting`` for their
        build): (candidates, spec -> proposer)."""
        exclude = measured_specs(db, shape, gpu, learner.families if learner is not None else {})
        exclude |= {c.spec for c in waiting}
        cands: list[Candidate] = []
        owner: dict[str, Proposer] = {}
        for p in proposers:
            ctx = SearchContext(shape, batch_per_shape, exclude | {c.spec for c in cands}, db, gpu,
                                tuple(settings.layouts), rnd, _seed(search_id, rnd, shape.name, p.name))
            try:
                got = p.propose(shape, ctx) or []
            except Exception:
                log(f"{shape.name}: proposer {getattr(p, 'name', p)} failed:\n{traceback.format_exc()}")
                continue
            for c in got:
                if c.spec not in exclude and c.spec not in owner:
                    owner[c.spec] = p
                    cands.append(c)
        return cands, owner

    mark = t_run  # budget clock (from the command's start): up to here, charged to the next call's rows
    pool = BuildPool(prebuild) if prebuild is not None else None
    ahead_n = lookahead if pool is not None else 0
    compile_wait_s = 0.0
    call_s: list[float] = []  # seconds per call, this run: what it was charged less its wait for builds
    planned: dict[str, tuple] = {}
    deferred: dict[str, tuple[list[Candidate], dict]] = {}  # shape -> candidates still compiling, their owners
    rnd_cands = rnd_failed = rnd_declined = 0

    def budget_left() -> float:
        """Budget seconds left now (the time since the last call's rows is charged to the next)."""
        return budget_s - spent - (time.perf_counter() - mark)

    def next_call_s() -> float:
        """What the next call is expected to cost: the median of the last three (the per-call timing
        budget before the first)."""
        return statistics.median(call_s[-3:]) if call_s else settings.budget_s

    def round_line(final: str = "") -> str:
        measured, _, best, _ = _shape_stats(db, gpu, shapes)
        bs = f"{best:.3f}x" if best else "-"
        declined = f" ({rnd_declined} declined a layout)" if rnd_declined else ""
        return (f"round {rnd}{' ' + final if final else ''}: {rnd_cands} candidates measured, {rnd_failed} failed"
                f"{declined}; "
                f"shapes measured {measured}/{len(shapes)}; best {bs}; {max(0.0, budget_left()):.0f}s of the "
                f"{budget_s:.0f}s budget left"
                + (f"; {pool.pending()} builds running" if pool and pool.pending() else ""))

    try:
        while True:
            if spent >= budget_s or budget_left() <= 0:
                stop = "budget"
                break
            if max_rounds is not None and rnd >= max_rounds:
                stop = "rounds"
                break
            if len(exhausted) == len(shapes):
                stop = "exhausted"
                break
            if run_left() <= 0:
                stop = "run-limit"
                break
            order = [s for s in shapes if s.name not in done_in_round and s.name not in exhausted]
            planned = {}
            cut = over = False
            for i, shape in enumerate(order):
                if budget_left() <= 0:
                    break
                if run_left() <= 0:
                    cut = True  # the shape measured last was finished; no new one is started
                    break
                if budget_left() < next_call_s():
                    over = True  # the next call would end past the budget: none is started
                    break
                # propose this shape and the next ``lookahead`` ones; their builds start in the background
                for j, nxt in enumerate(order[i:i + 1 + ahead_n]):
                    if j and not reachable(j):
                        break  # planned when (if) this run gets near it
                    if nxt.name not in planned:
                        cands_n, owner_n = plan(nxt, deferred.get(nxt.name, ([], {}))[0])
                        if pool is not None:
                            pool.submit(c.spec for c in cands_n)
                        planned[nxt.name] = (cands_n, owner_n)
                cands, owner = planned.pop(shape.name)
                old, old_owner = deferred.pop(shape.name, ([], {}))
                cands, owner = old + cands, {**old_owner, **owner}
                if not cands:
                    exhausted.add(shape.name)
                    continue
                t0 = time.perf_counter()
                if pool is not None:
                    # measure what is built; wait for a first build only as long as the budget allows
                    pool.wait_any([c.spec for c in cands], budget_left() - next_call_s())
                    ready = [c for c in cands if pool.ready(c.spec)]
                    if not ready:
                        over = True
                        deferred[shape.name] = (cands, owner)
                        break
                    later = [c for c in cands if not pool.ready(c.spec)]
                    if later:
                        deferred[shape.name] = (later, {c.spec: owner[c.spec] for c in later})
                    failed = [(c, pool.failure(c.spec)) for c in ready if pool.failure(c.spec)]
                    cands = [c for c in ready if not pool.failure(c.spec)]
                    build_s = sum(pool.seconds(c.spec) for c in ready)
                else:
                    failed, build_s = [], 0.0
                wait_s = time.perf_counter() - t0
                compile_wait_s += wait_s
                # the budget is wall time: this call's rows are charged everything since the previous
                # call's rows were written (proposing, the learner update and checkpoint, progress)
                pre_s, eval_s, db_rows, base_us = measure_candidates(
                    shape, cands, evaluator, db, settings, baselines,
                    dict(search_id=search_id, round=rnd, wait_s=wait_s), None, run_id, log, t0=mark,
                    prebuilt_s=build_s, failed=failed)
                mark = time.perf_counter()
                if cands and db_rows:
                    call_s.append(max(0.0, db_rows[0]["elapsed_s"] - wait_s))
                pre_s += build_s
                cands = cands + [c for c, _ in failed]
                by_name = {nm: c for c in cands for nm in _names(c.spec)}
                setup = sum((r.get("setup_s") or 0.0) for r in db_rows)
                cand_setup = sum((r.get("setup_s") or 0.0) for r in db_rows if not r["is_baseline"])
                spent += db_rows[0]["elapsed_s"] if db_rows else time.perf_counter() - t0
                shape_walls.append(time.perf_counter() - t0)
                n_cand += len(cands)
                rnd_cands += len(cands)
                # a config that declines a layout (one ``unsupported`` row, e.g. a tn-only kernel asked for nn) has
                # not failed: counted apart, so "failed" means compile errors, wrong results, crashes and timeouts
                failed_now = _failed_methods(db_rows)
                rnd_failed += len(failed_now)
                rnd_declined += len({r["method"] for r in db_rows if not r["is_baseline"]
                                     and r.get("failure") == "unsupported"} - failed_now)
                compile_s += pre_s + cand_setup
                measure_s += max(0.0, eval_s - setup)
                outcomes = [Outcome(by_name.get(r["method"]) or Candidate(r["family"] or "", json.loads(r["config"]),
                                                                          r["method"]),
                                    r["layout"], r["status"], r["reward"], r.get("device_us_median"), base_us,
                                    r.get("status_reason") or "", r.get("failure") or "", r["row_id"])
                            for r in db_rows if not r["is_baseline"]]
                if learner is not None:
                    learner.observe(shape, outcomes)
                    if checkpoint is not None:
                        learner.save(checkpoint)
                for p in proposers:
                    if p is not learner:
                        try:
                            observe(p, shape, [o for o in outcomes if owner.get(o.candidate.spec) is p])
                        except Exception:
                            log(f"{shape.name}: proposer {getattr(p, 'name', p)}.observe failed:\n"
                                f"{traceback.format_exc()}")
                if progress is not None:
                    measured, beating, best, gm = _shape_stats(db, gpu, shapes)
                    wall = time.perf_counter() - t_start
                    progress(SearchProgress(
                        round=rnd, shape=shape.name, shapes_total=len(shapes), shapes_measured=measured,
                        shapes_beating_baseline=beating, best_speedup=best, geomean_best_speedup=gm,
                        candidates=n_cand, candidates_total=total_before + n_cand, elapsed_s=spent,
                        budget_s=budget_s, candidates_per_s=n_cand / wall if wall > 0 else 0.0,
                        compile_s=compile_s, measure_s=measure_s, compile_wait_s=compile_wait_s, last=outcomes))
            if over:
                stop = "budget"
                log(round_line("stopped: the next call would end past the budget"))
                rounds_run += 1
                break
            log(round_line() if not cut else round_line("cut by the run limit"))
            rounds_run += 1
            rnd_cands = rnd_failed = rnd_declined = 0
            if cut:  # mid-round: the next run finishes this round (the DB says which shapes are left)
                stop = "run-limit"
                break
            rnd += 1
            done_in_round = set()
    finally:
        killed = pool.close() if pool is not None else 0
    if killed:
        log(f"{killed} build(s) still running at the stop were killed (rebuilt when needed)")
    if stop == "run-limit":
        log(f"run limit: stopped after {time.perf_counter() - t_run:.0f}s in round {rnd}")
    return SearchSummary(search_id=search_id, rounds=rounds_run, candidates=n_cand, elapsed_s=spent,
                         stop_reason=stop, per_shape=_summary_rows(db, gpu, shapes))
