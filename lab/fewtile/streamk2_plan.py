"""Write a compare plan: `triton_streamk` on the few-tile class samples, and 4 programs a SM on decode.

Why: the first measurement (`lab/fewtile/streamk-h100.md`, run 67872ae7bb93) had stream-K at 1.11x
(16 x 64) and 1.30x (64 x 64) over `triton_splitk` where split-K leaves 20 % or more of the SMs
idle, and slower elsewhere. Two programs a SM beat one on 38 of 44 shape-tiles. Two questions follow:
does stream-K lift issue 33's few-tile classes (`deepk-60-seed3301.txt`, and the 13 shapes of
`shallowk-60-seed3301.txt` deep enough to cut a tile, K 1024), beside `triton_splitk` and the
library; and do 4 programs a SM (more loads in flight) beat 2 where cuBLAS streams the weights
(decode-20)? Each shape lists the deepest-priority questions first: the classes, then decode.
It also writes `streamk-fence-plan.txt`: the class shapes again at 64 x 64 (split-K, stream-K at 2 and
4 programs a SM), once every thread fences after its partial adds: the gate, which caught wrong sums
at 4 programs a SM (run 523abc79a060), on the same shapes, and what the fence costs. And
`streamk-dp-plan.txt`: the same shapes at 2 programs a SM once whole waves of tiles go whole before the
runs (Nsight Compute had stream-K reading 16x split-K's DRAM bytes on 1024_2048_12288). And
`streamk4-plan.txt`: 2 against 4 programs a SM once the last contributor's read and zeroing of a tile's
sum are separated by a CTA barrier (the cause of the wrong sums at 4), on the class shapes at 64 x 64
beside split-K, and on decode-20 at 16 x 64.

    python3 -m lab.fewtile.streamk2_plan
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TILES = {16: "block_m=16:block_n=64:block_k=64:num_warps=4:num_stages=4",
         64: "block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3"}
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune
CUT_MIN_K = 1024  # 16 k-tiles of 64: the fewest at which stream-K cuts a tile (SPLIT_MIN_K_TILES)


def _names(path: str) -> list[str]:
    from harness.shapes import resolve_shapes

    return [s.name for s in resolve_shapes([str(ROOT / path)]).shapes]


def class_methods(m: int) -> list[str]:
    tiles = [TILES[64]] + ([TILES[16]] if m <= 32 else [])
    out = ["library"]
    for t in tiles:
        out += [f"triton_splitk:{t}", f"triton_streamk:{t}:per_sm=2", f"triton_streamk:{t}:per_sm=4"]
    return out + list(BASELINES)


def decode_methods(m: int) -> list[str]:
    tiles = [TILES[16]] if m <= 16 else [TILES[16], TILES[64]]
    return [f"triton_streamk:{t}:per_sm={p}" for t in tiles for p in (2, 4)] + list(BASELINES)


def _write(name: str, rows: list[tuple[list[str], list[str]]]) -> None:
    """Write plan ``name``: each (shapes, methods) pair gives one line a shape."""
    lines = [f"# written by lab/fewtile/streamk2_plan.py (its docstring says why); "
             f"run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans"]
    lines += [f"{s} {','.join(methods)}" for shapes, methods in rows for s in shapes]
    (HERE / name).write_text("\n".join(lines) + "\n")
    print(f"{name}: {sum(len(shapes) for shapes, _ in rows)} shapes")


def main() -> None:
    deep = _names("lab/fewtile/deepk-60-seed3301.txt")
    shallow = [s for s in _names("lab/fewtile/shallowk-60-seed3301.txt") if int(s.split("_")[2]) >= CUT_MIN_K]
    decode = _names("lab/skinny/decode-20.txt")
    cls = deep + shallow
    _write("streamk2-plan.txt", [([s], class_methods(int(s.split("_")[0]))) for s in cls]
           + [([s], decode_methods(int(s.split("_")[0]))) for s in decode])
    t, small = TILES[64], TILES[16]
    _write("streamk-fence-plan.txt",
           [(cls, [f"triton_splitk:{t}", f"triton_streamk:{t}:per_sm=2", f"triton_streamk:{t}:per_sm=4", *BASELINES])])
    _write("streamk-dp-plan.txt", [(cls, [f"triton_splitk:{t}", f"triton_streamk:{t}:per_sm=2", *BASELINES])])
    _write("streamk4-plan.txt", [
        (cls, [f"triton_splitk:{t}", *(f"triton_streamk:{t}:per_sm={n}" for n in (2, 4)), *BASELINES]),
        (decode, [f"triton_splitk:{small}", *(f"triton_streamk:{small}:per_sm={n}" for n in (2, 4)), *BASELINES])])


if __name__ == "__main__":
    main()
