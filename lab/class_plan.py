"""A study plan for one class of grid shapes: on each, the configs under study, then the best config
measured there before (the anchor).

Why: every class study so far (narrow tiles, the narrow study's winners, twenty-fourth session) had
its plan written by a throw-away script whose rules lived only in the plan's header. This one makes
the plan from its arguments, and the header records the command, so a reader can remake it.

    python -m lab.class_plan --where "n in (128, 256) and m >= 2048" --specs SPECS \
        --prior kernels_search/search/prior_h200.txt --exclude FILE [--exclude FILE] \
        [--exclude-search FOLDER] --note "..." --out PLAN

- The shapes: every shape of ``--shapes`` (default ``lab/seen_shapes.txt``, the
  cuda-l2 grid) for which ``--where`` (a Python expression over the ints ``m``, ``n``, ``k``) holds,
  less the shapes of each ``--exclude`` shape file and the searched and held-out shapes of each
  ``--exclude-search`` folder; in the shape file's order.
- The anchor: over the ``--prior`` Parquets, the config with the highest ratio on the shape, each
  ratio cuBLASLt autotune's time over the config's, both in their faster layout, from the same
  Parquet (``study_table.ratios``); no anchor where no prior file measured the shape.
- ``--specs``: a file of method specs, one a line (``#`` comment lines), canonicalised and checked by the
  method registry: an unknown family or knob is an error before anything is written.
- ``--anchor-variant KNOB=VALUE`` (repeatable; all of them at once): after the anchor, the anchor
  with those knobs set, where its family has them all (a knob study side by side with the best
  config, e.g. ``l2_promo=256``); with it, ``--specs`` may be left out.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


GRID = Path("lab/seen_shapes.txt")


class ClassPlanError(ValueError):
    """A bad --where expression or specs file, named in the message."""


def class_shapes(shapes: list[str], where: str, exclude: set[str]) -> list[str]:
    """The shapes (``M_N_K`` names) for which ``where`` holds over m, n, k, less ``exclude``."""
    try:
        code = compile(where, "--where", "eval")
    except SyntaxError as e:
        raise ClassPlanError(f"--where {where!r}: not a Python expression ({e.msg})") from e
    out = []
    for s in shapes:
        m, n, k = (int(x) for x in s.split("_"))
        try:
            hit = eval(code, {"__builtins__": {}}, {"m": m, "n": n, "k": k})
        except Exception as e:
            raise ClassPlanError(f"--where {where!r} on {s}: {type(e).__name__}: {e}") from e
        if hit and s not in exclude:
            out.append(s)
    return out


def read_specs(path: Path) -> list[str]:
    """``study_table.read_specs``, with an empty file or an unknown spec a ``ClassPlanError`` naming it."""
    from lab import study_table

    try:
        specs = study_table.read_specs(path)
    except Exception as e:
        raise ClassPlanError(f"{path}: {e}") from e
    if not specs:
        raise ClassPlanError(f"{path}: no specs")
    return specs


def anchor_ratios(frames, shapes: set[str]) -> dict[str, tuple[float, str]]:
    """{shape: (ratio, config)}: the config with the best ratio to cuBLASLt autotune in any one prior
    file (``frames``: each file's rows, ``prior.read_prior``)."""
    from lab.study_table import ratios

    best: dict[str, tuple[float, str]] = {}
    for df in frames:
        df = df[df["shape"].isin(shapes)]
        for shape, per in ratios(df).items():
            for method, r in per.items():
                if shape not in best or r > best[shape][0]:
                    best[shape] = (r, method)
    return best


def anchors(prior_files, shapes: set[str]) -> dict[str, str]:
    """{shape: the config with the best ratio to cuBLASLt autotune in any one prior file}."""
    from kernels_search.search.prior import read_prior

    return {s: m for s, (_, m) in anchor_ratios(map(read_prior, prior_files), shapes).items()}


def variant(spec: str, knobs: dict[str, str]) -> str | None:
    """``spec`` with ``knobs`` set, canonical; None where its family lacks one of them or the set
    is invalid there. A bad value for a knob the family has is an error (``ClassPlanError``)."""
    from kernels_search import FAMILIES
    from kernels_search.family import KnobError

    family, _, rest = spec.partition(":")
    fam = FAMILIES.get(family)
    if fam is None or any(k not in fam.defaults() for k in knobs):
        return None
    try:
        return fam.spec(fam.parse(f"{rest},{','.join(f'{k}={x}' for k, x in knobs.items())}"))
    except KnobError as e:
        if any(f"{k}=" in str(e) for k in knobs):
            raise ClassPlanError(f"--anchor-variant on {spec}: {e}") from e
        return None


def plan_lines(shapes: list[str], specs: list[str], anchor: dict[str, str],
               variant_knobs: dict[str, str] | None = None) -> list[str]:
    """One plan row per shape: the specs, then its anchor where it has one and it is not a spec,
    then the anchor's variant (``variant_knobs``) where it has one; with no specs, only the shapes
    whose anchor has the variant."""
    rows = []
    for s in shapes:
        methods = list(specs) + ([anchor[s]] if s in anchor and anchor[s] not in specs else [])
        if variant_knobs and s in anchor:
            v = variant(anchor[s], variant_knobs)
            if v and v not in methods:
                methods.append(v)
            elif not specs:  # a variant study: the anchor alone answers nothing
                methods = []
        if methods:
            rows.append(f"{s} {','.join(methods)}")
    return rows


def add_class_args(ap: argparse.ArgumentParser) -> None:
    """The arguments that choose a study's shapes and its anchors, and name its plan (``class_shapes_of``);
    mirror_plan.py takes them too."""
    ap.add_argument("--where", required=True, help="Python expression over m, n, k")
    ap.add_argument("--prior", nargs="+", required=True, help="prior list(s) or Parquet(s) for the anchors")
    ap.add_argument("--shapes", type=Path, default=GRID, help="shape file (default: the cuda-l2 grid)")
    ap.add_argument("--exclude", type=Path, action="append", default=[], help="a shape file to leave out")
    ap.add_argument("--exclude-search", type=Path, action="append", default=[],
                    help="a search folder whose searched and held-out shapes are left out")
    ap.add_argument("--note", default="", help="what the study is, for the plan's header")
    ap.add_argument("--out", type=Path, required=True)


def class_shapes_of(a: argparse.Namespace) -> list[str]:
    """The shapes ``add_class_args``' arguments choose; ``ClassPlanError`` (or OSError / ValueError from
    a shape file) naming the problem, also when none is left."""
    from lab.first_picks import read_shapes
    from harness.shapes import parse_shapes

    exclude = {s.name for f in a.exclude for s in parse_shapes(str(f))}
    for folder in a.exclude_search:
        exclude |= {s.name for name in ("shapes.txt", "holdout.txt") for s in read_shapes(folder, name)}
    shapes = class_shapes([s.name for s in parse_shapes(str(a.shapes))], a.where, exclude)
    if not shapes:
        raise ClassPlanError(f"--where {a.where!r}: no shape of {a.shapes} left")
    return shapes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_class_args(ap)
    ap.add_argument("--specs", type=Path, help="the configs under study, one a line")
    ap.add_argument("--anchor-variant", action="append", default=[], metavar="KNOB=VALUE",
                    help="also measure the anchor with this knob set (repeatable)")
    a = ap.parse_args(argv)
    from kernels_search.search.prior import prior_paths

    try:
        shapes = class_shapes_of(a)
        if a.specs is None and not a.anchor_variant:
            raise ClassPlanError("nothing to measure: give --specs, --anchor-variant or both")
        specs = read_specs(a.specs) if a.specs else []
        knobs = dict(kv.partition("=")[::2] for kv in a.anchor_variant)
        if any(not k or not v for k, v in knobs.items()):
            raise ClassPlanError(f"--anchor-variant: expected KNOB=VALUE, got {a.anchor_variant}")
        anchor = anchors(prior_paths(a.prior), set(shapes))
        rows = plan_lines(shapes, specs, anchor, knobs)
    except (ClassPlanError, OSError, ValueError) as e:
        print(f"class_plan: {e}", file=sys.stderr)
        return 2
    then = "then the anchor" + (f" and the anchor with {', '.join(a.anchor_variant)}" if knobs else "")
    head = [f"# {a.note}" if a.note else "# a class study",
            f"# {len(shapes)} shapes ({len(rows)} with a config to measure), {len(specs)} configs each, {then}"
            f" ({len(anchor)} shapes have an anchor); made by: python -m lab.class_plan "
            + shlex.join(argv if argv is not None else sys.argv[1:])]
    a.out.write_text("\n".join(head + rows) + "\n")
    print(f"{a.out}: {len(shapes)} shapes, {len(specs)} configs, {len(anchor)} anchors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
