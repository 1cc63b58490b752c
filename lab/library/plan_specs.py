"""The kernel specs the library dispatcher would try first for some shapes (both layouts), for a
call's prebuild: building every spec of a library that covers the grid takes hours on few cores.

    python -m lab.library.plan_specs SHAPES [--library PATH] [--gpu NAME] [--first N] [--plan-out FILE]

Prints one spec a line; with --plan-out also a ``compare --plan``-style file (shape spec,...) that
scripts/plan_prebuild.py accepts.
"""

from __future__ import annotations

import argparse
import sys

from harness.problem import Problem
from harness.shapes import parse_shapes
from kernels_search.search.library import load_library, plan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes")
    ap.add_argument("--library", default=None)
    ap.add_argument("--gpu", default="NVIDIA H200")
    ap.add_argument("--first", type=int, default=1, help="kernel entries per shape and layout, in plan order")
    ap.add_argument("--plan-out", default=None)
    args = ap.parse_args(argv)
    entries = load_library(args.library)
    per_shape: dict[str, list[str]] = {}
    for shape in parse_shapes(args.shapes):
        for layout in ("nn", "tn"):
            kernels = [e for _, e in plan(entries, Problem(shape, layout), args.gpu) if e["kind"] == "kernel"]
            for e in kernels[: args.first]:
                per_shape.setdefault(shape.name, [])
                if e["spec"] not in per_shape[shape.name]:
                    per_shape[shape.name].append(e["spec"])
    specs = sorted({s for v in per_shape.values() for s in v})
    print("\n".join(specs))
    if args.plan_out:
        with open(args.plan_out, "w") as f:
            for shape, v in per_shape.items():
                f.write(f"{shape} {','.join(x.replace(',', ':') for x in v)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
