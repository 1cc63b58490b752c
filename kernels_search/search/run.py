"""``hgemm-bench search`` as a function: what the CLI command calls, with a ``SearchSettings``.

``search_main`` opens (or resumes) a search folder, runs the search with progress lines, prints
a summary table, exports the library and, with ``holdout`` shapes, measures the first pick
(``first_pick.FirstPick``) on shapes the search never measured. Folder layout (``out``)::

    db/parts/part-*.parquet   the kernel DB (append-only)
    policy.npz                the learner's checkpoint
    library.json              the exported library (also written to ``library`` if given)
    summary.json              per-shape best kernels, throughput, first-pick results
    shapes.txt, holdout.txt   the searched / held-out shapes (``compare --shapes`` reads them)

Rerunning the same command resumes: the budget is the total for the search id (default: the
folder name), nothing measured is measured again. ``run_limit`` splits one search over several
invocations (e.g. a host whose commands may run 10 minutes): each stops cleanly (stop reason
``run-limit``: checkpoint, library and summary written) once it has run that long, and the
held-out first-pick check runs only in the invocation that finishes the search (stop reason
budget, rounds or exhausted). A rerun of a finished search measures no new candidate: it goes
straight to the held-out check (read back from the DB), the export and the summary; a rerun
with a larger budget searches on and measures the first pick of the learner it has then. The
summary describes the whole search id (``candidates``, ``wall_s`` = budget spent, ``compile_s``,
``measure_s``, from the DB);
``run_*`` keys describe this invocation only.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from harness.problem import Shape
from kernels_search.search.settings import CUDA_LOOKAHEAD, CUDA_MAX_NEW_BUILDS, SearchSettings

_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str | float) -> float:
    """'20m', '90s', '1.5h', '300' (seconds) -> seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(text))
    if not m:
        raise ValueError(f"bad duration {text!r}: expected e.g. 20m, 90s, 1h or seconds")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def holdout_shapes(train: Sequence[Shape], n: int, seed: int = 1, exclude: Sequence[Shape] = ()) -> list[Shape]:
    """``n`` cuda-l2 grid shapes, stratified like ``sample_grid``, none of them in ``train`` or in
    ``exclude`` (shapes measured before, e.g. a list of every shape reported so far)."""
    from harness.shapes import sample_grid

    taken = {s.name for s in (*train, *exclude)}
    out: list[Shape] = []
    for s in sample_grid(max(4 * n, n + len(taken)), seed):
        if s.name not in taken and s not in out:
            out.append(s)
    step = len(out) / n if len(out) >= n else 1
    return [out[int(i * step)] for i in range(min(n, len(out)))]


