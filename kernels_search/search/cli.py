"""The ``hgemm-bench search`` command, ready to mount: ``register(app)`` adds it to a Typer app.

Option defaults are the settings' own (``search.settings``); the command groups its options into
one ``SearchSettings`` and hands it to ``run.search_main``, or with ``--dry-run`` ranks the first
pick's candidates for each shape without a GPU (``picks.dry_run``). Bad input is one error line
and exit code 2, as in ``compare``. Nothing heavy is imported before the command runs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from kernels_search.search.settings import FirstPickSettings as FP
from kernels_search.search.settings import LearnerSettings as LS
from kernels_search.search.settings import SearchSettings as SS


def search(
    shapes: List[str] = typer.Option(["smoke"], "--shapes", "-s",
                                     help="M_N_K list, a file, or a named set (cuda-l2, smoke, square)."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Measure nothing, touch no GPU: for each shape, print the configs the first pick "
                                      "ranks first (the first is what it would measure), their scores and the "
                                      "evidence each rests on, from the packaged search and evidence."),
    sample: int = typer.Option(0, help="Search N shapes sampled from --shapes' grid (harness.shapes.sample_grid; "
                                       "cuda-l2 only: stratified by tile count and K). 0: every shape given."),
    budget: str = typer.Option(SS.budget, help="Total budget (20m, 90s, 1h). Rerunning with the same --out resumes "
                                               "and counts what earlier runs spent."),
    run_limit: Optional[str] = typer.Option(SS.run_limit, "--run-limit",
                                            help="Stop this invocation after this long (8m, 500s) even with budget "
                                                 "left: checkpoint, library and summary are written and rerunning "
                                                 "the same command resumes; --holdout runs in the run that finishes "
                                                 "the budget."),
    out: Path = typer.Option(Path("results/search"), "--out", "-o",
                             help="Search folder: kernel DB, learner checkpoint, library, summary."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    layouts: str = typer.Option(",".join(SS.layouts), help="B layouts every candidate is measured in."),
    batch: int = typer.Option(SS.batch, help="Candidates per shape per round (per proposer)."),
    families: str = typer.Option("", help="Comma list of families to search (default: all available)."),
    holdout: int = typer.Option(0, help="Then measure the first pick on N grid shapes the search never measured "
                                        "(one evaluation each) and report the geomean vs cuBLASLt autotune."),
    holdout_seed: Optional[int] = typer.Option(None, help="Seed of the held-out draw (default: --seed + 1)."),
    holdout_exclude: str = typer.Option("", help="Shapes never to hold out (a list, a shape file or a named set): "
                                                 "shapes measured before, so that the first pick is tested on "
                                                 "shapes nobody has looked at."),
    library: Optional[Path] = typer.Option(SS.library, help="Also export the library here (e.g. "
                                                            "kernels_search/library/library.json, what `--methods "
                                                            "library` serves by default)."),
    min_speedup: float = typer.Option(SS.min_speedup, help="Export a kernel only if its paired speedup over the "
                                                           "same-layout baseline is at least this; else the baseline "
                                                           "serves (labelled)."),
    time_budget: float = typer.Option(SS.timing_budget_s, "--time-budget",
                                      help="Timing budget per shape call, seconds."),
    ci_target: float = typer.Option(SS.ci_target, help="Timing CI target per call."),
    epsilon: float = typer.Option(LS.epsilon, help="Exploration floor: share of picks drawn uniformly."),
    explore: float = typer.Option(LS.explore, help="Thompson draw spread (0 = greedy)."),
    compile_penalty: float = typer.Option(LS.compile_penalty,
                                          help="Reward units a new binary costs in the acquisition."),
    max_new_builds: Optional[int] = typer.Option(LS.max_new_builds,
                                                 help="New binaries per shape batch (default 2 on CUDA)."),
    lookahead: Optional[int] = typer.Option(SS.lookahead,
                                            help="Shapes whose candidates compile ahead (default 8 on CUDA)."),
    max_rounds: Optional[int] = typer.Option(SS.max_rounds, help="Stop after this many rounds."),
    design: bool = typer.Option(LS.design, "--design/--no-design",
                                help="Measure every family preset on a shape before the learner picks "
                                     "(initial design)."),
    first_pick_rule: str = typer.Option(FP.rule, help="How the first pick orders its candidates: ranked (a LightGBM "
                                                      "LambdaRank model of which config wins on a shape, learnt from "
                                                      "every measured shape) or paired (configs compared on the same "
                                                      "nearby shapes)."),
    first_pick_min_shapes: int = typer.Option(FP.min_shapes, min=1, help="The first pick takes only configs measured "
                                                                         "correctly on at least this many other shapes "
                                                                         "(or on all of them, in a search of fewer)."),
    first_pick_min_near: int = typer.Option(FP.min_near, min=0, help="... and among those only configs measured on at "
                                                                     "least this many shapes near the shape "
                                                                     "(log2 M, N, K "
                                                                     "within 2.0) while any config is; 0 = off."),
    first_pick_decline_one_slice: bool = typer.Option(FP.decline_one_slice,
                                                      "--first-pick-decline-one-slice/--first-pick-keep-one-slice",
                                                      help="Leave out configs whose one-wave split-K slice count is a "
                                                           "single slice on the shape."),
    first_pick_decline_partial_cluster: bool = typer.Option(
        FP.decline_partial_cluster, "--first-pick-decline-partial-cluster/--first-pick-keep-partial-cluster",
        help="Leave out clustered configs whose tile count leaves a cluster partly empty on the shape."),
    first_pick_prior: List[str] = typer.Option([FP.prior], "--first-pick-prior",
                                               help="What the first pick learns from on top of the search: auto (this "
                                                    "GPU model's packaged evidence, kernels_search/data; none "
                                                    "elsewhere), none, or compare Parquets (or .txt lists of them)."),
    prior: List[Path] = typer.Option([], "--prior", help="Compare Parquets (or .txt lists of them) the learner learns "
                                                         "from before it searches; rows of held-out shapes "
                                                         "are left out."),
    local_share: float = typer.Option(LS.local_share, help="Share of each batch (after the design) spent on one-knob "
                                                           "mutations of the shape's two best configs; the rest is "
                                                           "picked from the whole pool."),
    seed: int = typer.Option(SS.seed, help="Learner and sampling seed."),
    plugin: List[str] = typer.Option([], "--plugin", help="Python module to import (more methods / families)."),
    no_anticheat: bool = typer.Option(False, "--no-anticheat", help="Skip the anti-cheat checks."),
    llm: bool = typer.Option(False, "--llm", help="Also let an LLM write kernels (contrastive prompts; trajectories "
                                                  "in OUT/llm-trajectories for GRPO)."),
    llm_backend: str = typer.Option("openai", help="openai (any OpenAI-compatible server, e.g. `vllm serve`), "
                                                   "vllm (offline engine) or transformers (in process)."),
    llm_url: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1."),
    llm_model: Optional[str] = typer.Option(None, help="Model name (server) or path (vllm, transformers)."),
    llm_api_key: Optional[str] = typer.Option(None, help="API key (default: $OPENAI_API_KEY)."),
    llm_max_tokens: int = typer.Option(8192, help="Completion length limit."),
):
    """Search kernels per shape (knob-level learner), export the library, print a summary."""
    from harness.console import console, echo, err_console, fail
    from harness.shapes import ShapeError, parse_shapes, sample_grid
    from kernels_search.search.run import parse_duration

    try:
        shape_list = parse_shapes(shapes)
        parse_duration(budget)
        if run_limit is not None and parse_duration(run_limit) <= 0:
            raise ValueError("--run-limit must be > 0")
    except (ShapeError, ValueError) as e:
        fail(str(e))
    if sample:
        if [s.name for s in parse_shapes("cuda-l2")] != [s.name for s in shape_list]:
            fail("--sample draws from the cuda-l2 grid: use --shapes cuda-l2 --sample N")
        shape_list = sample_grid(sample, seed)
    from kernels_search.search.first_pick import RULES
    from kernels_search.search.prior import PriorError, prior_paths

    if first_pick_rule not in RULES:
        fail(f"--first-pick-rule {first_pick_rule!r}: one of {', '.join(RULES)}")
    pick_prior = [x.strip() for x in first_pick_prior if x.strip()]
    if pick_prior in (["auto"], ["none"]):
        pick_prior = pick_prior[0]
    else:
        try:
            pick_prior = tuple(prior_paths(pick_prior))
        except PriorError as e:
            fail(f"--first-pick-prior: {e} (or auto, or none)")
    try:
        pick = FP(rule=first_pick_rule, min_shapes=first_pick_min_shapes, min_near=first_pick_min_near,
                  decline_one_slice=first_pick_decline_one_slice,
                  decline_partial_cluster=first_pick_decline_partial_cluster, prior=pick_prior)
    except ValueError as e:
        fail(str(e))
    if dry_run:
        from kernels_search.search.picks import dry_run as rank_first_picks

        rank_first_picks(shape_list, pick, print_fn=echo)
        return
    from harness import env as envmod
    from harness.paths import OutputPathError, check_output_dir
    from kernels_search.search.run import holdout_shapes, search_main

    try:
        check_output_dir(out)
    except OutputPathError as e:
        fail(f"--out: {e}")

    try:
        dev = envmod.resolve_device(device)
    except (envmod.NoGPUError, ValueError) as e:
        fail(str(e))
    try:
        learner = LS(epsilon=epsilon, explore=explore, compile_penalty=compile_penalty, max_new_builds=max_new_builds,
                     design=design, local_share=local_share)
        settings = SS(budget=budget, run_limit=run_limit, device=dev, batch=batch,
                      layouts=tuple(x.strip() for x in layouts.split(",") if x.strip()),
                      families=tuple(f.strip() for f in families.split(",") if f.strip()) or None, seed=seed,
                      timing_budget_s=time_budget, ci_target=ci_target, anticheat=not no_anticheat,
                      min_speedup=min_speedup, library=library, max_rounds=max_rounds, lookahead=lookahead,
                      plugins=tuple(plugin), prior=tuple(prior_paths(prior)), learner=learner, first_pick=pick)
    except PriorError as e:
        fail(f"--prior: {e}")
    except ValueError as e:
        fail(str(e))
    try:
        seen = parse_shapes(holdout_exclude) if holdout_exclude else []
    except ShapeError as e:
        fail(f"--holdout-exclude: {e}")
    held = holdout_shapes(shape_list, holdout, seed + 1 if holdout_seed is None else holdout_seed, exclude=seen) \
        if holdout else []
    kept = out / "holdout.txt"
    if holdout and len(held) < holdout and not kept.exists():
        # the cuda-l2 grid has 1,000 shapes: say so rather than test the first pick on fewer shapes unannounced
        console.print(f"--holdout {holdout}: only {len(held)} grid shapes are outside the searched shapes"
                      f"{' and --holdout-exclude' if seen else ''}; the held-out check has {len(held)}")
    if held and kept.exists():
        # a resumed search keeps the held-out shapes it started with (written by every run), even
        # if the exclusion list has grown since: its first pick is tested on one fixed set
        before = parse_shapes(str(kept))
        if before != held:
            echo(f"keeping the {len(before)} held-out shapes of {kept} (this command's draw differs)")
        held = before
    proposers = []
    if llm:
        try:
            proposers.append(_llm_proposer(out, llm_backend, llm_url, llm_model, llm_api_key, llm_max_tokens, dev))
        except (ValueError, ImportError) as e:
            fail(f"--llm: {e}")
        settings = replace(settings, plugins=(*settings.plugins, "kernels_search.llm.plugin"))
    try:
        search_main(shape_list, out, settings, holdout=held, proposers=proposers, print_fn=echo, console=console)
    except ImportError as e:
        fail(f"--plugin: {e}")
    except ValueError as e:
        fail(str(e))
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted:[/] everything measured is in {escape(str(out))}; "
                          "rerun the same command to resume")
        raise typer.Exit(130)


def _llm_proposer(out: Path, backend: str, url, model, api_key, max_tokens: int, device: str):
    """The opt-in LLM proposer; its kernels live in OUT/llm-kernels, which the evaluator's worker
    finds through $HGEMM_LLM_KERNELS (set before the worker starts)."""
    import os

    os.environ["HGEMM_LLM_KERNELS"] = str(Path(out) / "llm-kernels")
    import kernels_search.llm.plugin  # noqa: F401  (registers llm:<hash> specs here too)
    from kernels_search.llm.backends import make_backend
    from kernels_search.llm.kernels import KernelStore
    from kernels_search.llm.proposer import LLMConfig, LLMProposer

    return LLMProposer(make_backend(backend, url=url, model=model, api_key=api_key),
                       Path(out) / "llm-trajectories", KernelStore(),
                       LLMConfig(max_tokens=max_tokens, precompile=device == "cuda"))


def register(app: typer.Typer) -> None:
    """Mount ``search`` on the ``hgemm-bench`` app."""
    app.command("search")(search)
