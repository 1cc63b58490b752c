"""The shape sets of the skinny-kernel study (issue 33), written to lab/skinny/*.txt.

    python3 lab/skinny/make_shapes.py

- decode-20.txt: 20 decode GEMMs, M in {1, 8, 16, 32} (five each), N x K from the projections
  (fused qkv, o, fused gate+up, down) of four public model configs, drawn with random.Random(33).
  nn.Linear weights are (out, in) = (N, K): the `tn` layout is the one a model runs; both are measured.
- fewtile-deep-60.txt / fewtile-shallow-60.txt: 60 cuda-l2 grid shapes each with fewer output tiles
  (128 x 128) than the H200's 132 SMs, K >= 2048 and K < 2048, drawn with random.Random(3301).
"""

import itertools
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (hidden, intermediate, heads, kv_heads, head_dim), from each model's config.json
MODELS = {
    "Llama-3.1-8B": (4096, 14336, 32, 8, 128),
    "Qwen2.5-7B": (3584, 18944, 28, 4, 128),
    "Llama-3.1-70B": (8192, 28672, 64, 8, 128),
    "Phi-3-mini-4k": (3072, 8192, 32, 32, 96),
    "Mistral-Nemo-12B": (5120, 14336, 32, 8, 128),
}


def projections(hidden, inter, heads, kv, hd):
    return {"qkv": ((heads + 2 * kv) * hd, hidden), "o": (hidden, heads * hd),
            "gate_up": (2 * inter, hidden), "down": (hidden, inter)}


def decode_shapes(seed: int = 33) -> list[tuple[str, str]]:
    pairs = [(f"{m}.{p}", nk) for m, cfg in MODELS.items() for p, nk in projections(*cfg).items()]
    rng = random.Random(seed)
    rng.shuffle(pairs)
    out = []
    for i, (label, (n, k)) in enumerate(pairs[:20]):
        m = (1, 8, 16, 32)[i % 4]
        out.append((f"{m}_{n}_{k}", label))
    return out


GRID = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)


def fewtile(seed: int = 3301) -> tuple[list[str], list[str]]:
    few = [s for s in itertools.product(GRID, GRID, GRID) if math.ceil(s[0] / 128) * math.ceil(s[1] / 128) < 132]
    rng = random.Random(seed)
    deep = sorted(rng.sample([s for s in few if s[2] >= 2048], 60))
    shallow = sorted(rng.sample([s for s in few if s[2] < 2048], 60))
    return ["_".join(map(str, s)) for s in deep], ["_".join(map(str, s)) for s in shallow]


if __name__ == "__main__":
    dec = decode_shapes()
    (HERE / "decode-20.txt").write_text("".join(f"{s}  # {label}\n" for s, label in dec))
    deep, shallow = fewtile()
    (HERE / "fewtile-deep-60.txt").write_text("\n".join(deep) + "\n")
    (HERE / "fewtile-shallow-60.txt").write_text("\n".join(shallow) + "\n")
    print(len(dec), len(deep), len(shallow))
