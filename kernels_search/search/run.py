"""``hgemm-bench search`` as a function: what the CLI command calls (flags map 1:1 to arguments).

``search_main`` opens (or resumes) a search folder, runs the search with progress lines, prints
a summary table, exports the library and, with ``holdout`` shapes, measures the policy's first
pick on shapes the search never measured. Folder layout (``out``)::

    db/parts/part-*.parquet   the kernel DB (append-only)
    policy.npz                the policy checkpoint
    library.json              the exported library (also written to ``library`` if given)
    summary.json              per-shape best kernels, throughput, first-pick results
    shapes.txt, holdout.txt   the searched / held-out shapes (``compare --shapes`` reads them)

Rerunning the same command resumes: the budget is the total for the search id (default: the
folder name), nothing measured is measured again. ``run_limit_s`` splits one search over several
invocations (e.g. a host whose commands may run 10 minutes): each stops cleanly (stop reason
``run-limit``: checkpoint, library and summary written) once it has run that long, and the
held-out first-pick check runs only in the invocation that finishes the search (stop reason
budget, rounds or exhausted). A rerun of a finished search measures no new candidate: it goes
straight to the held-out check (read back from the DB), the export and the summary; a rerun
with a larger budget searches on and measures the first pick of the policy it has then. The summary describes the whole
search id (``candidates``, ``wall_s`` = budget spent, ``compile_s``, ``measure_s``, from the DB);
``run_*`` keys describe this invocation only.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Callable, Sequence

from harness.problem import Shape

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
    ``exclude`` (shapes measured before, e.g. ``kernels_search/search/seen_shapes.txt``)."""
    from harness.shapes import sample_grid

    taken = {s.name for s in (*train, *exclude)}
    out: list[Shape] = []
    for s in sample_grid(max(4 * n, n + len(taken)), seed):
        if s.name not in taken and s not in out:
            out.append(s)
    step = len(out) / n if len(out) >= n else 1
    return [out[int(i * step)] for i in range(min(n, len(out)))]


