"""Per-shape tuning (``hgemm-bench tune``): rank the pool for a shape, measure the top, keep the winners.

For each shape: the pool's configs (``search.pool``) that support it are ranked by the search's first
pick (``first_pick.FirstPick``, the learner of a search folder, by default the packaged record, with
this GPU model's packaged evidence, the tuned shapes' own rows included): first the configs measured
faster than the strongest baseline on this very shape, by that speedup; then the configs the first
pick's evidence rule admits; then the rest of the pool with evidence on at least one other shape;
then the configs no evidence holds yet (a family new to the pool, or measured on another GPU model
only), so that a shape whose ranked list ends before its budget measures them too; each of those
groups by the rule's score (which never learns from the shape's own rows). A family none of whose
configs the evidence holds has its best-scored config moved up to follow the first
``NEW_FAMILY_SLOT`` ranked ones, so every shape's budget measures it at least once. The kernel
the library serves on the exact shape today (the incumbent) goes first, so a new winner must beat it
in the same paired call. The ranked configs (the top ``TuneSettings.top`` where set) are then measured, in
that order until the shape's budget ends, by the search's own loop
(``loop.run_search``: ``batch`` candidates per call, paired with the baselines, builds on every core,
the per-shape budget kept). Then a confirming call: the best ``TuneSettings.confirm`` configs per layout
that beat their baseline by ``min_speedup`` in their one call are measured again, together, paired with
the baselines afresh (the last ``CONFIRM_SHARE`` of the shape's budget is kept for it). Why: an entry is
the best of 50-80 single calls, so its recorded win is partly the luck of that call; on an H100, two of
21 such entries lost to their baseline when compared again. The shape's library entries
(``library.library_entries`` with ``min_pairs=2``: the config whose worse pair is best, where that beat
the baseline by ``min_speedup``, else the labelled fallback) are merged into the user's library
(``user_library.merge``) after every shape. The kernel DB stays in
the output folder; rerunning the same command resumes (each shape's budget is a total).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from harness.problem import Shape
from kernels_search.proposals import Candidate
from kernels_search.search.settings import TuneSettings

ORIGIN = "tune:first-pick"
CONFIRM_ORIGIN = "tune:confirm"
CONFIRM_SHARE = 0.1  # of a shape's budget kept for the confirming call
NEW_FAMILY_SLOT = 8  # ranked configs measured before the first config of each family no evidence holds


@dataclass
class TuneCandidate:
    """One ranked config for a shape: its place, the rule's score, why it is there."""

    rank: int
    candidate: Candidate
    score: float
    evidence: dict
    admitted: bool  # the first pick's evidence rule admits it (else: pool, evidence elsewhere)
    incumbent: bool = False  # the library's kernel for this exact shape today
    here: float | None = None  # its speedup over the strongest baseline measured on this very shape, if any
    new_family: bool = False  # the first config of a family no evidence holds, moved up (NEW_FAMILY_SLOT)

    @property
    def spec(self) -> str:
        return self.candidate.spec

    def why(self) -> str:
        e = self.evidence
        seen = (f"measured on {e['shapes']} other shapes ({e['near']} near); nearest {e['nearest']} "
                f"(distance {e['distance']:.2f}): {e['speedup']:.3f}x of the strongest baseline there"
                if e.get("shapes") else "measured on no other shape")
        head = ("the library's kernel for this shape; " if self.incumbent else "") + (
            f"measured on this shape: {self.here:.3f}x of the strongest baseline" if self.here is not None else
            "first-pick candidate" if self.admitted else
            "pool, below the first pick's evidence rule" if e.get("shapes") else
            "pool, no evidence yet; a family new to the evidence, measured early" if self.new_family else
            "pool, no evidence yet")
        return f"{head}; {seen}"


