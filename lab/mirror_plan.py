"""A per-shape mirror study plan: on each shape of a class, cuBLASLt autotune's own tile and cluster
on that shape, in our kernels, then the best config measured there before (the anchor).

Why (twenty-sixth session): the twenty-fifth session's mirror study measured autotune's three most
common choices of a class on every shape of it, in the plain ``hopper`` family, and they lost to the
anchors (0.905x). But cuBLAS chooses per shape, and on the long narrow shapes it chooses tiles that
fill whole waves: on 12288_128_K a 192-row tile (64 x 2 CTAs, ``nvjet_sm90_hsh_64x192_64x6_2x1``), on
12288_64_K 96 rows, on 16384_64_K 256 rows by 32 columns. Those tiles exist in our families
(``hopper_swap``'s odd ``tile_n`` runs along M; ``hopper``'s 256-row cooperative tile), and on most
of the shapes where the anchor is furthest below autotune they were never measured.

Translation. Autotune's tile a x b is cuBLAS's m x n of C^T = B^T A^T, so a runs along our N and b
along our M; its cluster p x q likewise (p CTAs along N, q along M).
- b one of ``hopper``'s tile_m values (64, 128, 256): ``hopper`` with tile_m = b, tile_n = a,
  cluster_m = q, cluster_n = p; otherwise ``hopper_swap`` (the transposed problem) with tile_m = a,
  tile_n = b, cluster_m = p, cluster_n = q: the tile kept as cuBLAS has it.
- Schedules: the persistent one (pingpong, else cooperative), the non-persistent ``single`` (6
  stages, else 4) and, where the cluster is not 1 x 1, ``single`` with no cluster (single's
  one-CTA-per-tile grid is what shed the persistent kernels' fixed cost on one-wave shapes).
- A translation a family declines is skipped, as is a config the prior already measured on the shape.
- Autotune's choice on a shape: that of its fastest autotune row in the prior's files
  (``info``'s ``algo_tile_id`` and ``algo_cluster_shape_id``, named by nvmath's cuBLASLt enums).

    python -m lab.mirror_plan --where "m >= 2048 and n <= 256" --below 0.97 \\
        --prior kernels_search/search/prior_h200.txt --exclude FILE --exclude-search FOLDER --note ... \
        --out PLAN [--specs-out SPECS]

Shapes come from ``--shapes`` (default the cuda-l2 grid) as in ``class_plan.py``; ``--below R`` keeps
those whose anchor measured under R of autotune (or that have none). Shapes left with no new config
are not planned. The header records the command.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path


HOPPER_TILE_M = (64, 128, 256)


def autotune_choice(frames, shapes: set[str]) -> dict[str, tuple[str, str]]:
    """{shape: (tile, cluster)} of the fastest ``cublaslt-autotune`` row of each shape in the prior
    files' rows (``frames``), e.g. ("64x192", "2x1x1"); shapes whose rows carry no algorithm are left out."""
    import nvmath.bindings.cublasLt as lt

    best: dict[str, tuple[float, str]] = {}
    for df in frames:
        if "info" not in df.columns:
            continue
        df = df[(df["method"] == "cublaslt-autotune") & (df["status"] == "ok") & df["shape"].isin(shapes)]
        for shape, us, info in zip(df["shape"], df["device_us_median"], df["info"]):
            if shape not in best or us < best[shape][0]:
                best[shape] = (us, info)
    out = {}
    for shape, (_, info) in best.items():
        algo = json.loads(info or "{}")
        if "algo_tile_id" not in algo or "algo_cluster_shape_id" not in algo:
            continue
        tile = lt.MatmulTile(algo["algo_tile_id"]).name.removeprefix("TILE_")
        cluster = lt.ClusterShape(algo["algo_cluster_shape_id"]).name.removeprefix("SHAPE_")
        out[shape] = (tile, "1x1x1" if cluster == "AUTO" else cluster)
    return out