def search_main(shapes: Sequence[Shape], budget: str | float, out: str | Path, *, device: str = "cuda",
                batch: int = 4, layouts: Sequence[str] = ("nn", "tn"), families: Sequence[str] | None = None,
                seed: int = 0, epsilon: float = 0.05, explore: float = 1.0, compile_penalty: float = 0.02,
                timing_budget_s: float = 2.0, ci_target: float = 0.02, baselines: Sequence[str] | None = None,
                plugins: Sequence[str] = (), proposers: Sequence = (), library: str | Path | None = None,
                min_speedup: float = 1.02, holdout: Sequence[Shape] = (), search_id: str | None = None,
                max_rounds: int | None = None, anticheat: bool = True, lookahead: int | None = None,
                max_new_builds: int | None = None, run_limit_s: str | float | None = None, design: bool = True,
                first_pick_rule: str = "ranked", first_pick_min_shapes: int = 10, first_pick_min_near: int = 2,
                first_pick_decline_one_slice: bool = True, first_pick_decline_partial_cluster: bool = True,
                first_pick_prior: Sequence[Path] | str = "auto",
                local_share: float = 0.75,
                prior: Sequence[Path] = (), print_fn: Callable[[str], None] = print, console=None) -> dict:
    """Run (or resume) a search; returns the summary dict also written to ``out/summary.json``.

    CUDA defaults: ``lookahead=8`` (the next 8 shapes' candidates compile while the GPU measures),
    ``max_new_builds=2`` per shape batch (a CUTLASS sm90 build takes 1-2 min: 9 batches x 2 builds
    keep the 16-core host busy without starving the timing).

    ``min_speedup`` (default 1.02): a searched kernel goes into the library only if its paired
    speedup over the same-layout baseline is at least this; the 2% margin keeps measurement noise
    from exporting a kernel that a later ``compare`` finds slower than the baseline it replaced.

    ``run_limit_s`` (seconds or a duration such as ``8m``): stop this invocation once it has run
    that long since it was called, even with budget left (see the module docstring).

    ``prior``: compare Parquets the policy learns from before it searches (``search.prior``), never
    rows of the held-out shapes.

    ``first_pick_prior``: compare Parquets that only the held-out first pick adds to the finished
    search's policy (a copy; the search itself never sees them), again without the held-out
    shapes' rows; ``"auto"`` (the default) is this GPU model's committed list
    (``search.prior.prior_for_gpu``: ``prior_h200.txt`` on an H200, none elsewhere). With
    ``first_pick_min_near`` 2 and the rule's defaults this is ``paired/m10/n2/prior``, the rule
    that won its registered test on fresh shapes (BENCHMARKS.md, nineteenth session), and with
    ``first_pick_decline_one_slice`` (the default) ``paired/m10/n2/d/prior``: one-slice split-K
    declined, which passed its registered test on 100 fresh off-grid shapes (twenty-second session:
    paired 1.004x, 1.000-1.008, better on the 5 shapes it changed); with
    ``first_pick_decline_partial_cluster`` (the default) ``paired/m10/n2/d/c/prior``: a cluster left
    partly empty declined, which passed its registered test on 100 fresh off-grid shapes
    (twenty-fifth session: paired 1.008x, 0.884-1.132, over the 4 shapes it changed). Since the
    twenty-seventh session the default rule is ``ranked`` (``search.ranker``), so the default is
    ``ranked/m10/n2/d/c/prior``: its registered test against ``paired/m10/n2/d/c/prior`` measured
    paired 1.055x (1.040-1.072) over the 154 of 200 picks it changed (grid check with --leave-out:
    1.010x against 0.988x over 100; 100 fresh off-grid shapes: 0.965x against 0.908x)."""
    t0 = time.perf_counter()
    from harness import env as envmod
    from harness.sandbox import Evaluator
    from kernels_search.search.db import KernelDB
    from kernels_search.search.library import export_library
    from kernels_search.search.loop import (_shape_stats, first_pick_eval, first_pick_id, geomean, run_search,
                                            search_settings)
    from kernels_search.search.policy import Policy, default_families

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    budget_s = parse_duration(budget)
    run_limit = parse_duration(run_limit_s) if run_limit_s is not None else None
    if run_limit is not None and run_limit <= 0:
        raise ValueError(f"run limit must be > 0 (got {run_limit_s!r})")
    search_id = search_id or out.resolve().name
    import importlib

    for mod in plugins:  # plug-ins may add search families (register_search_family)
        importlib.import_module(mod)
    fams = default_families(device)
    if families:
        unknown = [f for f in families if f not in fams]
        if unknown:
            raise ValueError(f"unknown or unavailable families {unknown} on {device}; available: {sorted(fams)}")
        fams = {f: fams[f] for f in families}
    if not fams:
        raise ValueError(f"no kernel family to search on {device}")
    env = envmod.collect(device)
    pick_source = ""
    if first_pick_prior == "auto":  # this GPU model's packaged evidence (none for another model, the CPU)
        from kernels_search.search import evidence

        ev = evidence.load(env.get("gpu_name")) if holdout else None
        first_pick_prior, pick_source = (ev.parts, ev.label) if ev is not None else ([], "")
    db = KernelDB(out / "db")
    # A search may resume on another machine with the same GPU model (every speedup is paired
    # within one call, so rows from two machines never meet in a ratio); each row keeps the
    # gpu_uuid that measured it. Another model is another search.
    gpus_before = set(db.df["gpu_name"].dropna()) if not db.df.empty else set()
    if gpus_before and env.get("gpu_name") not in gpus_before:
        raise ValueError(f"{out} holds a search on another GPU model ({', '.join(sorted(gpus_before))}); use another folder")
    if gpus_before and env.get("gpu_uuid") not in set(db.df["gpu_uuid"].dropna()):
        print_fn(f"resuming on another {env.get('gpu_name')} ({env.get('gpu_uuid')}); rows keep the uuid that measured them")
    cuda = device == "cuda"
    policy = Policy(fams, tuple(layouts), seed=seed, epsilon=epsilon, explore=explore,
                    compile_penalty=compile_penalty,
                    max_new_builds=(2 if cuda else None) if max_new_builds is None else max_new_builds,
                    design=design, first_pick_rule=first_pick_rule, first_pick_min_shapes=first_pick_min_shapes,
                    first_pick_min_near=first_pick_min_near, first_pick_decline_one_slice=first_pick_decline_one_slice,
                    first_pick_decline_partial_cluster=first_pick_decline_partial_cluster, local_share=local_share)
    settings = search_settings(layouts, timing_budget_s=timing_budget_s, ci_target=ci_target, seed=seed,
                               anticheat=anticheat)
    last = {}

    def progress(p):
        last["p"] = p
        bs = f"{p.best_speedup:.3f}x" if p.best_speedup else "-"
        gm = f"{p.geomean_best_speedup:.3f}x" if p.geomean_best_speedup else "-"
        fails = sum(1 for o in p.last if o.failure)
        print_fn(f"[round {p.round}] {p.shape:>17} | shapes {p.shapes_measured}/{p.shapes_total} "
                 f"(beating baseline {p.shapes_beating_baseline}) | best {bs} geomean {gm} | "
                 f"{p.candidates} cand ({p.candidates_per_s * 60:.1f}/min) | compile {p.compile_s:.0f}s "
                 f"measure {p.measure_s:.0f}s | {p.elapsed_s:.0f}/{p.budget_s:.0f}s"
                 + (f" | {fails} failed rows" if fails else ""))

    with Evaluator(device, env, plugins=list(plugins)) as ev:
        summary = run_search(list(shapes), budget_s, ev, db, policy, [policy, *proposers], batch, progress,
                             settings=settings, baselines=baselines, search_id=search_id,
                             checkpoint=out / "policy.npz", max_rounds=max_rounds, log=print_fn,
                             lookahead=(8 if cuda else 0) if lookahead is None else lookahead,
                             run_limit_s=run_limit, run_t0=t0,
                             prior=prior, prior_exclude=[s.name for s in holdout])
        wall = time.perf_counter() - t0
        finished = summary.stop_reason != "run-limit"
        first = []
        if holdout and not finished:
            print_fn(f"held-out first pick ({len(holdout)} shapes): deferred to the run that finishes the search")
        elif holdout:
            # the first pick belongs to the policy that has seen this many candidates: a rerun that
            # adds none reads it back from the DB; a resume with a larger budget measures it again
            seen = db.search_totals(search_id)["candidates"]
            print_fn(f"first pick on {len(holdout)} held-out shapes (one evaluation each), policy after "
                     f"{seen} candidates")
            picker = policy
            if first_pick_prior:
                from kernels_search.search.prior import with_prior

                picker, folded = with_prior(policy, list(first_pick_prior), [s.name for s in holdout], env.get("gpu_name"),
                                            pick_source)
                print_fn(folded.line() + " for the first pick")
            first = first_pick_eval(list(holdout), ev, db, picker, settings=settings, baselines=baselines,
                                    search_id=first_pick_id(search_id, seen, picker),
                                    progress=lambda r: print_fn(f"  {r['shape']:>17} {r['speedup']:.3f}x vs "
                                                                f"{r['reference']} ({r['spec']})"))
    lib_path = export_library(db, out / "library.json", gpu=env.get("gpu_name"), min_speedup=min_speedup,
                              shapes=list(shapes))
    if library is not None:
        export_library(db, library, gpu=env.get("gpu_name"), min_speedup=min_speedup, shapes=list(shapes))
    p = last.get("p")
    tot = db.search_totals(search_id)
    used = tot["budget_used_s"]
    _, _, _, gm = _shape_stats(db, env.get("gpu_name"), shapes)
    doc = {
        "search_id": search_id, "gpu_name": env.get("gpu_name"), "gpu_uuid": env.get("gpu_uuid"),
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
        "first_pick": first, "first_pick_geomean": geomean([r["speedup"] for r in first]) if first else None,
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
    if "run_candidates" in doc and (doc["run_candidates"] != doc["candidates"] or doc.get("stop_reason") == "run-limit"):
        run = (f"; this run: {doc['run_candidates']} candidates in {doc['run_wall_s']:.0f}s "
               f"({doc.get('run_candidates_per_gpu_minute') or 0:.1f} per minute)")
    print_fn(f"{doc['candidates']} candidates in {doc['wall_s']:.0f}s ({cpm or 0:.1f} per GPU-minute; compile "
             f"{doc['compile_s']:.0f}s, measure {doc['measure_s']:.0f}s){run}; stop: {doc['stop_reason']}; "
             f"geomean best speedup vs strongest baseline {gm or 0:.3f}x; library: {doc['library']}")
    if doc.get("first_pick"):
        failed = [r for r in doc["first_pick"] if not r["speedup"]]
        ran = len(doc["first_pick"]) - len(failed)
        print_fn(f"first pick on {len(doc['first_pick'])} held-out shapes: geomean {doc['first_pick_geomean'] or 0:.3f}x "
                 f"over the {ran} that ran" + (f"; {len(failed)} failed: " + ", ".join(
                     f"{r['shape']} ({r.get('failure') or 'no time'})" for r in failed) if failed else ""))
    if doc.get("stop_reason") == "run-limit":
        print_fn(f"run limit ({doc.get('run_limit_s') or 0:.0f}s) reached: {doc.get('budget_left_s') or 0:.0f}s of the "
                 f"{doc['budget_s']:.0f}s budget left ({doc.get('budget_used_s') or 0:.0f}s spent); rerun the same "
                 "command to resume")
