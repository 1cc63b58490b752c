"""The search policy's held-out first picks, computed from a search folder without a GPU, and
optionally compiled ahead into the build cache.

On the GPU host the held-out check compiles its picks before it measures them, and a CUTLASS
sm90 pick takes a minute or more to build there: in the H200 run of 2026-11-30 (fifth session)
the check ran out of its device call after 4 of 20 shapes. The pick depends only on the policy
checkpoint, the kernel DB and the shape (``FirstPick.pick`` seeds its pool by the shape), so
this script makes the same picks here; ``--prebuild`` compiles the CUDA ones (nvcc only, no GPU)
into ``$HGEMM_BUILD_CACHE`` for the device call to load.

    python -m lab.first_picks results/search-h200-c [--rule model/m2] [--prebuild] [--all] [--device cpu --plugin MOD]

Shapes whose pick is already measured under the current first-pick id are skipped (``--all``
lists them too). The search's families are those its checkpoint was trained with; where the GPU
host had Triton and this machine has not, Triton configs are still picked (they need no build).

Two pick rules side by side, in one ``compare`` call (``scripts/gpu_check.sh pickrules``):
``--rules model,neighbours --compare-args`` prints ``PICK_SHAPES=...`` and ``PICK_METHODS=...``
(the held-out shapes and every rule's picks; with ``--prebuild`` it then compiles the CUDA ones in
parallel: in the twelfth session's H200 call the compare built them one by one in its prepares and
its 150 s ran out before the first shape finished), and ``--rules model,neighbours --report R.parquet``
reads that call's results back: per rule, each pick's speedup over cuBLASLt autotune (best of
layouts, device time; a pick with no correct row counts as exp(-1), its reward) and the geomean.

``--holdout-seed S`` replaces the search's own held-out shapes by ``fresh_holdout``: as many grid
shapes drawn with seed S, none of them searched or in the search's holdout (nor in the shape file
``--holdout-exclude`` names: ``lab/seen_shapes.txt``, every shape reported so far). The search's holdout
has been looked at in every session since the fifth (its picks shaped the neighbour rule), so it
no longer tests the rules cleanly; a seed never measured before does, once. ``--holdout-seed 11,12``
draws once per seed, each draw avoiding the ones before it, and the report then gives each draw's
geomean, the 95 % bootstrap interval over all the shapes, and the first rule's paired ratio over
each other rule (``report_lines``).

A rule may name the evidence its picks need: ``RULE/mN`` picks only configs measured correctly on
at least N other searched shapes (``FirstPickSettings.min_shapes``; plain ``RULE``: 2). ``cautious/m20``
is, on a 40-shape search, about the presets, which the design measures on every shape.

``--holdout-shapes FILE`` takes the held-out shapes from a shape file instead (one a line, ``#``
comments), for shapes off the grid once the grid has none left unmeasured (twenty-first session):
a shape the search measured, or one the ``--holdout-exclude`` file names, is refused by name.

``--also-picks FILE`` adds picks made elsewhere (``shape<TAB>spec``, e.g. the same rule's picks under
the code before a change, computed then) as one more column, measured in the same call.

``RULE[/mN]/nK`` lets only configs measured on K shapes within distance 2 (log2 M, N, K) of the
held-out shape compete, while any has that (``FirstPickSettings.min_near``).

``RULE[/mN][/nK]/prior`` picks with the search's policy after it has also learnt from ``--prior``
(default: the committed list of the search's GPU model, ``kernels_search/search/prior_h200.txt``
on an H200: the earlier held-out checks' Parquets, ``kernels_search/search/prior.py``), so one
call can measure a rule with and without that knowledge side by side. ``RULE[...]/prior=LIST`` folds
in the list (or Parquet) LIST instead, so one call can measure two priors side by side. A held-out
shape named in the prior is refused: it would not be fresh.

``--leave-out`` accepts such shapes and drops every row of them from each prior instead: a
leave-shapes-out check, for the cuda-l2 grid, which has no unmeasured shape left since the
twenty-first session. The rule never sees those shapes' measurements, but they are not fresh (rule
choices were made with them in view), so its figures are reported apart from fresh ones; the plan
file's header says so.

``RULE[...]/d`` declines a config whose one-wave split-K slice count resolves to one slice on the
shape (``FirstPickSettings.decline_one_slice``); ``RULE[...]/d/c`` (or ``/c``) also one whose tile
count leaves a cluster partly empty there (``decline_partial_cluster``); ``geopaired`` (lab/first_pick_rules.py)
weighs the paired rule's evidence by how alike a config launches there. ``--top K`` with ``--rules
--compare-args --plan-out`` plans each rule's K best-ranked configs per shape, a study of its near
misses (twenty-second session, off the grid).

The default rule, ``ranked/m10/n2/d/c/prior``, is what ``search --holdout`` picks with by default:
the learned ranker (``kernels_search/search/ranker.py``) under the paired rule's constraints, after its
registered test (twenty-seventh session: paired 1.055x, 1.040-1.072, over the 154 of 200 picks it
changed; grid check with ``--leave-out`` 1.010x against 0.988x, fresh off-grid 0.965x against 0.908x).
Before it, ``paired/m10/n2/d/c/prior``: ``/c`` joined it after its registered test on 100 fresh off-grid shapes (twenty-fifth session,
paired 1.008x, 0.884-1.132, over the 4 picks it changed); before that ``paired/m10/n2/d/prior``,
``paired/m10/n2/prior`` with one-slice split-K declined (its registered test: 100 fresh off-grid
shapes, twenty-second session, paired 1.004x, 1.000-1.008). ``paired/m10/n2/prior`` won its
registered test on fresh seeds 32-37 (120 shapes: 0.981x over the 118 measured, against
0.964x for ``cautious/m10/n2/prior``, paired 1.017x, 95 % CI 1.003-1.033; BENCHMARKS.md,
nineteenth session). ``cautious/m10/n2/prior`` had been the default since its own test on seeds
17-18 (seventeenth session).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple


def policy_for(folder: Path, layouts=("nn", "tn"), device: str = "cuda", plugins=()):
    """(the search's learner as ``search_main`` rebuilds it: checkpoint, then every DB row it lacks,
    its KernelDB): ``kernels_search.search.picks.learner_for_search``."""
    from kernels_search.search.picks import learner_for_search

    return learner_for_search(folder, device, plugins, log=print)


def gpu_of(db) -> str | None:
    """The GPU model the search ran on (its DB rows' ``gpu_name``), or None for an empty DB."""
    from kernels_search.search.picks import gpu_of as of

    return of(db)


ROOT = Path(__file__).resolve().parents[1]


def prior_for_gpu(gpu_name: str | None) -> list[Path]:
    """The compare Parquets behind this GPU model's packaged evidence (``lab/evidence/<model>-sources.txt``,
    the same rows ``search --holdout`` folds in), or [] where the model has none."""
    from kernels_search.search.evidence import gpu_model_slug
    from kernels_search.search.prior import prior_paths

    listed = ROOT / "lab" / "evidence" / f"{gpu_model_slug(gpu_name)}-sources.txt" if gpu_name else None
    return prior_paths([listed], root=ROOT) if listed is not None and listed.exists() else []


def search_id_of(db) -> str | None:
    """The search's own id in its DB (the first rows not written by a held-out check), or None."""
    ids = db.df["search_id"] if not db.df.empty else []
    ids = [i for i in ids if "-first-pick-" not in i]
    return ids[0] if ids else None


def provenance(folder: Path, db) -> tuple[str, bool]:
    """One line naming the policy state the picks come from (search id, candidates, budget used,
    finished or not), and whether the search finished. A search stopped by a call's run limit is a
    mid-search snapshot: in the thirteenth session a carried copy of search-h200-f from before its
    last slice (1040 of 1108 candidates) was restored on the GPU host, and its picks differed from
    the finished search's on 13 of 20 fresh shapes (model rule; 8 of 20 for the neighbour rule),
    and nothing said so."""
    import json

    doc = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").exists() else {}
    df = db.df
    search_id = doc.get("search_id") or search_id_of(db) or "?"
    rows = int((~df["is_baseline"] & (df["origin"] != "policy:first-pick")).sum()) if not df.empty else 0
    finished = bool(doc.get("finished", False))
    used, budget = doc.get("budget_used_s"), doc.get("budget_s")
    spent = f", {used:.0f} of {budget:.0f} s" if used is not None and budget is not None else ""
    state = "finished" if finished else f"NOT finished (stop: {doc.get('stop_reason', 'no summary.json')})"
    return (f"policy of {search_id} in {folder}: {rows} candidate rows, {doc.get('candidates', '?')} "
            f"candidates{spent}, {state}"), finished


def read_shapes(folder: Path, name: str) -> list:
    """A search folder's shape list: ``shapes.txt`` (searched) or ``holdout.txt``."""
    from harness.shapes import parse_shape

    return [parse_shape(s) for s in (folder / name).read_text().split()]


def fresh_holdout(folder: Path, seed: int, exclude: Path | None = None, avoid=()) -> list:
    """Grid shapes for ``seed``, as many as the search's holdout, none searched or held out by it,
    none in the ``exclude`` shape file (``lab/seen_shapes.txt``) and none in
    ``avoid`` (shapes)."""
    from harness.shapes import parse_shapes
    from kernels_search.search.run import holdout_shapes

    held = read_shapes(folder, "holdout.txt")
    seen = (parse_shapes(str(exclude)) if exclude is not None else []) + list(avoid)
    return holdout_shapes(read_shapes(folder, "shapes.txt") + held, len(held), seed, exclude=seen)


def listed_holdout(folder: Path, path: Path, exclude: Path | None = None) -> list:
    """The shapes of a shape file as held-out shapes: ValueError naming any the search measured
    (its shapes.txt or holdout.txt) or the ``exclude`` shape file holds, any listed twice, or none."""
    from harness.shapes import parse_shapes, read_shape_file

    shapes = read_shape_file(path)
    names = [s.name for s in shapes]
    twice = sorted({n for n in names if names.count(n) > 1})
    seen = {s.name for s in read_shapes(folder, "shapes.txt") + read_shapes(folder, "holdout.txt")}
    if exclude is not None:
        seen |= {s.name for s in parse_shapes(str(exclude))}
    known = [n for n in names if n in seen]
    if twice or known:
        raise ValueError("; ".join(x for x in (twice and f"listed twice: {', '.join(twice)}",
                                               known and f"measured before: {', '.join(known)}") if x))
    return shapes


def fresh_draws(folder: Path, seeds: list[int], exclude: Path | None = None) -> dict[int, list]:
    """One ``fresh_holdout`` draw per seed, in order, each also avoiding the shapes of the draws
    before it, so that one call can measure several disjoint draws (seed -> its shapes). The first
    draw is ``fresh_holdout``'s for that seed alone."""
    out: dict[int, list] = {}
    for seed in seeds:
        out[seed] = fresh_holdout(folder, seed, exclude, avoid=[s for shapes in out.values() for s in shapes])
    return out


def short_draws(draws: dict[int, list], folder: Path) -> list[str]:
    """A line for each draw that came out smaller than the search's holdout because the grid has
    fewer unmeasured shapes left than that (the cuda-l2 grid's 1,000 ran out in the twenty-first
    session): a call would otherwise report fewer shapes without saying why."""
    want = len(read_shapes(folder, "holdout.txt"))
    return [f"seed {seed}: {len(shapes)} of {want} shapes: the grid has no more that are not excluded"
            for seed, shapes in draws.items() if len(shapes) < want]


def report_lines(sp: dict[str, dict[str, float]], draws: dict | None = None, boot: int = 10000) -> list[str]:
    """The summary under the per-shape table: each rule's geomean per draw and over all shapes with
    a 95 % bootstrap interval over shapes, and each rule's paired ratio to the first rule (the
    figure of record, when registered so) with its interval. Seeded: the same rows give the same lines."""
    import numpy as np

    rules = list(sp)
    shapes = list(sp[rules[0]])
    logs = {r: np.log([sp[r][s] for s in shapes]) for r in rules}
    idx = np.random.default_rng(0).integers(0, len(shapes), (boot, len(shapes)))

    def ci(x):
        lo, hi = np.exp(np.percentile(x[idx].mean(axis=1), [2.5, 97.5]))
        return f"{np.exp(x.mean()):.3f}x ({lo:.3f}-{hi:.3f})"

    lines = []
    if draws and len(draws) > 1:
        for seed, held in draws.items():
            names = {s.name for s in held}
            keep = np.array([s in names for s in shapes])
            if keep.any():  # a draw the compare did not reach has no line; one it stopped in says so
                part = f" ({keep.sum()} of {len(held)})" if keep.sum() < len(held) else ""
                lines.append(f"| seed {seed}{part} | " + " | ".join(f"{np.exp(logs[r][keep].mean()):.3f}x" for r in rules) + " |")
    lines.append(f"| geomean, {len(shapes)} shapes (95 % bootstrap) | " + " | ".join(f"**{ci(logs[r])}**" for r in rules) + " |")
    for r in rules[1:]:
        d = logs[rules[0]] - logs[r]
        lines.append(f"paired, {rules[0]} over {r}: {ci(d)}; better on {(d > 0).sum()}, worse on {(d < 0).sum()} of {len(d)}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a search's --out folder (db/, policy.npz, holdout.txt)")
    ap.add_argument("--prebuild", action="store_true", help="compile the CUDA picks into $HGEMM_BUILD_CACHE")
    ap.add_argument("--all", action="store_true", help="also shapes whose pick is already measured")
    ap.add_argument("--device", default="cuda", help="the device the search ran on (its families)")
    ap.add_argument("--plugin", action="append", default=[], help="module registering search families")
    ap.add_argument("--rule", default="ranked/m10/n2/d/c/prior", help="first-pick rule: ranked, paired, geopaired, cautious, model "
                    "or neighbours, optionally /mN, /nK, /d, /c and /prior (see above); default ranked/m10/n2/d/c/prior, as the search's "
                    "--holdout on an H200")
    ap.add_argument("--rules", default="", help="comma list of rules (RULE[/mN][/nK][/d][/c][/prior]), with --compare-args or --report")
    ap.add_argument("--compare-args", action="store_true", help="print PICK_SHAPES and PICK_METHODS for compare")
    ap.add_argument("--plan-out", type=Path, help="with --rules --compare-args: also write a `compare --plan` file "
                                                  "of each shape's own picks (harness/plan.py), for measuring those "
                                                  "instead of every pick on every shape")
    ap.add_argument("--report", type=Path, help="a compare Parquet of the picks: speedups per rule")
    ap.add_argument("--holdout-seed", help="fresh held-out shapes drawn with this seed (see above); a comma list "
                    "draws once per seed, each draw avoiding the ones before it")
    ap.add_argument("--holdout-exclude", type=Path, help="with --holdout-seed: a shape file the draw avoids too; "
                    "with --holdout-shapes: shapes it must not hold")
    ap.add_argument("--holdout-shapes", type=Path, help="held-out shapes from this file (one a line) instead of a "
                    "grid draw (see above)")
    ap.add_argument("--differing", action="store_true",
                    help="with --plan-out: plan only the shapes where the rules pick differently (where they "
                         "agree, both rules' ratio comes from one row: the paired ratio there is exactly 1)")
    ap.add_argument("--leave-out", action="store_true",
                    help="held-out shapes the prior measured are dropped from it instead of refused (a "
                         "leave-shapes-out check on measured shapes, not a fresh one; see above)")
    ap.add_argument("--prior", action="append", type=Path, default=None,
                    help="compare Parquets or .txt lists of them for the /prior rules (default: the "
                         "committed list of the search's GPU model, kernels_search/search/prior_h200.txt on an H200)")
    ap.add_argument("--also-picks", action="append", type=Path, default=[],
                    help="with --rules: a file of picks made elsewhere (shape<TAB>spec a line, # comments), "
                         "measured and reported beside the rules as one more column named by the file")
    ap.add_argument("--top", type=int, default=1,
                    help="with --rules --compare-args: each rule's K best-ranked configs per shape, not only its pick "
                         "(a study of the rule's near misses: measured, they show where its ranking is wrong)")
    ap.add_argument("--unfinished", action="store_true",
                    help="with --rules: accept a search stopped by a run limit (a mid-search policy)")
    a = ap.parse_args(argv)
    if a.differing and not a.plan_out:
        print("--differing chooses the shapes --plan-out writes: it needs --plan-out", file=sys.stderr)
        return 2
    if a.plan_out and not (a.rules and a.compare_args):
        print("--plan-out needs --rules and --compare-args (it writes the picks they print)", file=sys.stderr)
        return 2
    if a.top < 1 or (a.top > 1 and not (a.rules and a.compare_args)):
        print(f"--top {a.top}: a count above 1, with --rules and --compare-args (a study's plan, not a report)", file=sys.stderr)
        return 2
    from kernels_search.search.loop import auto_prebuild

    try:
        default = parse_rule(a.rule)
        rules = [r.strip() for r in a.rules.split(",") if r.strip()]
        # the prior lists the rules fold in: "" for --prior's (or this GPU model's), else /prior=LIST's
        lists = sorted({r.prior_list for r in ([parse_rule(x) for x in rules] or [default]) if r.prior})
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    draws = None  # drawn before the policy is built: an exhausted grid stops here, at once
    if a.holdout_shapes is not None:
        if a.holdout_seed is not None:
            print("--holdout-shapes and --holdout-seed: one source of held-out shapes, not both", file=sys.stderr)
            return 2
        try:
            holdout = listed_holdout(a.folder, a.holdout_shapes, a.holdout_exclude)
        except (OSError, ValueError) as e:
            print(f"--holdout-shapes {a.holdout_shapes}: {e}", file=sys.stderr)
            return 2
    elif a.holdout_seed is not None:
        try:
            seeds = [int(x) for x in a.holdout_seed.split(",") if x.strip()]
        except ValueError:
            print(f"--holdout-seed {a.holdout_seed!r}: an integer or a comma list of integers", file=sys.stderr)
            return 2
        draws = fresh_draws(a.folder, seeds, a.holdout_exclude)
        holdout = [s for shapes in draws.values() for s in shapes]
        for line in short_draws(draws, a.folder):
            print(line, file=sys.stderr)
        if not holdout:
            print(f"--holdout-seed {a.holdout_seed}: no grid shape is left that neither the search nor "
                  f"{a.holdout_exclude or 'its holdout'} has: a fresh grid draw is no longer possible "
                  "(the twenty-first session measured the grid's last 21)", file=sys.stderr)
            return 2
    else:
        holdout = read_shapes(a.folder, "holdout.txt")
    pol, db = policy_for(a.folder, device=a.device, plugins=a.plugin)
    line, finished = provenance(a.folder, db)
    print(line, file=sys.stderr)
    if a.rules and not finished and not a.unfinished:
        print(f"{a.folder}: the search is not finished, so its picks are not the finished policy's; "
              "pass --unfinished to measure them anyway", file=sys.stderr)
        return 2
    prior_pols = {}  # prior list ("" the default) -> the policy with it folded in
    gpu = gpu_of(db)
    for plist in lists:
        try:
            specs = [Path(plist)] if plist else a.prior or prior_for_gpu(gpu)
            if specs:
                prior_pols[plist] = with_prior_policy(pol, specs, holdout, gpu=gpu, leave_out=a.leave_out)
            else:  # as search --first-pick-prior auto does there
                print(f"/prior: no committed prior list for {gpu or 'this search'}'s GPU model: "
                      "picking without one (--prior names one)", file=sys.stderr)
                prior_pols[plist] = pol
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
    if a.rules:
        return side_by_side(pol, db, holdout, rules, a, draws, prior_pols)
    if default.prior:
        pol = prior_pols[default.prior_list]
    picker = default.picker(pol)
    df = db.df
    search_id = search_id_of(db)
    pick_id = picker.id(search_id, db.search_totals(search_id)["candidates"])
    done = set(df[(df["search_id"] == pick_id) & ~df["is_baseline"]]["shape"]) & {s.name for s in holdout}
    picks = []
    print(f"{pick_id}: {len(done)} of {len(holdout)} held-out shapes measured")
    for shape in holdout:
        if shape.name in done and not a.all:
            continue
        cand = picker.pick(shape, db, gpu)
        mean, _ = pol.predict(shape, [cand])
        picks.append(cand)
        print(f"{shape.name:>17}  predicted {mean.max():+.3f}  {'measured ' if shape.name in done else ''}{cand.spec}")
    if a.prebuild:
        todo = [c.spec for c in picks if c.family != "triton"]
        print(f"built {len(todo)} CUDA picks in {auto_prebuild(todo):.0f} s")
    return 0


class RuleSpec(NamedTuple):
    rule: str  # FirstPickSettings.rule
    min_shapes: int  # min_shapes (/mN; 2 without)
    prior: bool  # /prior: the learner with the prior folded in
    near: int = 0  # min_near (/nK; 0 without)
    prior_list: str = ""  # /prior=LIST: that prior list (or Parquet) instead of --prior's
    decline_one_slice: bool = False  # /d
    decline_partial_cluster: bool = False  # /c

    @property
    def settings(self):
        from kernels_search.search.settings import FirstPickSettings

        return FirstPickSettings(rule=self.rule, min_shapes=self.min_shapes, min_near=self.near,
                                 decline_one_slice=self.decline_one_slice,
                                 decline_partial_cluster=self.decline_partial_cluster)

    def picker(self, learner):
        """The first pick of ``learner`` under this rule (the prior is the caller's choice of learner)."""
        from kernels_search.search.first_pick import FirstPick

        return FirstPick(learner, self.settings)


def parse_rule(spec: str) -> RuleSpec:
    """``RULE[/mN][/nK][/d][/c][/prior[=LIST]]`` -> ``RuleSpec``; a named error otherwise. ``LIST`` (a
    path, slashes allowed: it ends the spec) names the prior for this rule alone, so one call can
    measure the same rule with two priors side by side. ``/d`` declines one-slice split-K
    (``FirstPickSettings.decline_one_slice``), ``/c`` partly empty clusters
    (``FirstPickSettings.decline_partial_cluster``)."""
    from kernels_search.search.first_pick import RULES as FIRST_PICK_RULES
    from lab import first_pick_rules  # noqa: F401  (registers the lab's rules)

    import re

    got = re.fullmatch(r"([a-z]+)(?:/m(\d+))?(?:/n(\d+))?(/d)?(/c)?(/prior(?:=([^,\s]+))?)?", spec.strip())
    rule, need, near, decline, cluster, prior, plist = got.groups() if got else ("", None, None, None, None, None, None)
    if rule not in FIRST_PICK_RULES or any(x is not None and int(x) < 1 for x in (need, near)):
        raise ValueError(f"rule {spec!r}: RULE[/mN][/nK][/d][/c][/prior[=LIST]] (e.g. cautious/m10/n2/prior), RULE one of "
                         f"{', '.join(FIRST_PICK_RULES)}, N and K >= 1")
    return RuleSpec(rule, int(need) if need else 2, bool(prior), int(near) if near else 0, plist or "", bool(decline),
                    bool(cluster))


def with_prior_policy(pol, specs, holdout, gpu: str | None = None, leave_out: bool = False):
    """A copy of ``pol`` that has also learnt from the prior files ``specs`` names
    (``search.prior``; with ``gpu``, only their rows of that GPU model); ValueError when a
    held-out shape is among the prior's shapes, unless ``leave_out``: then their rows are dropped."""
    from kernels_search.search.prior import prior_paths, prior_shapes, with_prior

    paths = prior_paths(specs)
    stale = sorted({s.name for s in holdout} & prior_shapes(paths))
    if stale and not leave_out:
        raise ValueError(f"held-out shapes {', '.join(stale)} are in the prior: they are not fresh "
                         "(draw with --holdout-exclude lab/seen_shapes.txt, or "
                         "--leave-out to drop their rows)")
    out, folded = with_prior(pol, paths, exclude_shapes=stale, gpu=gpu)
    print(folded.line() + (f"; {len(stale)} held-out shapes' rows left out" if stale else ""), file=sys.stderr)
    return out


def picks_by_rule(pol, db, holdout, rules, prior_pols=None, top: int = 1) -> dict[str, dict[str, str]]:
    """rule spec (``parse_rule``) -> {held-out shape: the spec that rule picks}; ``/prior`` rules
    pick with ``prior_pols[""]`` and ``/prior=LIST`` rules with ``prior_pols[LIST]``
    (``with_prior_policy``), the others with ``pol``. With ``top`` K > 1 each rule also has
    columns ``RULE#2`` .. ``RULE#K``: its runners-up on each shape (``FirstPick.ranking``;
    a shape with fewer candidates is absent from the later columns), for a study of its near misses."""
    gpu = gpu_of(db)
    out: dict[str, dict[str, str]] = {}
    for spec in rules:
        r = parse_rule(spec)
        p = (prior_pols or {}).get(r.prior_list) if r.prior else pol
        if p is None:
            raise ValueError(f"rule {spec!r} needs the policy with the prior{' ' + r.prior_list if r.prior_list else ''}")
        fp = r.picker(p)
        ranked = {s.name: [c.spec for c in fp.ranking(s, db, gpu, top=top)] for s in holdout}
        for i in range(top):
            out[spec if i == 0 else f"{spec}#{i + 1}"] = {nm: got[i] for nm, got in ranked.items() if len(got) > i}
    return out


def best_of_layouts(results):
    """Each (shape, method)'s device time in its faster layout, over one compare's correct rows
    (status ok, a time measured): the time every ratio to the reference is taken from."""
    ok = results[(results["status"] == "ok") & results["device_us_median"].notna()]
    return ok.groupby(["shape", "method"])["device_us_median"].min()


def speedups(results, picks: dict[str, str], reference: str = "cublaslt-autotune") -> dict[str, float]:
    """{shape: reference's best-of-layouts device time / the pick's} from one compare's rows;
    exp(-1) where the pick has no correct row (its search reward)."""
    import math

    best = best_of_layouts(results)
    out = {}
    for shape, spec in picks.items():
        ref, mine = best.get((shape, reference)), best.get((shape, spec))
        if ref is None:
            raise ValueError(f"{reference} has no correct row for {shape}")
        out[shape] = ref / mine if mine else math.exp(-1)
    return out


def finished_shapes(results, picks: dict[str, dict[str, str]], reference: str = "cublaslt-autotune") -> set[str]:
    """The shapes where the compare has rows (of any status) of ``reference`` and of every rule's
    pick, in every layout it measured: a shape it never reached, or stopped in, is not measured,
    which is not a failed pick."""
    have = set(zip(results["shape"], results["method"], results["layout"]))
    layouts = set(results["layout"])
    shapes = set.intersection(*(set(by_shape) for by_shape in picks.values()))
    return {s for s in shapes if all((s, m, lay) in have for lay in layouts
                                     for m in [reference, *(by_shape[s] for by_shape in picks.values())])}


def read_picks(path: Path, holdout) -> dict[str, str]:
    """{held-out shape: spec} from a picks file (``shape<TAB>spec`` a line; ``#`` comments), e.g. an
    earlier policy's picks computed before a change to the code; ValueError naming a held-out shape
    the file lacks."""
    picks = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            shape, sep, spec = line.partition("\t")
            if not sep:
                raise ValueError(f"{path}: expected shape<TAB>spec, got {line!r}")
            picks[shape.strip()] = spec.strip()
    missing = [s.name for s in holdout if s.name not in picks]
    if missing:
        raise ValueError(f"{path}: no pick for held-out shapes {', '.join(missing)}")
    return {s.name: picks[s.name] for s in holdout}


def write_plan(path: Path, holdout, picks: dict[str, dict[str, str]], note: str = "",
               differing: bool = False) -> None:
    """A ``compare --plan`` file (harness/plan.py): each held-out shape with the distinct picks
    every rule (or picks file) made on it, in rule order. The reference goes on every shape through
    ``--methods``. Measured so, the report has each rule's pick and the reference on each shape,
    all it reads, in a fifth of the cross product's time. ``differing``: only the shapes with more
    than one distinct pick (a paired test's; the header says how many of the held-out shapes)."""
    rows = []
    for s in holdout:
        specs = dict.fromkeys(by_shape[s.name] for by_shape in picks.values() if s.name in by_shape)
        if len(specs) > 1 or not differing:
            rows.append(f"{s.name} {','.join(specs)}")
    head = (f"# {len(rows)} of {len(holdout)} held-out shapes, those where the rules pick differently"
            if differing else f"# {len(holdout)} held-out shapes")
    lines = [head + f", each with its picks under {len(picks)} rule(s): "
             + ", ".join(picks) + (f" ({note})" if note else "")] + rows
    path.write_text("\n".join(lines) + "\n")


def side_by_side(pol, db, holdout, rules, a, draws=None, prior_pols=None) -> int:
    import pandas as pd

    picks = picks_by_rule(pol, db, holdout, rules, prior_pols, top=a.top)
    for path in a.also_picks:
        try:
            picks[path.name] = read_picks(path, holdout)
        except (OSError, ValueError) as e:
            print(e, file=sys.stderr)
            return 2
    rules = list(picks)
    if a.compare_args:
        methods = sorted({spec for by_shape in picks.values() for spec in by_shape.values()})
        print(f"PICK_SHAPES={','.join(s.name for s in holdout)}")
        print(f"PICK_METHODS={','.join(methods)}")
        if a.plan_out:
            write_plan(a.plan_out, holdout, picks,
                       "--leave-out: their rows left out of the prior, not fresh" if a.leave_out else "",
                       differing=a.differing)
        if a.prebuild:  # compiled in parallel now, so the compare's prepares only load them
            from kernels_search.search.loop import auto_prebuild

            print(f"built the CUDA ones of {len(methods)} picks in {auto_prebuild(methods):.0f} s")
        return 0
    if a.report is None:
        print("--rules needs --compare-args or --report", file=sys.stderr)
        return 2
    if not a.report.exists():
        print(f"{a.report}: no such results file (the compare call finished no shape?)", file=sys.stderr)
        return 2
    results = pd.read_parquet(a.report)
    done = finished_shapes(results, picks)
    left = [s.name for s in holdout if s.name not in done]
    if not done:
        print(f"{a.report}: no held-out shape has rows of the reference and every pick", file=sys.stderr)
        return 2
    if left:  # a compare stopped by its time limit: what it finished still counts, named as such
        print(f"{len(left)} of {len(holdout)} held-out shapes not finished by the compare, left out: {', '.join(left)}")
        holdout = [s for s in holdout if s.name in done]
        picks = {r: {s: m for s, m in by_shape.items() if s in done} for r, by_shape in picks.items()}
    sp = {rule: speedups(results, picks[rule]) for rule in rules}
    print("| shape | " + " | ".join(rules) + " |")
    print("|---|" + "---|" * len(rules))
    for s in holdout:
        print(f"| {s.name} | " + " | ".join(f"{sp[r][s.name]:.3f}x" for r in rules) + " |")
    print("\n".join(report_lines(sp, draws)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
