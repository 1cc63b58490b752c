"""The ``hgemm-bench report`` command, ready to mount: ``register(app)`` adds it to a Typer app.

Nothing heavy is imported until the command runs (the CLI's ``--help`` stays fast). Bad input is
one error line and exit code 2, as in ``compare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

DEFAULT_OUT = Path("results/site")  # under results/, which git ignores: a report never lands in tracked files


def report(
    results: List[Path] = typer.Argument(..., help="Results Parquet files from `compare`."),
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o",
                             help="Output folder for the static site: a new or empty folder, or one an earlier "
                                  "report made (only the files it wrote there are replaced)."),
    baseline: Optional[str] = typer.Option(None, help="Method the leaderboard's speedups are relative to "
                                                      "(default: cublaslt-autotune)."),
    metric: str = typer.Option("device", help="View the page opens on: device (GPU time per call) or host."),
    headline: str = typer.Option("", help="Run the page opens on (run id or run name); default: the latest full "
                                          "comparison (every cuBLAS-family baseline and another method, "
                                          "offline, GPU)."),
):
    """Build the static HTML leaderboard from results Parquet files."""
    from harness.console import echo, fail

    if metric not in ("device", "host"):
        fail(f"unknown metric {metric!r}: use device or host")
    from harness.paths import OutputPathError
    from harness.results import ResultsError
    from reports.headline import HeadlineError
    from reports.site import BaselineError, build_site

    try:
        index = build_site(list(results), out, baseline=baseline, metric=metric, headline=headline or None)
    except OutputPathError as e:
        fail(f"-o: {e}")
    except (ResultsError, HeadlineError, BaselineError) as e:
        fail(str(e))
    echo(f"site: {index}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