def search_main(shapes: Sequence[Shape], out: str | Path, settings: SearchSettings = SearchSettings(), *,
                holdout: Sequence[Shape] = (), proposers: Sequence = (),
                print_fn: Callable[[str], None] = print, console=None) -> dict:
    """Run (or resume) a search of ``shapes`` into ``out``; returns the summary dict also written to
    ``out/summary.json``. ``holdout``: shapes the first pick is measured on once the search is
    finished (never searched, and their rows never folded into what the pick learns from);
    ``proposers``: more proposers besides the learner (e.g. the LLM's).

    ``settings.min_speedup`` (default 1.02): a searched kernel goes into the library only if its
    paired speedup over the same-layout baseline is at least this; the margin keeps measurement
    noise from exporting a kernel that a later ``compare`` finds slower than the baseline it replaced.
    ``settings.prior``: compare Parquets the learner learns from before it searches
    (``search.prior``), never rows of the held-out shapes. ``settings.first_pick.prior``: what only
    the held-out pick adds to a copy of the finished search's learner, again without the held-out
    shapes' rows: ``"auto"`` is this GPU model's packaged evidence (``search.evidence``; none on
    another model or the CPU)."""
    t0 = time.perf_counter()
    from harness import env as envmod
    from harness.sandbox import Evaluator
    from harness.timing.stats import geomean
    from kernels_search.search import evidence
    from kernels_search.search.db import KernelDB
    from kernels_search.search.first_pick import FirstPick
    from kernels_search.search.learner import Learner, default_families
    from kernels_search.search.library import export_library
    from kernels_search.search.loop import _shape_stats, first_pick_eval, run_search, search_settings

    st = settings
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    budget_s = parse_duration(st.budget)
    run_limit = parse_duration(st.run_limit) if st.run_limit is not None else None
    if run_limit is not None and run_limit <= 0:
        raise ValueError(f"run limit must be > 0 (got {st.run_limit!r})")
    search_id = st.search_id or out.resolve().name
    import importlib

    for mod in st.plugins:  # plug-ins may add search families (register_search_family)
        importlib.import_module(mod)
    fams = default_families(st.device)
    if st.families:
        unknown = [f for f in st.families if f not in fams]
        if unknown:
            raise ValueError(f"unknown or unavailable families {unknown} on {st.device}; available: {sorted(fams)}")
        fams = {f: fams[f] for f in st.families}
    if not fams:
        raise ValueError(f"no kernel family to search on {st.device}")
    env = envmod.collect(st.device)
    gpu = env.get("gpu_name")
    # resolved before anything is measured: a bad file fails here
    pick_sources, pick_label = evidence.resolve(st.first_pick.prior, gpu) if holdout else ([], "")
    db = KernelDB(out / "db")
    # A search may resume on another machine with the same GPU model (every speedup is paired
    # within one call, so rows from two machines never meet in a ratio); each row keeps the
    # gpu_uuid that measured it. Another model is another search.
    gpus_before = set(db.df["gpu_name"].dropna()) if not db.df.empty else set()
    if gpus_before and gpu not in gpus_before:
        raise ValueError(f"{out} holds a search on another GPU model ({', '.join(sorted(gpus_before))}); "
                         "use another folder")
    if gpus_before and env.get("gpu_uuid") not in set(db.df["gpu_uuid"].dropna()):
        print_fn(f"resuming on another {gpu} ({env.get('gpu_uuid')}); rows keep the uuid that measured them")
    cuda = st.device == "cuda"
    learner_settings = st.learner
    if cuda and learner_settings.max_new_builds is None:
        learner_settings = replace(learner_settings, max_new_builds=CUDA_MAX_NEW_BUILDS)
    learner = Learner(fams, tuple(st.layouts), learner_settings, seed=st.seed)
    timing = search_settings(st.layouts, timing_budget_s=st.timing_budget_s, ci_target=st.ci_target, seed=st.seed,
                             anticheat=st.anticheat)
    last = {}

    def progress(p):
        last["p"] = p
        bs = f"{p.best_speedup:.3f}x" if p.best_speedup else "-"
        gm = f"{p.geomean_best_speedup:.3f}x" if p.geomean_best_speedup else "-"
        fails = sum(1 for o in p.last if o.failure and o.failure != "unsupported")
        declined = sum(1 for o in p.last if o.failure == "unsupported")  # a config that serves the other layout
        print_fn(f"[round {p.round}] {p.shape:>17} | shapes {p.shapes_measured}/{p.shapes_total} "
                 f"(beating baseline {p.shapes_beating_baseline}) | best {bs} geomean {gm} | "
                 f"{p.candidates} cand ({p.candidates_per_s * 60:.1f}/min) | compile {p.compile_s:.0f}s "
                 f"measure {p.measure_s:.0f}s | {p.elapsed_s:.0f}/{p.budget_s:.0f}s"
                 + (f" | {fails} failed rows" if fails else "")
                 + (f" | {declined} declined a layout" if declined else ""))

    lookahead = (CUDA_LOOKAHEAD if cuda else 0) if st.lookahead is None else st.lookahead
    with Evaluator(st.device, env, plugins=list(st.plugins)) as ev:
        summary = run_search(list(shapes), budget_s, ev, db, learner, [learner, *proposers], st.batch, progress,
                             settings=timing, baselines=st.baselines, search_id=search_id,
                             checkpoint=out / "policy.npz", max_rounds=st.max_rounds, log=print_fn,
                             lookahead=lookahead, run_limit_s=run_limit, run_t0=t0,
                             prior=list(st.prior), prior_exclude=[s.name for s in holdout])
        wall = time.perf_counter() - t0
        finished = summary.stop_reason != "run-limit"
        first = []
        if holdout and not finished:
            print_fn(f"held-out first pick ({len(holdout)} shapes): deferred to the run that finishes the search")
        elif holdout:
            # the first pick belongs to the learner that has seen this many candidates: a rerun that
            # adds none reads it back from the DB; a resume with a larger budget measures it again
            seen = db.search_totals(search_id)["candidates"]
            print_fn(f"first pick on {len(holdout)} held-out shapes (one evaluation each), learner after "
                     f"{seen} candidates")
            picking = learner
            if pick_sources:
                from kernels_search.search.prior import with_prior

                picking, folded = with_prior(learner, pick_sources, [s.name for s in holdout], gpu, pick_label)
                print_fn(folded.line() + " for the first pick")
            picker = FirstPick(picking, st.first_pick)
            first = first_pick_eval(list(holdout), ev, db, picker, settings=timing, baselines=st.baselines,
                                    search_id=picker.id(search_id, seen),
                                    progress=lambda r: print_fn(f"  {r['shape']:>17} {r['speedup']:.3f}x vs "
                                                                f"{r['reference']} ({r['spec']})"))
    lib_path = export_library(db, out / "library.json", gpu=gpu, min_speedup=st.min_speedup, shapes=list(shapes))
    if st.library is not None:
        export_library(db, st.library, gpu=gpu, min_speedup=st.min_speedup, shapes=list(shapes))
    p = last.get("p")
    tot = db.search_totals(search_id)
    used = tot["budget_used_s"]
    _, _, _, gm = _shape_stats(db, gpu, shapes)
    ran = [r["speedup"] for r in first if r["speedup"]]
    doc = {
        "search_id": search_id, "gpu_name": gpu, "gpu_uuid": env.get("gpu_uuid"),
        "shapes": [s.name for s in shapes], "budget_s": budget_s, "stop_reason": summary.stop_reason,
        "finished": finished, "budget_used_s": used, "budget_left_s": max(0.0, budget_s - used),
        # the whole search id, every run together (from the DB); wall_s is the budget spent
        "rounds": db.last_round(search_id) + 1, "candidates": tot["candidates"], "wall_s": used,
        "candidates_per_gpu_minute": tot["candidates"] / (used / 60) if used > 0 else None,
        "compile_s": tot["compile_s"], "measure_s": tot["measure_s"],
        # this invocation only
        "run_limit_s": run_limit, "run_rounds": summary.rounds, "run_candidates": summary.candidates,
        "run_wall_s": wall, "run_candidates_per_gpu_minute": summary.candidates / (wall / 60) if wall > 0 else None,
        "run_compile_s": p.compile_s if p else 0.0, "run_measure_s": p.measure_s if p else 0.0,
        "geomean_best_speedup": gm,
        "per_shape": summary.per_shape, "library": str(lib_path),
        # the geomean covers the picks that ran; a pick that failed (unsupported, wrong, crashed)
        # has no speed and is listed apart, never silently dropped from the report
        "first_pick": first, "first_pick_geomean": geomean(ran) if ran else None,
        "first_pick_failed": [r["shape"] for r in first if not r["speedup"]],
    }
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    # shape files for a follow-up `hgemm-bench compare --shapes out/shapes.txt --methods library,...`
    (out / "shapes.txt").write_text("".join(f"{s.name}\n" for s in shapes))
    if holdout:
        (out / "holdout.txt").write_text("".join(f"{s.name}\n" for s in holdout))
    print_summary(doc, print_fn, console)
    return doc