def rank_pool(picker, shape: Shape, pool_specs: Sequence[str], top: int | None,
              incumbent: str | None = None) -> list[TuneCandidate]:
    """The ``top`` configs of ``pool_specs`` (all where None) to measure on ``shape``, best first (module docstring)."""
    from kernels_search.search.first_pick import FirstPick, best_first

    lr = picker.learner
    admitted = picker.candidates(shape, list(pool_specs))
    taken = {c.spec for c in admitted}
    loose_settings = replace(picker.settings, min_shapes=1, min_near=0)
    loose = [c for c in FirstPick(lr, loose_settings).candidates(shape, list(pool_specs)) if c.spec not in taken]
    ordered: list[tuple[Candidate, float, bool]] = []
    seen = taken | {c.spec for c in loose}
    unmeasured = [c for spec in pool_specs if spec not in seen and (c := lr.candidate_for(spec)) is not None
                  and lr.supported(c.family, c.knobs, shape)]
    for group, ok in ((admitted, True), (loose, False), (unmeasured, False)):
        if group:
            vals = picker.values(shape, group)
            ordered += [(group[i], float(vals[i]), ok) for i in best_first(vals)]
    # a family no evidence holds at all has no score worth ranking by: its best-scored config goes to slot
    # NEW_FAMILY_SLOT, so that a shape's budget measures it (a ranked list of 60-100 configs outlasts a short
    # budget, so a family placed last would go unmeasured however fast it is)
    known = {spec.partition(":")[0] for spec in lr.measured_on}  # a spec is "family:knobs"
    firsts: dict[str, tuple] = {}
    for o in ordered:
        if o[0].family not in known and o[0].family not in firsts:
            firsts[o[0].family] = o
    moved = {o[0].spec for o in firsts.values()}
    if moved:
        rest = [o for o in ordered if o[0].spec not in moved]
        ordered = rest[:NEW_FAMILY_SLOT] + list(firsts.values()) + rest[NEW_FAMILY_SLOT:]

    def lift(specs: Sequence[str]) -> None:  # move ``specs`` to the front, in that order
        nonlocal ordered
        front = []
        for spec in specs:
            got = [o for o in ordered if o[0].spec == spec]
            if not got:
                cand = lr.candidate_for(spec)
                if cand is not None and lr.supported(cand.family, cand.knobs, shape):
                    got = [(cand, float(picker.values(shape, [cand])[0]), spec in taken)]
            front += got
        lifted = set(specs)
        ordered = front + [o for o in ordered if o[0].spec not in lifted]

    here = {spec: math.exp(r) for spec in pool_specs
            if (r := lr.measured_on.get(spec, {}).get(shape.name)) is not None and r > 0}
    lift(sorted(here, key=here.get, reverse=True))
    if incumbent is not None:
        lift([incumbent])
    out = []
    for r, (cand, score, ok) in enumerate(ordered[:top]):
        cand = Candidate(cand.family, dict(cand.knobs), cand.spec, ORIGIN)
        out.append(TuneCandidate(r + 1, cand, score, picker.evidence(shape, cand), ok,
                                 incumbent=cand.spec == incumbent, here=here.get(cand.spec),
                                 new_family=cand.spec in moved))
    return out


class RankedProposer:
    """Proposes a shape's ranked candidates in order, ``n`` at a time, none measured twice."""

    name = "tune"

    def __init__(self, ranked: dict[str, list[TuneCandidate]]):
        self.ranked = ranked

    def propose(self, shape: Shape, ctx) -> list[Candidate]:
        return [t.candidate for t in self.ranked.get(shape.name, []) if t.spec not in ctx.exclude][:ctx.n]


def to_confirm(pairs: dict[tuple, list[float]], shape: Shape, gpu: str | None, min_speedup: float,
               per_layout: int) -> list[str]:
    """Specs to measure again on ``shape``: per layout, the best ``per_layout`` of those measured in one
    paired call only that beat their baseline there by ``min_speedup`` (``pairs``: ``library.spec_pairs``);
    best first, each spec once (a call measures it in every layout)."""
    picked: list[str] = []
    for layout in sorted({k[2] for k in pairs if k[:2] == (gpu, shape.name)}):
        once = sorted(((v[0], k[3]) for k, v in pairs.items()
                       if k[:3] == (gpu, shape.name, layout) and len(v) == 1 and v[0] >= min_speedup), reverse=True)
        picked += [spec for _, spec in once[:per_layout] if spec not in picked]
    return picked


