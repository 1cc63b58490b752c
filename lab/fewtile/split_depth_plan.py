"""Write a compare plan: `triton_splitk`'s slice count on the few-tile deep-K shapes with the fewest tiles.

Why: on the deepk-60 shapes of at most 16 output tiles (128 x 128) `triton_splitk` at its automatic split
wins 1.02-1.29x over the best baseline (H100, run 7fd2754108ad), yet stays 4-5x over the ~1 us floor. The
automatic split fills one wave with slices of as few as 2 k-tiles: on 128_64_4096 at 64 x 64, 32 slices
of 2 k-tiles each add a 16 KB partial into the same tile, 32 contributors on each accumulator. If the
adds' contention and each slice's fixed latency (first load, barrier, counter) dominate, fewer, longer
slices are faster. Each shape lists the automatic split and 4, 8, 16, 32 slices at the 64 x 64 and
16 x 64 tiles.

It also writes `split-rule-plan.txt`, the out-of-sample check of the rule chosen on that run (`auto_split`
past one wave on deep K): on every shape of deepk-60, shallowk-60, decode-20 and tune's 20 not in the first
plan where the rule's split differs from the one-wave split, `split_k=0` (the rule) beside `split_k=<the
one-wave split>`, at the preset tile (16 x 64 for M <= 32, else 64 x 64).

    python3 -m lab.fewtile.split_depth_plan
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TILES = ("block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3",
         "block_m=16:block_n=64:block_k=64:num_warps=4:num_stages=4")
SPLITS = (0, 4, 8, 16, 32)
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune
MAX_TILES = 16  # output tiles of 128 x 128


def one_wave_split(tiles: int, k_tiles: int, sms: int) -> int:
    """``auto_split`` before the deep-K rule: one wave of programs, 2 k-tiles a slice at least."""
    if k_tiles < 16:
        return 1
    split = max(1, min(sms // max(tiles, 1), k_tiles // 2))
    per = -(-k_tiles // split)
    return -(-k_tiles // per)


def _write(name: str, lines: list[str]) -> None:
    """Write plan ``name`` (its header line, then ``lines``)."""
    head = (f"# written by lab/fewtile/split_depth_plan.py (its docstring says why); "
            f"run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans")
    (HERE / name).write_text("\n".join([head] + lines) + "\n")


def rule_plan(first: set[str]) -> None:
    from harness.shapes import resolve_shapes
    from kernels_search.families.triton_splitk import auto_split

    files = ("lab/fewtile/deepk-60-seed3301.txt", "lab/skinny/decode-20.txt", "lab/tune/shapes20.txt",
             "lab/fewtile/shallowk-60-seed3301.txt")
    lines, seen = [], set(first)
    for f in files:
        for s in resolve_shapes([str(ROOT / f)]).shapes:
            if s.name in seen:
                continue
            seen.add(s.name)
            tile = TILES[1] if s.m <= 32 else TILES[0]
            bm = 16 if s.m <= 32 else 64
            tiles, k_tiles = -(-s.m // bm) * -(-s.n // 64), -(-s.k // 64)
            old = one_wave_split(tiles, k_tiles, 132)
            if old != auto_split(tiles, k_tiles, 132):
                lines.append(f"{s.name} triton_splitk:{tile}:split_k=0,triton_splitk:{tile}:split_k={old},cublaslt")
    _write("split-rule-plan.txt", lines)
    print(f"split-rule-plan.txt: {len(lines)} shapes")


def main() -> None:
    from harness.shapes import resolve_shapes

    shapes = [s for s in resolve_shapes([str(ROOT / "lab/fewtile/deepk-60-seed3301.txt")]).shapes
              if -(-s.m // 128) * -(-s.n // 128) <= MAX_TILES]
    methods = [f"triton_splitk:{t}:split_k={k}" for t in TILES for k in SPLITS] + list(BASELINES)
    _write("split-depth-plan.txt", [f"{s.name} {','.join(methods)}" for s in shapes])
    print(f"split-depth-plan.txt: {len(shapes)} shapes, {len(methods)} methods each")
    rule_plan({s.name for s in shapes})


if __name__ == "__main__":
    main()
