"""The GEMMs of a transformer's linear layers, from its transformers config (``--shapes model:...``).

``model:CONFIG[@batch=1,16,128][@tp=2]`` names the GEMMs one decoder layer and the LM head run
for a batch of tokens:

=============  =======================  ==========================  =========================
layer          M                        N (output features)         K (input features)
=============  =======================  ==========================  =========================
qkv_proj       tokens                   (heads + 2 kv_heads) * d    hidden
o_proj         tokens                   hidden                      heads * d
gate_up_proj   tokens                   2 * intermediate            hidden
down_proj      tokens                   hidden                      intermediate
lm_head        tokens                   vocab                       hidden
=============  =======================  ==========================  =========================

``d`` is the head size: the config's ``head_dim`` when it gives one (Mistral-Nemo: 128 with a
hidden size of 5120), else hidden / heads. ``kv_heads`` is ``num_key_value_heads`` (grouped-query
attention; heads when absent). A model whose MLP is not gated (GPT-2, GPT-NeoX, Phi-2, ...) has
``up_proj`` (N = intermediate) in place of ``gate_up_proj``. Projections are fused as serving
engines run them (one QKV GEMM, one gate+up GEMM).

``nn.Linear`` stores its weight as (out, in) = N x K, so a model runs these GEMMs in the ``tn``
layout; ``nn`` is the same product with the weight stored transposed.

Tensor parallelism (``tp``), as Megatron-LM and vLLM shard: column-parallel layers (qkv, gate/up,
LM head) split N, row-parallel ones (o, down) split K; one rank's GEMM is recorded. Heads and the
intermediate size must divide by ``tp``; KV heads fewer than ``tp`` are replicated (one per rank);
the vocabulary is split in ceil(vocab / tp) rows.

``CONFIG`` is a bundled config's name (``BUNDLED``, case-insensitive), a local directory holding
a ``config.json``, or a path to one. It is read through ``transformers.AutoConfig`` with local
files only: the hub is never asked. transformers is imported only here and only when a model is
named (it is in the ``test`` extras and on the GPU image).

Mixture-of-experts models are refused: the GEMM an expert runs depends on how tokens are routed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.problem import Shape

PREFIX = "model:"
DEFAULT_BATCHES = (1, 16, 128)  # tokens per step: decode at batch 1, 16, 128
CONFIG_DIR = Path(__file__).with_name("model_configs")
# Published configs bundled as package data (model_configs/<name>/config.json; sources in its README).
BUNDLED = tuple(sorted(p.parent.name for p in CONFIG_DIR.glob("*/config.json")))

# Whether the MLP is gated (gate and up projections, fused into one GEMM), by model_type. A
# model type not listed is refused rather than guessed: the gate doubles the first MLP GEMM's N.
GATED = frozenset({"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text", "olmo",
                   "olmo2", "granite", "cohere", "cohere2", "stablelm", "smollm3", "exaone", "glm"})
NOT_GATED = frozenset({"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "phi", "starcoder2", "opt", "bloom",
                       "nemotron"})
# Non-gated types whose config may leave the MLP width unset: then 4 x hidden, their default.
_FOUR_X_HIDDEN = frozenset({"gpt2", "gpt_bigcode", "gptj", "bloom"})
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


class ModelShapeError(ValueError):
    """A ``model:`` entry could not be turned into GEMMs (a ShapeError for the CLI)."""


@dataclass(frozen=True)
class ShapeOrigin:
    """Where a measured shape comes from: a model (its label, with ``@tp=N`` when sharded) and
    the layer whose GEMM it is."""

    model: str
    layer: str


@dataclass(frozen=True)
class ModelSpec:
    config: str
    batches: tuple[int, ...] = DEFAULT_BATCHES
    tp: int = 1


def parse_spec(token: str) -> ModelSpec:
    """``model:CONFIG[@batch=1,16][@tp=2]`` -> ModelSpec; ModelShapeError naming what is wrong."""
    if not token.startswith(PREFIX):
        raise ModelShapeError(f"{token!r} is not a model entry (model:CONFIG[@batch=...][@tp=N])")
    config, *opts = token[len(PREFIX):].split("@")
    if not config:
        raise ModelShapeError(f"{token!r} names no config: model:CONFIG with CONFIG one of "
                              f"{', '.join(BUNDLED)}, a directory or a config.json")
    batches, tp = DEFAULT_BATCHES, 1
    for opt in opts:
        key, _, value = opt.partition("=")
        if key not in ("batch", "tp"):
            raise ModelShapeError(f"{token!r}: unknown option {opt!r} (batch=B1,B2,... or tp=N)")
        try:
            values = tuple(int(v) for v in value.split(",") if v.strip())
        except ValueError:
            values = ()
        if not values or min(values) < 1 or (key == "tp" and len(values) != 1):
            raise ModelShapeError(f"{token!r}: {opt!r} needs positive integers "
                                  f"({'batch=1,16,128' if key == 'batch' else 'tp=2'})")
        if key == "batch":
            batches = values
        else:
            (tp,) = values
    return ModelSpec(config, tuple(dict.fromkeys(batches)), tp)


def _config_path(config: str) -> tuple[Path, str]:
    """(file or directory for AutoConfig, the model's label)."""
    by_name = {name.lower(): name for name in BUNDLED}
    if config.lower() in by_name:
        name = by_name[config.lower()]
        return CONFIG_DIR / name, name
    p = Path(config).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelShapeError(f"model:{config}: the directory holds no config.json")
        return p, p.resolve().name
    if p.is_file():
        return p, (p.resolve().parent.name if p.name == "config.json" else p.stem)
    raise ModelShapeError(f"model:{config}: not a bundled config ({', '.join(BUNDLED)}), not a directory, "
                          "not a config.json file (the hub is never asked: download the config first)")


def load_config(config: str):
    """(transformers config, label) for a bundled name, directory or config.json path."""
    path, label = _config_path(config)
    try:
        from transformers import AutoConfig
    except ImportError:
        raise ModelShapeError("model: shapes need transformers (pip install transformers, "
                              "or the test extras)") from None
    try:
        cfg = AutoConfig.from_pretrained(str(path), local_files_only=True)
    except Exception as e:
        raise ModelShapeError(f"model:{config}: transformers could not read {path} ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''})") from None
    get_text = getattr(cfg, "get_text_config", None)  # a multimodal config keeps its decoder's apart
    return (get_text() if callable(get_text) else cfg), label


def _int(cfg, *names, default=None) -> int | None:
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return int(v)
    return default


def _divide(what: str, value: int, tp: int, label: str) -> int:
    if value % tp:
        raise ModelShapeError(f"{label}: {what} ({value}) does not divide by tp={tp}")
    return value // tp


def layer_gemms(cfg, label: str, tp: int = 1) -> list[tuple[str, int, int]]:
    """(layer, N, K) of one decoder layer's projections and the LM head, for one rank of ``tp``."""
    model_type = getattr(cfg, "model_type", "") or ""
    if any((_int(cfg, k) or 0) > 1 for k in _EXPERT_KEYS):
        raise ModelShapeError(f"{label}: a mixture-of-experts model ({model_type}): its expert GEMMs depend on "
                              "routing, so they are not derived")
    if model_type in GATED:
        gated = True
    elif model_type in NOT_GATED:
        gated = False
    else:
        raise ModelShapeError(f"{label}: model_type {model_type!r} is not known to have a gated or a plain MLP; "
                              f"known: {', '.join(sorted(GATED | NOT_GATED))}")
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    vocab = _int(cfg, "vocab_size")
    if not (hidden and heads and vocab):
        raise ModelShapeError(f"{label}: the config lacks hidden_size, num_attention_heads or vocab_size")
    kv_heads = _int(cfg, "num_key_value_heads", default=heads)
    head_dim = _int(cfg, "head_dim") or hidden // heads
    inter = _int(cfg, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")
    if inter is None:
        if model_type not in _FOUR_X_HIDDEN:
            raise ModelShapeError(f"{label}: the config gives no intermediate_size")
        inter = 4 * hidden
    heads_rank = _divide("num_attention_heads", heads, tp, label)
    if kv_heads % tp and tp % kv_heads:
        raise ModelShapeError(f"{label}: num_key_value_heads ({kv_heads}) and tp={tp}: neither divides the other")
    kv_rank = max(1, kv_heads // tp)  # fewer KV heads than ranks: each rank keeps one copy
    inter_rank = _divide("intermediate_size", inter, tp, label)
    up = ("gate_up_proj", 2 * inter_rank, hidden) if gated else ("up_proj", inter_rank, hidden)
    return [
        ("qkv_proj", (heads_rank + 2 * kv_rank) * head_dim, hidden),
        ("o_proj", hidden, heads_rank * head_dim),
        up,
        ("down_proj", hidden, inter_rank),
        ("lm_head", -(-vocab // tp), hidden),
    ]


def model_shapes(token: str) -> list[tuple[Shape, ShapeOrigin]]:
    """Every (shape, origin) a ``model:`` entry names: each batch (M), each layer, in that order."""
    spec = parse_spec(token)
    cfg, label = load_config(spec.config)
    if spec.tp > 1:
        label = f"{label}@tp={spec.tp}"
    gemms = layer_gemms(cfg, label, spec.tp)
    return [(Shape(m, n, k), ShapeOrigin(label, layer)) for m in spec.batches for layer, n, k in gemms]


_TOKEN = re.compile(r"model:[^\s,@]*(?:@\w+=[^\s,@]*(?:,\d+(?![\d_xX]))*)*")


def model_token_at(text: str, pos: int) -> re.Match | None:
    """A ``model:`` entry starting at ``pos`` of a --shapes value. Its batch list holds commas, so
    it ends before the first comma not followed by a lone integer (``model:x@batch=1,8,64_64_64``
    is the model at batches 1 and 8, then the shape 64_64_64)."""
    return _TOKEN.match(text, pos)
