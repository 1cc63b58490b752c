"""The command line's two consoles and its one way to refuse input.

Every command, the harness's own and those other packages plug in, prints results to ``console``
and refuses bad input with ``fail``: one red line on stderr naming the problem (printed as given:
no markup, no emoji codes), exit code 2.
Rich resolves stdout and stderr when it prints, so a test runner's captured streams see the output.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

# no emoji codes: a shape source such as ``model:llama`` or a path with ``:name:`` in it prints as typed
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)


def fail(msg: str, code: int = 2) -> None:
    """Refuse: ``error: msg`` on stderr, then exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(msg)}", soft_wrap=True)  # one line in a pipe or log too
    raise typer.Exit(code)


def echo(line: str) -> None:
    """One plain line on stdout: no markup, no highlighting, never wrapped (pipes and logs keep it whole)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)
