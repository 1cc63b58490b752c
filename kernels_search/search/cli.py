"""The ``hgemm-bench search`` command, ready to mount: ``register(app)`` adds it to a Typer app.

Flags map 1:1 to ``kernels_search.search.run.search_main`` arguments. Bad input is one error
line and exit code 2, as in ``compare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def search(
    shapes: List[str] = typer.Option(["smoke"], "--shapes", "-s",
                                     help="M_N_K list, a file, or a named set (cuda-l2, smoke, square)."),
    sample: int = typer.Option(0, help="Search N shapes sampled from --shapes' grid (harness.shapes.sample_grid; "
                                       "cuda-l2 only: stratified by tile count and K). 0: every shape given."),
    budget: str = typer.Option("20m", help="Total budget (20m, 90s, 1h). Rerunning with the same --out resumes "
                                           "and counts what earlier runs spent."),
    run_limit: Optional[str] = typer.Option(None, "--run-limit",
                                            help="Stop this invocation after this long (8m, 500s) even with budget "
                                                 "left: checkpoint, library and summary are written and rerunning "
                                                 "the same command resumes; --holdout runs in the run that finishes "
                                                 "the budget."),
    out: Path = typer.Option(Path("results/search"), "--out", "-o",
                             help="Search folder: kernel DB, policy checkpoint, library, summary."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    layouts: str = typer.Option("nn,tn", help="B layouts every candidate is measured in."),
    batch: int = typer.Option(4, help="Candidates per shape per round (per proposer)."),
    families: str = typer.Option("", help="Comma list of families to search (default: all available)."),
    holdout: int = typer.Option(0, help="Then measure the policy's first pick on N grid shapes the search never "
                                        "measured (one evaluation each) and report the geomean vs cuBLASLt autotune."),
    holdout_seed: Optional[int] = typer.Option(None, help="Seed of the held-out draw (default: --seed + 1)."),
    holdout_exclude: str = typer.Option("", help="Shapes never to hold out (a list or a shape file): shapes "
                                                 "measured before, so that the first pick is tested on shapes "
                                                 "nobody has looked at (kernels_search/search/seen_shapes.txt)."),
    library: Optional[Path] = typer.Option(None, help="Also export the library here (e.g. "
                                                      "kernels_search/library/library.json, what `--methods library` "
                                                      "serves by default)."),
    min_speedup: float = typer.Option(1.02, help="Export a kernel only if its paired speedup over the same-layout "
                                                 "baseline is at least this; else the baseline serves (labelled)."),
    time_budget: float = typer.Option(2.0, "--time-budget", help="Timing budget per shape call, seconds."),
    ci_target: float = typer.Option(0.02, help="Timing CI target per call."),
    epsilon: float = typer.Option(0.05, help="Exploration floor: share of picks drawn uniformly."),
    explore: float = typer.Option(1.0, help="Thompson draw spread (0 = greedy)."),
    compile_penalty: float = typer.Option(0.02, help="Reward units a new binary costs in the acquisition."),
    max_new_builds: Optional[int] = typer.Option(None, help="New binaries per shape batch (default 2 on CUDA)."),
    lookahead: Optional[int] = typer.Option(None, help="Shapes whose candidates compile ahead (default 8 on CUDA)."),
    max_rounds: Optional[int] = typer.Option(None, help="Stop after this many rounds."),
    design: bool = typer.Option(True, "--design/--no-design",
                                help="Measure every family preset on a shape before the policy picks (initial design)."),
    first_pick_rule: str = typer.Option("ranked", help="How --holdout picks: ranked (the default: a LightGBM "
                                                    "LambdaRank model of which config wins on a shape, learnt "
                                                    "from every measured shape), model (the linear model's "
                                                    "argmax), neighbours (the config best on the nearest searched "
                                                    "shapes), cautious (the model's mean minus one posterior "
                                                    "std, a lower bound), paired (configs compared on the same "
                                                    "nearby shapes, shrunk towards cautious) or geopaired."),
    first_pick_min_shapes: int = typer.Option(10, min=1, help="--holdout picks only configs measured correctly on at least "
                                                              "this many other shapes (or on all of them, in a search of "
                                                              "fewer); on a 40-shape search, 10 is about the presets, "
                                                              "which every searched shape measures."),
    first_pick_min_near: int = typer.Option(2, min=0, help="--holdout picks, among those, only configs measured on at "
                                                            "least this many shapes near the held-out one (log2 M, N, K "
                                                            "within 2.0) while any config is; 0 = off."),
    first_pick_decline_one_slice: bool = typer.Option(True, "--first-pick-decline-one-slice/--first-pick-keep-one-slice",
                                                      help="--holdout leaves out configs whose one-wave split-K slice count "
                                                           "is a single slice on the held-out shape (the default since the "
                                                           "twenty-second session's off-grid test)."),
    first_pick_decline_partial_cluster: bool = typer.Option(
        True, "--first-pick-decline-partial-cluster/--first-pick-keep-partial-cluster",
        help="--holdout leaves out clustered configs whose tile count leaves a cluster partly empty on the "
             "held-out shape (the default since the twenty-fifth session's off-grid test)."),
    first_pick_prior: List[str] = typer.Option(["auto"], "--first-pick-prior",
                                               help="Compare Parquets (or .txt lists) that only the --holdout pick "
                                                    "learns from, on top of the finished search: auto (this GPU "
                                                    "model's committed list, e.g. kernels_search/search/"
                                                    "prior_h200.txt; none elsewhere) or none."),
    prior: List[Path] = typer.Option([], "--prior", help="Compare Parquets (or .txt lists of them, e.g. "
                                     "kernels_search/search/prior_h200.txt) the policy learns from before it "
                                     "searches; rows of held-out shapes are left out."),
    local_share: float = typer.Option(0.75, help="Share of each batch (after the design) spent on one-knob "
                                                 "mutations of the shape's two best configs; the rest is "
                                                 "picked from the whole pool."),
    seed: int = typer.Option(0, help="Policy and sampling seed."),
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
    """Search kernels per shape (knob-level policy), export the library, print a summary."""
    from rich.console import Console

    from harness import env as envmod
    from harness.shapes import ShapeError, parse_shapes, sample_grid
    from kernels_search.search.run import holdout_shapes, parse_duration, search_main

    console, err = Console(), Console(stderr=True)

    def fail(msg: str) -> None:
        err.print(f"[bold red]error:[/] {msg}")
        raise typer.Exit(2)

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
    lays = [x.strip() for x in layouts.split(",") if x.strip()]
    if not lays or any(x not in ("nn", "tn") for x in lays):
        fail(f"unknown layout(s) in {layouts!r}: use nn and/or tn")
    if batch < 1 or time_budget <= 0 or ci_target <= 0 or not 0 <= epsilon <= 1:
        fail("--batch >= 1, --time-budget > 0, --ci-target > 0, 0 <= --epsilon <= 1")
    try:
        dev = envmod.resolve_device(device)
    except (envmod.NoGPUError, ValueError) as e:
        fail(str(e))
    try:
        seen = parse_shapes(holdout_exclude) if holdout_exclude else []
    except ShapeError as e:
        fail(f"--holdout-exclude: {e}")
    held = holdout_shapes(shape_list, holdout, seed + 1 if holdout_seed is None else holdout_seed, exclude=seen) \
        if holdout else []
    kept = out / "holdout.txt"
    if holdout and len(held) < holdout and not kept.exists():
        # the cuda-l2 grid has 1,000 shapes, and this project's seen list holds all of them since the
        # twenty-first session: say so rather than test the first pick on fewer shapes unannounced
        console.print(f"--holdout {holdout}: only {len(held)} grid shapes are outside the searched shapes"
                      f"{' and --holdout-exclude' if seen else ''}; the held-out check has {len(held)}")
    if held and kept.exists():
        # a resumed search keeps the held-out shapes it started with (written by every run), even
        # if the exclusion list has grown since: its first pick is tested on one fixed set
        before = parse_shapes(str(kept))
        if before != held:
            console.print(f"keeping the {len(before)} held-out shapes of {kept} (this command's draw differs)")
        held = before
    try:
        from kernels_search.search.prior import PriorError, prior_paths

        prior_files = prior_paths(prior)
    except PriorError as e:
        fail(f"--prior: {e}")
    pick_prior = [x.strip() for x in first_pick_prior if x.strip()]
    if pick_prior in (["auto"], ["none"]):
        pick_prior = "auto" if pick_prior == ["auto"] else []
    else:
        try:
            pick_prior = prior_paths(pick_prior)
        except PriorError as e:
            fail(f"--first-pick-prior: {e} (or auto, or none)")
    proposers, plugins = [], list(plugin)
    if llm:
        try:
            proposers.append(_llm_proposer(out, llm_backend, llm_url, llm_model, llm_api_key, llm_max_tokens, dev))
        except (ValueError, ImportError) as e:
            fail(f"--llm: {e}")
        plugins.append("kernels_search.llm.plugin")
    try:
        search_main(shape_list, budget, out, device=dev, batch=batch, layouts=lays,
                    families=[f.strip() for f in families.split(",") if f.strip()] or None, seed=seed,
                    epsilon=epsilon, explore=explore, compile_penalty=compile_penalty, timing_budget_s=time_budget,
                    ci_target=ci_target, plugins=plugins, proposers=proposers, library=library, min_speedup=min_speedup, holdout=held,
                    max_rounds=max_rounds, anticheat=not no_anticheat, lookahead=lookahead,
                    max_new_builds=max_new_builds, run_limit_s=run_limit, design=design,
                    first_pick_rule=first_pick_rule, first_pick_min_shapes=first_pick_min_shapes,
                    first_pick_min_near=first_pick_min_near, first_pick_decline_one_slice=first_pick_decline_one_slice,
                    first_pick_decline_partial_cluster=first_pick_decline_partial_cluster, first_pick_prior=pick_prior, local_share=local_share,
                    prior=prior_files, print_fn=lambda line: console.print(line, markup=False), console=console)
    except ImportError as e:
        fail(f"--plugin: {e}")
    except ValueError as e:
        fail(str(e))
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted:[/] everything measured is in {out}; rerun the same command to resume")
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