def confirm_call(shape: Shape, specs: Sequence[str], db, evaluator, timing, baselines: Sequence[str],
                 search_id: str, log: Callable[[str], None]) -> None:
    """One paired call of ``specs`` (already built and measured on ``shape``) with the baselines, its rows
    in ``db`` under ``search_id`` (so they count in the shape's budget)."""
    from kernels_search.search.loop import measure_candidates

    df = db.df
    rows = df[(df["shape"] == shape.name) & df["method"].isin(list(specs))].drop_duplicates("method")
    cands = [Candidate(family=r.family, knobs=json.loads(r.config or "{}"), spec=r.method, origin=CONFIRM_ORIGIN)
             for r in rows.itertuples(index=False)]
    if cands:
        meta = dict(search_id=search_id, round=max(db.last_round(search_id), 0), wait_s=0.0)
        measure_candidates(shape, cands, evaluator, db, timing, baselines, meta, None,
                           f"{search_id}-confirm-{uuid.uuid4().hex[:8]}", log)


def incumbent_spec(entries: Sequence[dict], shape: Shape, gpu: str | None) -> str | None:
    """The kernel the library serves on exactly ``shape`` for ``gpu`` (either layout), if any."""
    for e in entries:
        if e.get("kind") == "kernel" and e.get("gpu_name") == gpu and e["shape"] == shape.name:
            return e["spec"]
    return None


def plan(shapes: Sequence[Shape], settings: TuneSettings = TuneSettings(),
         print_fn: Callable[[str], None] = print,
         dry_run: bool = False) -> tuple[dict[str, list[TuneCandidate]], str | None]:
    """(shape -> its ranked candidates, the GPU model the ranker's evidence is from); prints one
    block per shape: each candidate, the call that would measure it, whether its binary is built,
    and why it is there. Touches no GPU. ``dry_run``: plan for the GPU host, keeping the Triton
    families' configs where Triton does not import here (they compile there, in process)."""
    import importlib

    from kernels_search.search import picks, pool
    from kernels_search.search.learner import default_families
    from kernels_search.search.library import load_entries
    from kernels_search.toolchain import ToolchainError

    for mod in settings.plugins:
        importlib.import_module(mod)
    fams = picks.search_families(settings.device, settings.plugins) if dry_run else default_families(settings.device)
    specs = pool.specs(settings.pool, families=fams)
    picker, _, gpu, what = picks.picker_for(shapes, settings.first_pick, settings.ranker, settings.device,
                                            settings.plugins, keep_own=True)
    lib = load_entries(settings.library)
    print_fn(f"tune plan: {len(specs)} pool configs ranked per shape by {settings.first_pick.name} with {what}; "
             f"{'all' if settings.top is None else f'the top {settings.top}'} measured in order until a shape's "
             f"budget ends, {settings.batch} per paired call" + (
                 f"; then the best {settings.confirm} per layout that beat the baseline are measured again in one "
                 f"call, and an entry needs both calls" if settings.confirm else "; one call decides an entry"))
    out = {}
    for shape in shapes:
        ranked = rank_pool(picker, shape, specs, settings.top, incumbent_spec(lib, shape, gpu))
        out[shape.name] = ranked
        print_fn(f"{shape.name}: {len(ranked)} candidates")
        built = {}
        try:
            binaries = pool.binaries([t.spec for t in ranked])
        except ToolchainError as e:  # e.g. no CUTLASS headers: the build of such a candidate fails as its own row
            binaries = []
            print_fn(f"  (which binaries are built is not known here: {e})")
        for b in binaries:
            for s in b.specs:
                built[s] = pool.is_built(b)
        for t in ranked:
            state = "" if t.spec not in built else (" [built]" if built[t.spec] else " [to build]")
            print_fn(f"  #{t.rank:<2} call {(t.rank - 1) // settings.batch + 1}  score {t.score:8.3f}  {t.spec}{state}")
            print_fn(f"      {t.why()}")
    return out, gpu


