"""Shapes from transformer configs (``--shapes model:...``): derivation, sharding, errors, and a
CPU compare that records the model and layer of each row."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.model_shapes import BUNDLED, DEFAULT_BATCHES, load_config, layer_gemms, model_shapes
from harness.problem import Shape
from harness.shapes import ShapeError, parse_shapes, resolve_shapes

pytest.importorskip("transformers")  # in the test extras; without it model: entries are one clear error

# Published hidden sizes: the K of every layer reading the residual stream (qkv, gate/up, LM
# head) and the N of every layer writing it (o, down).
HIDDEN = {"Llama-3.1-8B": 4096, "Qwen2.5-7B": 3584, "Mistral-Nemo-12B": 5120, "Phi-3-mini-4k": 3072}


def gemms(name: str, tp: int = 1) -> dict[str, tuple[int, int]]:
    cfg, label = load_config(name)
    return {layer: (n, k) for layer, n, k in layer_gemms(cfg, label, tp)}


def test_bundled_configs_load_offline_and_match_their_hidden_size():
    assert set(HIDDEN) <= set(BUNDLED)
    for name, hidden in HIDDEN.items():
        g = gemms(name)
        assert [g[x][1] for x in ("qkv_proj", "gate_up_proj", "lm_head")] == [hidden] * 3, name
        assert [g[x][0] for x in ("o_proj", "down_proj")] == [hidden] * 2, name


def test_llama_and_mistral_nemo_gemms():
    # Llama-3.1-8B: 32 heads of 128, 8 KV heads (GQA), MLP 14336, vocabulary 128256
    assert gemms("llama-3.1-8b") == {"qkv_proj": (6144, 4096), "o_proj": (4096, 4096),
                                     "gate_up_proj": (28672, 4096), "down_proj": (4096, 14336),
                                     "lm_head": (128256, 4096)}
    # Mistral-Nemo: head_dim 128 given explicitly, not hidden / heads = 160: attention is 4096 wide
    assert gemms("Mistral-Nemo-12B") == {"qkv_proj": (6144, 5120), "o_proj": (5120, 4096),
                                         "gate_up_proj": (28672, 5120), "down_proj": (5120, 14336),
                                         "lm_head": (131072, 5120)}
    # Phi-3-mini: multi-head attention (32 KV heads)
    assert gemms("Phi-3-mini-4k")["qkv_proj"] == (3 * 3072, 3072)


def test_tensor_parallel_splits_n_of_column_and_k_of_row_parallel_layers():
    assert gemms("Llama-3.1-8B", tp=2) == {"qkv_proj": ((16 + 2 * 4) * 128, 4096), "o_proj": (4096, 2048),
                                           "gate_up_proj": (14336, 4096), "down_proj": (4096, 7168),
                                           "lm_head": (64128, 4096)}
    # 8 KV heads over 16 ranks: each rank keeps one copy
    assert gemms("Llama-3.1-8B", tp=16)["qkv_proj"] == ((2 + 2 * 1) * 128, 4096)
    assert gemms("Qwen2.5-7B", tp=4)["lm_head"] == (152064 // 4, 3584)


def test_model_entries_give_m_per_batch_and_mix_with_other_entries():
    sel = resolve_shapes(["model:Qwen2.5-7B@batch=1,8,64_64_64", "model:qwen2.5-7b@tp=2@batch=4"])
    names = [s.name for s in sel.shapes]
    assert names[:5] == ["1_4608_3584", "1_3584_3584", "1_37888_3584", "1_3584_18944", "1_152064_3584"]
    assert names[5:11] == ["8_4608_3584", "8_3584_3584", "8_37888_3584", "8_3584_18944", "8_152064_3584",
                           "64_64_64"]
    assert "64_64_64" not in sel.origins
    assert sel.origins["4_2304_3584"][0].model == "Qwen2.5-7B@tp=2"
    assert [o.layer for o in sel.origins["8_3584_18944"]] == ["down_proj"]
    assert len(parse_shapes("model:Phi-3-mini-4k")) == 5 * len(DEFAULT_BATCHES)


def tiny_config(tmp_path, **overrides):
    """A llama-type config whose o and down projections are the same GEMM (64 x 64)."""
    d = tmp_path / "tiny-llama"
    d.mkdir(exist_ok=True)
    cfg = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=64,
               num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, vocab_size=96,
               hidden_act="silu")
    cfg.update(overrides)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_a_shape_two_layers_share_is_listed_once_with_both_origins(tmp_path):
    d = tiny_config(tmp_path)
    sel = resolve_shapes(f"model:{d}@batch=2 model:{d / 'config.json'}@batch=2")  # the same model twice
    assert [s.name for s in sel.shapes] == ["2_128_64", "2_64_64", "2_96_64"]  # each measured once
    assert [(o.model, o.layer) for o in sel.origins["2_64_64"]] == [("tiny-llama", "o_proj"),
                                                                    ("tiny-llama", "down_proj")]
    # qkv (4 + 2*2 heads of 16) and gate+up (2 x 64) are both 128 x 64: shared too
    assert [o.layer for o in sel.origins["2_128_64"]] == ["qkv_proj", "gate_up_proj"]


def test_a_plain_mlp_has_up_proj(tmp_path):
    d = tmp_path / "tiny-gpt2"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(model_type="gpt2", n_embd=64, n_head=4, n_layer=1,
                                                   vocab_size=100, n_inner=None)))
    layers = {o.layer: s for s, o in model_shapes(f"model:{d}@batch=1")}
    assert layers["up_proj"] == Shape(1, 256, 64) and layers["down_proj"] == Shape(1, 64, 256)
    assert layers["qkv_proj"] == Shape(1, 192, 64) and "gate_up_proj" not in layers


@pytest.mark.parametrize("entry,needle", [
    ("model:no-such-model", "not a bundled config"),
    ("model:", "names no config"),
    ("model:Llama-3.1-8B@batch=0", "positive integers"),
    ("model:Llama-3.1-8B@batch=x", "positive integers"),
    ("model:Llama-3.1-8B@tp=3", "does not divide by tp=3"),
    ("model:Llama-3.1-8B@seq=4", "unknown option"),
])
def test_bad_model_entries_are_clear_errors(entry, needle):
    with pytest.raises(ShapeError, match=needle):
        parse_shapes(entry)


def test_unknown_and_mixture_of_experts_models_are_refused(tmp_path):
    with pytest.raises(ShapeError, match="not known to have a gated or a plain MLP"):
        parse_shapes(f"model:{tiny_config(tmp_path, model_type='bert', architectures=['BertModel'])}")
    with pytest.raises(ShapeError, match="mixture-of-experts"):
        parse_shapes(f"model:{tiny_config(tmp_path, model_type='mixtral', num_local_experts=8)}")


def test_without_transformers_a_model_entry_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(ShapeError, match="need transformers"):
        parse_shapes("model:Llama-3.1-8B")
    assert parse_shapes("64_64_64") == [Shape(64, 64, 64)]  # nothing else needs it


@pytest.mark.parametrize("isolate", ["off", "on"])  # in process, and through the sandbox's worker
def test_compare_on_cpu_records_model_and_layer(tmp_path, isolate):
    d = tiny_config(tmp_path)
    out = tmp_path / "r.parquet"
    res = CliRunner().invoke(app, ["compare", "--device", "cpu", "--shapes", f"model:{d}@batch=1,8 7_9_11",
                                   "--methods", "torch", "--layouts", "tn", "--budget", "0.1", "--isolate", isolate,
                                   "--out", str(out), "--seed", "1"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out).set_index("shape")
    assert (df["status"] == "ok").all()
    assert len(df) == 2 * 3 + 1  # per batch: 128x64 (qkv, gate_up), 64x64 (o, down), 96x64 (lm_head)
    assert df.loc["8_64_64", "source_model"] == "tiny-llama;tiny-llama"
    assert df.loc["8_64_64", "source_layer"] == "o_proj;down_proj"
    assert df.loc["1_96_64", "source_layer"] == "lm_head"
    assert pd.isna(df.loc["7_9_11", "source_model"]) and pd.isna(df.loc["7_9_11", "source_layer"])
