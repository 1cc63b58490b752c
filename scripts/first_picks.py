"""The search policy's held-out first picks, computed from a search folder without a GPU, and
optionally compiled ahead into the build cache.

On the GPU host the held-out check compiles its picks before it measures them, and a CUTLASS
sm90 pick takes a minute or more to build there: in the H200 run of 2026-11-30 (fifth session)
the check ran out of its device call after 4 of 20 shapes. The pick depends only on the policy
checkpoint, the kernel DB and the shape (``Policy.first_pick`` seeds its pool by the shape), so
this script makes the same picks here; ``--prebuild`` compiles the CUDA ones (nvcc only, no GPU)
into ``$HGEMM_BUILD_CACHE`` for the device call to load.

    python3 scripts/first_picks.py results/search-h200-c [--rule model] [--prebuild] [--all] [--device cpu --plugin MOD]

Shapes whose pick is already measured under the current first-pick id are skipped (``--all``
lists them too). The search's families are those its checkpoint was trained with; where the GPU
host had Triton and this machine has not, Triton configs are still picked (they need no build).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def policy_for(folder: Path, layouts=("nn", "tn"), device: str = "cuda", plugins=(), rule: str = "neighbours"):
    """The search's policy as ``search_main`` rebuilds it: checkpoint, then every DB row it lacks."""
    import dataclasses
    import importlib

    from kernels_search.families import ALL, triton_gemm
    from kernels_search.search.db import KernelDB
    from kernels_search.search.policy import Policy, default_families

    for mod in plugins:  # plug-ins register their families, as in the search
        importlib.import_module(mod)
    db = KernelDB(folder / "db")
    layouts = tuple(sorted(set(db.df["layout"]))) if not db.df.empty else layouts
    fams = default_families(device) if device != "cuda" else dict(ALL)
    if device == "cuda" and not triton_gemm.triton_available():
        # the GPU host searched with Triton: keep its configs pickable here (JIT, nothing to build)
        fam = fams["triton"]
        fams["triton"] = dataclasses.replace(fam)
        fams["triton"].supports = lambda k, problem: True
    if device == "cuda":
        fams.update({n: f for n, f in default_families("cuda").items() if n not in fams})  # plug-ins
    pol = Policy(fams, tuple(layouts), seed=0, first_pick_rule=rule)
    if not pol.load(folder / "policy.npz"):  # as run_search: the DB rows rebuild it
        print(f"{folder}/policy.npz is missing or of another version or family set: replaying the DB")
    pol.sync(db)
    return pol, db


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a search's --out folder (db/, policy.npz, holdout.txt)")
    ap.add_argument("--prebuild", action="store_true", help="compile the CUDA picks into $HGEMM_BUILD_CACHE")
    ap.add_argument("--all", action="store_true", help="also shapes whose pick is already measured")
    ap.add_argument("--device", default="cuda", help="the device the search ran on (its families)")
    ap.add_argument("--plugin", action="append", default=[], help="module registering search families")
    ap.add_argument("--rule", default="neighbours", help="first-pick rule: neighbours (default) or model")
    a = ap.parse_args(argv)
    from harness.shapes import parse_shape
    from kernels_search.search.loop import auto_prebuild, first_pick_id

    pol, db = policy_for(a.folder, device=a.device, plugins=a.plugin, rule=a.rule)
    holdout = [parse_shape(s) for s in (a.folder / "holdout.txt").read_text().split()]
    df = db.df
    search_id = df[~df["search_id"].str.contains("-first-pick-")]["search_id"].iloc[0]
    pick_id = first_pick_id(search_id, db.search_totals(search_id)["candidates"], pol)
    gpu = df["gpu_name"].dropna().iloc[0]
    done = set(df[(df["search_id"] == pick_id) & (df["kind"] == "candidate")]["shape"])
    picks = []
    print(f"{pick_id}: {len(done)} of {len(holdout)} held-out shapes measured")
    for shape in holdout:
        if shape.name in done and not a.all:
            continue
        cand = pol.first_pick(shape, db, gpu)
        mean, _ = pol.predict(shape, [cand])
        picks.append(cand)
        print(f"{shape.name:>17}  predicted {mean.max():+.3f}  {'measured ' if shape.name in done else ''}{cand.spec}")
    if a.prebuild:
        todo = [c.spec for c in picks if c.family != "triton"]
        print(f"built {len(todo)} CUDA picks in {auto_prebuild(todo):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
