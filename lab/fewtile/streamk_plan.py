"""Write a compare plan: `triton_streamk` against `triton_splitk` (the same tiles) on decode-20 and tune's model shapes.

Why: `triton_splitk` sizes its split per tile, so a tile count that does not divide the 132 SMs leaves SMs idle or runs
a second, mostly empty wave: at 64-column tiles 9 of the 20 decode shapes (`lab/skinny/decode-20.txt`) and 4 of tune's
20 shapes (`lab/tune/shapes20.txt`, among them 128_5120_4096, where no pool kernel came within 6 % of cuBLAS) use under
80 % of the SMs (`triton_streamk.partition` against `triton_splitk.auto_split`). Stream-K gives every program an equal
run of k-tiles. Each shape gets the 16 x 64 tile (M <= 16) or both presets (M > 16), in both families, at one and two
programs a SM for stream-K, beside the library's entry and the baselines.

    python3 -m lab.fewtile.streamk_plan
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TILES = {16: "block_m=16:block_n=64:block_k=64:num_warps=4:num_stages=4",
         64: "block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3"}
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune
TUNE_MODEL_SHAPES = 10  # the first ten lines of lab/tune/shapes20.txt are model projections


def shapes() -> list[str]:
    from harness.shapes import resolve_shapes

    decode = [s.name for s in resolve_shapes([str(ROOT / "lab/skinny/decode-20.txt")]).shapes]
    model = [s.name for s in resolve_shapes([str(ROOT / "lab/tune/shapes20.txt")]).shapes][:TUNE_MODEL_SHAPES]
    return decode + [s for s in model if s not in decode]


def methods(m: int) -> list[str]:
    tiles = [TILES[16]] if m <= 16 else [TILES[16], TILES[64]]
    out = ["library"]
    for t in tiles:
        out += [f"triton_splitk:{t}", f"triton_streamk:{t}:per_sm=1", f"triton_streamk:{t}:per_sm=2"]
    return out + list(BASELINES)


def main() -> None:
    name = "streamk-plan.txt"
    lines = [f"# written by lab/fewtile/streamk_plan.py (its docstring says why); "
             f"run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans"]
    lines += [f"{s} {','.join(methods(int(s.split('_')[0])))}" for s in shapes()]
    (HERE / name).write_text("\n".join(lines) + "\n")
    print(f"{name}: {len(lines) - 1} shapes")


if __name__ == "__main__":
    main()