def tune_main(shapes: Sequence[Shape], out: str | Path, settings: TuneSettings = TuneSettings(), *,
              evaluator=None, print_fn: Callable[[str], None] = print) -> dict:
    """Tune every shape (module docstring) into ``settings.library`` (default the user's library);
    ``evaluator``: a harness.sandbox.Evaluator (default: one on ``settings.device``). Returns
    {shape: [merge decisions' lines]} and writes nothing else than the kernel DB under ``out`` and
    the library."""
    from kernels_search.search import user_library
    from kernels_search.search.db import KernelDB
    from kernels_search.search.library import (DEFAULT_PATH, LIBRARY_VERSION, library_entries, load_library,
                                                lower_median, spec_pairs)
    from kernels_search.search.loop import default_baselines, run_search, search_settings
    from kernels_search.search.run import parse_duration

    st = settings
    per_shape = parse_duration(st.per_shape)
    ranked, _ = plan(shapes, st, print_fn)
    lib_path = Path(st.library) if st.library is not None else user_library.default_path()
    behind = load_library(DEFAULT_PATH) if st.library is None else []
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    db = KernelDB(out / "db")
    timing = search_settings(st.layouts, timing_budget_s=st.timing_budget_s, ci_target=st.ci_target,
                             anticheat=st.anticheat)
    proposer = RankedProposer(ranked)

    def tune_all(ev) -> dict:
        gpu = (getattr(ev, "env", {}) or {}).get("gpu_name")
        result = {}
        baselines = list(st.baselines if st.baselines is not None else default_baselines(st.device))
        for i, shape in enumerate(shapes):
            t0 = time.perf_counter()
            sid = f"tune-{shape.name}"
            summary = run_search([shape], per_shape * (1 - CONFIRM_SHARE) if st.confirm else per_shape, ev, db,
                                 None, [proposer], st.batch, None, settings=timing, baselines=baselines,
                                 search_id=sid, max_rounds=None if st.top is None else math.ceil(st.top / st.batch),
                                 log=print_fn)
            pairs = spec_pairs(db, gpu, [shape])  # {(gpu, shape, layout, spec): its paired speedup per call}
            if st.confirm:
                again = to_confirm(pairs, shape, gpu, st.min_speedup, st.confirm)
                if again:
                    confirm_call(shape, again, db, ev, timing, baselines, sid, print_fn)
                    pairs = spec_pairs(db, gpu, [shape])
                    for spec in again:
                        got = {k[2]: v for k, v in pairs.items() if k[3] == spec}
                        print_fn(f"  confirm {spec}: " + ", ".join(
                            f"{lay} {' then '.join(f'{x:.3f}x' for x in v)} (counts {lower_median(v):.3f}x)"
                            for lay, v in sorted(got.items())))
            new = library_entries(db, gpu, st.min_speedup, [shape], min_pairs=2 if st.confirm else 1)
            merged, decisions = user_library.merge(user_library.read(lib_path), new, st.min_speedup, behind,
                                                   remeasured={k: lower_median(v) for k, v in pairs.items()})
            user_library.write(lib_path, merged, LIBRARY_VERSION, st.min_speedup)
            result[shape.name] = [d.line() for d in decisions]
            print_fn(f"[{i + 1}/{len(shapes)}] {shape.name}: {summary.candidates} candidates in "
                     f"{time.perf_counter() - t0:.0f}s (stop: {summary.stop_reason})")
            for d in decisions:
                print_fn(f"  {d.line()}")
        print_fn(f"library: {lib_path}")
        return result

    if evaluator is not None:
        return tune_all(evaluator)
    from harness import env as envmod
    from harness.sandbox import Evaluator

    env = envmod.collect(st.device)
    with Evaluator(st.device, env, plugins=list(st.plugins)) as ev:
        return tune_all(ev)
