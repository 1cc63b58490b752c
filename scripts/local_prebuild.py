"""Compile ahead the CUDA configs a resumed search's local picks can choose, without a GPU.

After the design, most of a batch is one-knob mutations of the shape's two best configs
(``Policy.local_specs``). Those are known before the search resumes, from its DB alone, and a
CUTLASS sm90 mutation takes about a minute to build on the GPU host, where the search's budget
clock runs while it waits. This script computes every searched shape's local specs as the resumed
search will (checkpoint, then DB replay: ``first_picks.policy_for``), keeps the CUDA ones not yet
measured on that shape, and compiles them into ``$HGEMM_BUILD_CACHE`` (nvcc only).

    python3 scripts/local_prebuild.py results/search-h200-d [--list]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def local_cuda_specs(pol, db, shapes) -> dict[str, list[str]]:
    """{shape: CUDA-family specs among its local picks, not measured on it yet, supported}."""
    measured = db.df[db.df["kind"] == "candidate"].groupby("shape")["method"].agg(set).to_dict()
    out = {}
    for shape in shapes:
        specs = []
        for spec in sorted(pol.local_specs(shape) - measured.get(shape.name, set())):
            cand = pol.candidate_for(spec)
            fam = pol.families[cand.family] if cand else None
            if cand and getattr(fam, "backend", "cuda") == "cuda" and pol._supported(cand.family, cand.knobs, shape):
                specs.append(spec)
        out[shape.name] = specs
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a search's --out folder (db/, policy.npz, shapes.txt)")
    ap.add_argument("--list", action="store_true", help="only list them")
    a = ap.parse_args(argv)
    from first_picks import policy_for

    from harness.shapes import parse_shape
    from kernels_search.search.loop import auto_prebuild

    pol, db = policy_for(a.folder)
    shapes = [parse_shape(s) for s in (a.folder / "shapes.txt").read_text().split()]
    by_shape = local_cuda_specs(pol, db, shapes)
    keys = {}
    for specs in by_shape.values():
        for spec in specs:
            cand = pol.candidate_for(spec)
            keys.setdefault(pol.compile_key(cand.family, cand.knobs), spec)
    fams = collections.Counter(spec.split(":")[0] for spec in keys.values())
    print(f"{sum(map(len, by_shape.values()))} local CUDA picks on {sum(bool(v) for v in by_shape.values())} shapes, "
          f"{len(keys)} binaries: " + ", ".join(f"{n} {f}" for f, n in fams.most_common()))
    if a.list:
        print("\n".join(sorted(keys.values())))
        return 0
    print(f"built in {auto_prebuild(sorted(keys.values())):.0f} s (cache hits are free)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
