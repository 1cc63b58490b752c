"""Reading CUDA source text: kernel launches and their configuration arguments.

Both the external-kernel loader (is a launch on the legacy default stream, so not capturable?)
and the LLM completion filter (is every launch on the ABI's ``stream``?) need the same thing:
each ``<<<...>>>`` launch with its top-level arguments, commas inside brackets kept together.
"""

from __future__ import annotations

import re
from typing import Iterator

LAUNCH_RE = re.compile(r"<<<(.*?)>>>", re.S)


def launch_configs(code: str) -> Iterator[tuple[str, list[str]]]:
    """Each launch in ``code`` (comments already removed) as (its text, its top-level args):
    ``<<<grid, block, smem, stream>>>`` -> ("grid, block, smem, stream", ["grid", ...])."""
    for m in LAUNCH_RE.finditer(code):
        args, depth, cur = [], 0, ""
        for ch in m.group(1):
            if ch in "([{<":
                depth += 1
            elif ch in ")]}>":
                depth -= 1
            if ch == "," and depth == 0:
                args.append(cur.strip())
                cur = ""
            else:
                cur += ch
        args.append(cur.strip())
        yield m.group(1).strip(), args