def print_summary(doc: dict, print_fn: Callable[[str], None] = print, console=None) -> None:
    """The end-of-search table (rich when a console is given, plain text otherwise)."""
    rows = doc["per_shape"]
    head = ("shape", "layout", "best kernel", "us", "baseline us", "speedup")
    body = [(r["shape"], r["layout"], r["spec"], f"{r['device_us']:.2f}",
             f"{r['baseline_us']:.2f}" if r.get("baseline_us") else "-",
             f"{r['speedup']:.3f}x" if r.get("speedup") else "-") for r in rows]
    if console is not None:
        from rich.table import Table

        t = Table(*head, title=f"search {doc['search_id']} on {doc['gpu_name']}")
        for b in body:
            t.add_row(*b)
        console.print(t)
    else:
        for b in (head, *body):
            print_fn(" | ".join(b))
    cpm = doc.get("candidates_per_gpu_minute")
    gm = doc.get("geomean_best_speedup")
    run = ""
    if "run_candidates" in doc and (doc["run_candidates"] != doc["candidates"]
                                    or doc.get("stop_reason") == "run-limit"):
        run = (f"; this run: {doc['run_candidates']} candidates in {doc['run_wall_s']:.0f}s "
               f"({doc.get('run_candidates_per_gpu_minute') or 0:.1f} per minute)")
    print_fn(f"{doc['candidates']} candidates in {doc['wall_s']:.0f}s ({cpm or 0:.1f} per GPU-minute; compile "
             f"{doc['compile_s']:.0f}s, measure {doc['measure_s']:.0f}s){run}; stop: {doc['stop_reason']}; "
             f"geomean best speedup vs strongest baseline {gm or 0:.3f}x; library: {doc['library']}")
    if doc.get("first_pick"):
        failed = [r for r in doc["first_pick"] if not r["speedup"]]
        ran = len(doc["first_pick"]) - len(failed)
        print_fn(f"first pick on {len(doc['first_pick'])} held-out shapes: "
                 f"geomean {doc['first_pick_geomean'] or 0:.3f}x "
                 f"over the {ran} that ran" + (f"; {len(failed)} failed: " + ", ".join(
                     f"{r['shape']} ({r.get('failure') or 'no time'})" for r in failed) if failed else ""))
    if doc.get("stop_reason") == "run-limit":
        print_fn(f"run limit ({doc.get('run_limit_s') or 0:.0f}s) reached: {doc.get('budget_left_s') or 0:.0f}s of the "
                 f"{doc['budget_s']:.0f}s budget left ({doc.get('budget_used_s') or 0:.0f}s spent); rerun the same "
                 "command to resume")
