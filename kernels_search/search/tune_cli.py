"""The ``hgemm-bench tune`` command, ready to mount: ``register(app)`` adds it to a Typer app.

Option defaults are ``TuneSettings``' own (``search.settings``); the command groups its options into
one ``TuneSettings`` and hands it to ``tune.tune_main``, or with ``--dry-run`` prints the ranked
candidates per shape without a GPU (``tune.plan``). ``--shapes`` takes what ``compare`` takes
(``harness.shapes.resolve_shapes``: lists, files, named sets, ``model:`` configs). Bad input is one
error line and exit code 2. Nothing heavy is imported before the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from kernels_search.search.settings import TuneSettings as TS


def tune(
    shapes: List[str] = typer.Option(..., "--shapes", "-s",
                                     help="What compare --shapes takes: M_N_K list, a file, a named set, or "
                                          "model:CONFIG@batch=1,16@tp=2 (a model's GEMMs run in the tn layout: "
                                          "add --layouts tn)."),
    per_shape: str = typer.Option(TS.per_shape, "--per-shape", help="Wall-clock budget per shape (60s, 2m)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Measure nothing, touch no GPU: per shape, the ranked "
                                                          "candidates it would measure, in which call, whether "
                                                          "their binary is built, and why each is there."),
    top: Optional[int] = typer.Option(TS.top, min=1, help="Ranked candidates per shape: the most one shape measures "
                                                          "(default: the whole ranked pool; the budget ends a shape)."),
    batch: int = typer.Option(TS.batch, min=1, help="Candidates per paired call with the baselines."),
    confirm: int = typer.Option(TS.confirm, min=0, help="Configs per layout that beat the baseline and are "
                                "measured again in a second paired call; an entry needs both calls and counts "
                                "by the worse (0: one call decides)."),
    library: Optional[Path] = typer.Option(TS.library, help="The library to merge the winners into (default: "
                                                            "the user's, $XDG_DATA_HOME/hgemm-bench/library.json, "
                                                            "which the library method reads first)."),
    out: Path = typer.Option(Path("results/tune"), "--out", "-o", help="Folder of the kernel DB (rerunning resumes)."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    layouts: str = typer.Option(",".join(TS.layouts), help="B layouts every candidate is measured in."),
    families: str = typer.Option("", help="Comma list of families the pool takes (default: all)."),
    min_speedup: float = typer.Option(TS.min_speedup, help="A kernel enters the library only if its paired speedup "
                                                           "over the same-layout baseline is at least this."),
    time_budget: float = typer.Option(TS.timing_budget_s, "--time-budget", help="Timing budget per call, seconds."),
    ranker: Optional[Path] = typer.Option(TS.ranker, help="Search folder whose learner ranks (default: the "
                                                          "packaged search of record)."),
    plugin: List[str] = typer.Option([], "--plugin", help="Python module to import (more methods / families)."),
):
    """Tune kernels per shape from the pool and merge the winners into the user's library."""
    from dataclasses import replace

    from harness.console import echo, err_console, fail
    from harness.shapes import ShapeError, resolve_shapes
    from kernels_search.search.run import parse_duration
    from kernels_search.search.settings import PoolSettings

    try:
        shape_list = resolve_shapes(shapes).shapes
        if parse_duration(per_shape) <= 0:
            raise ValueError("--per-shape must be > 0")
        settings = TS(per_shape=per_shape, top=top, batch=batch, confirm=confirm, library=library,
                      timing_budget_s=time_budget,
                      layouts=tuple(x.strip() for x in layouts.split(",") if x.strip()), min_speedup=min_speedup,
                      ranker=ranker, plugins=tuple(plugin),
                      pool=PoolSettings(families=tuple(f.strip() for f in families.split(",") if f.strip()) or None))
    except (ShapeError, ValueError) as e:
        fail(str(e))
    from kernels_search.search.tune import plan, tune_main

    if dry_run:
        plan(shape_list, replace(settings, device="cuda" if device == "auto" else device), print_fn=echo, dry_run=True)
        return
    from harness import env as envmod
    from harness.paths import OutputPathError, check_output_dir

    try:
        check_output_dir(out)
    except OutputPathError as e:
        fail(f"--out: {e}")
    try:
        settings = replace(settings, device=envmod.resolve_device(device))
    except (envmod.NoGPUError, ValueError) as e:
        fail(str(e))
    try:
        tune_main(shape_list, out, settings, print_fn=echo)
    except ImportError as e:
        fail(f"--plugin: {e}")
    except ValueError as e:
        fail(str(e))
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted:[/] what was measured is in {escape(str(out))}; "
                          "rerun the same command to resume")
        raise typer.Exit(130)


def register(app: typer.Typer) -> None:
    """Mount ``tune`` on the ``hgemm-bench`` app."""
    app.command("tune")(tune)
