"""Compile ahead the CUDA configs a resumed search's local picks can choose, without a GPU.

After the design, most of a batch is one-knob mutations of the shape's two best configs
(``Learner.local_specs``). Those are known before the search resumes, from its DB alone, and a
CUTLASS sm90 mutation takes about a minute to build on the GPU host, where the search's budget
clock runs while it waits. This script computes every searched shape's local specs as the resumed
search will (checkpoint, then DB replay: ``first_picks.policy_for``), keeps the CUDA ones not yet
measured on that shape, and compiles them into ``$HGEMM_BUILD_CACHE`` (nvcc only).

    python -m lab.local_prebuild results/search-h200-d [--list]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path



def local_cuda_specs(pol, db, shapes) -> dict[str, list[str]]:
    """{shape: CUDA-family specs among its local picks, not measured on it yet, supported}, each
    list in the order the policy's posterior mean ranks them (its first local pick is the top)."""
    from kernels_search.search.loop import measured_specs

    out = {}
    for shape in shapes:
        near = pol.local_specs(shape)
        # the policy's own pool (valid, supported, not measured here, not a failed build), as propose
        # sees it: measured_specs is the search's exclusion (old rows under today's canonical names too)
        done = measured_specs(db, shape, None, pol.families)
        specs = [c for c in pol.pool(shape, done, seed=0) if c.spec in near
                 and getattr(pol.families[c.family], "backend", "cuda") == "cuda"]
        if specs:
            mean = pol.predict(shape, specs)[0].max(axis=1)
            specs = [specs[i] for i in sorted(range(len(specs)), key=lambda i: -mean[i])]
        out[shape.name] = [c.spec for c in specs]
    return out


def build_order(pol, by_shape: dict[str, list[str]]) -> list[str]:
    """One spec per binary, round-robin over the shapes by rank: every shape's likeliest local
    pick first, then every shape's second, ... (a build cut short has built the likeliest)."""
    order, keys = [], set()
    for rank in range(max(map(len, by_shape.values()), default=0)):
        for specs in by_shape.values():
            if rank < len(specs):
                cand = pol.candidate_for(specs[rank])
                key = pol.compile_key(cand.family, cand.knobs)
                if key not in keys:
                    keys.add(key)
                    order.append(specs[rank])
    return order


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a search's --out folder (db/, policy.npz, shapes.txt)")
    ap.add_argument("--list", action="store_true", help="only list them, in build order")
    ap.add_argument("--chunk", type=int, default=8, help="binaries per parallel build batch")
    a = ap.parse_args(argv)
    from lab.first_picks import policy_for, read_shapes

    from kernels_search.search.loop import auto_prebuild

    pol, db = policy_for(a.folder)
    shapes = read_shapes(a.folder, "shapes.txt")
    by_shape = local_cuda_specs(pol, db, shapes)
    order = build_order(pol, by_shape)
    fams = collections.Counter(spec.split(":")[0] for spec in order)
    print(f"{sum(map(len, by_shape.values()))} local CUDA picks on {sum(bool(v) for v in by_shape.values())} shapes, "
          f"{len(order)} binaries: " + ", ".join(f"{n} {f}" for f, n in fams.most_common()))
    if a.list:
        print("\n".join(order))
        return 0
    t = 0.0
    for i in range(0, len(order), a.chunk):  # in chunks, so a build cut short keeps what it finished
        t += auto_prebuild(order[i:i + a.chunk])
        print(f"{min(i + a.chunk, len(order))} of {len(order)} built or cached, {t:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