def mirror_configs(tile: str, cluster: str) -> list[str]:
    """Our canonical configs for autotune's ``tile`` ("a x b") and ``cluster`` ("p x q x 1"), as the
    module docstring translates them; [] for a tile cuBLAS names that is not a x b."""
    from kernels_search.families import ALL
    from kernels_search.family import KnobError

    try:
        a, b = (int(x) for x in tile.split("x"))
        p, q, _ = (int(x) for x in cluster.split("x"))
    except ValueError:
        return []
    if b in HOPPER_TILE_M:
        fam, tiles, clusters = ALL["hopper"], f"tile_m={b},tile_n={a}", (f"cluster_m={q},cluster_n={p}",)
    else:
        fam, tiles, clusters = ALL["hopper_swap"], f"tile_m={a},tile_n={b}", (f"cluster_m={p},cluster_n={q}",)
    if (p, q) != (1, 1):
        clusters += ("cluster_m=1,cluster_n=1",)
    tries = [[f"{clusters[0]},schedule=pingpong", f"{clusters[0]},schedule=cooperative"],
             [f"{clusters[0]},schedule=single,stages=6", f"{clusters[0]},schedule=single,stages=4"]]
    if len(clusters) > 1:
        tries.append([f"{clusters[1]},schedule=single,stages=6", f"{clusters[1]},schedule=single,stages=4"])
    out = []
    for alternatives in tries:  # the first valid spelling of each
        for rest in alternatives:
            try:
                out.append(fam.spec(fam.parse(f"{tiles},{rest}")))
                break
            except KnobError:
                continue
    return out


def measured_configs(frames, shapes: set[str]) -> dict[str, set[str]]:
    """{shape: canonical configs with a row in the prior files' rows (``frames``)}, by today's knobs (a
    row recorded before a knob existed names its default)."""
    from kernels_search.families import ALL
    from kernels_search.family import KnobError

    out: dict[str, set[str]] = {}
    for df in frames:
        df = df[df["shape"].isin(shapes) & ~df["is_baseline"].astype(bool)]
        for shape, method in set(zip(df["shape"], df["method"])):
            fam, _, body = str(method).partition(":")
            if fam in ALL:
                try:
                    out.setdefault(shape, set()).add(ALL[fam].spec(ALL[fam].parse(body)))
                except KnobError:
                    pass
    return out


def main(argv=None) -> int:
    from lab import class_plan
    from kernels_search.search.prior import prior_paths, read_prior

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    class_plan.add_class_args(ap)
    ap.add_argument("--below", type=float, default=None, help="only shapes whose anchor ratio is under this")
    ap.add_argument("--specs-out", type=Path, help="also write the distinct new configs, one a line "
                    "(study_table.py --new, gpu_check.sh's PLAN_NEW)")
    a = ap.parse_args(argv)
    try:
        shapes = class_plan.class_shapes_of(a)
        frames = [read_prior(p) for p in prior_paths(a.prior)]  # read once, used three times
    except (class_plan.ClassPlanError, OSError, ValueError) as e:
        print(f"mirror_plan: {e}", file=sys.stderr)
        return 2
    anchor = class_plan.anchor_ratios(frames, set(shapes))
    if a.below is not None:
        shapes = [s for s in shapes if s not in anchor or anchor[s][0] < a.below]
    choice = autotune_choice(frames, set(shapes))
    seen = measured_configs(frames, set(shapes))
    rows, configs = [], set()
    for s in shapes:
        new = [c for c in mirror_configs(*choice[s]) if c not in seen.get(s, set())] if s in choice else []
        if not new:
            continue
        configs.update(new)
        rows.append(f"{s} {','.join(new + ([anchor[s][1]] if s in anchor else []))}")
    head = [f"# {a.note}" if a.note else "# a per-shape mirror study",
            f"# {len(rows)} shapes, {len(configs)} distinct new configs, then each shape's anchor; made by: "
            "python -m lab.mirror_plan " + shlex.join(argv if argv is not None else sys.argv[1:])]
    a.out.write_text("\n".join(head + rows) + "\n")
    if a.specs_out:
        a.specs_out.write_text(f"# the new configs of {a.out.name} (lab/mirror_plan.py)\n"
                               + "".join(f"{c}\n" for c in sorted(configs)))
    print(f"{a.out}: {len(rows)} shapes, {len(configs)} new configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
