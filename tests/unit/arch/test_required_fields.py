"""A config.json that lacks (or nulls) a field the architecture needs is refused in one line
naming the file, the key, the value and what is allowed, instead of being modelled without it
(newuser finding 1: llama-3.1-8b without ``intermediate_size`` was weighed at 4.46 GiB, no MLP).
Models that legitimately lack a field (MoE without dense layers, hybrids) still parse.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tokenplan.arch.params import param_counts
from tokenplan.catalog import load_model
from tokenplan.errors import ConfigError

_LLAMA_LIKE = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "intermediate_size": 4096,
}
_MOE = {
    **{k: v for k, v in _LLAMA_LIKE.items() if k != "intermediate_size"},
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 512,
}


def _write(tmp_path, payload: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return str(path)


def _refused(tmp_path, payload: dict) -> ConfigError:
    path = _write(tmp_path, payload)
    with pytest.raises(ConfigError) as info:
        load_model(path)
    text = str(info.value)
    # num_hidden_layers has an upper bound too (hf_config.MAX_LAYERS): "an integer from 1 to 100000"
    assert text.startswith(f"{path}: ") and "\n" not in text
    assert "(allowed: an integer ≥ 1" in text or "(allowed: an integer from 1 to 100000" in text
    return info.value


def test_a_dense_model_without_intermediate_size_is_refused(tmp_path):
    error = _refused(tmp_path, {k: v for k, v in _LLAMA_LIKE.items() if k != "intermediate_size"})
    assert "intermediate_size" in error.key
    assert "required key is missing" in str(error) and "MLP width of 2 dense layers" in str(error)


def test_a_null_intermediate_size_is_refused_showing_null(tmp_path):
    error = _refused(tmp_path, {**_LLAMA_LIKE, "intermediate_size": None})
    assert error.key == "intermediate_size" and "null is not allowed" in str(error)


@pytest.mark.parametrize("bad", [0, -5, 2.5, "4096", True])
def test_an_invalid_intermediate_size_is_refused_showing_the_value(tmp_path, bad):
    error = _refused(tmp_path, {**_LLAMA_LIKE, "intermediate_size": bad})
    assert error.key == "intermediate_size" and f"{bad!r} is not allowed" in str(error)


@pytest.mark.parametrize(
    "key", ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "num_key_value_heads"]
)
def test_zero_or_null_sizes_are_refused_naming_the_key(tmp_path, key):
    assert _refused(tmp_path, {**_LLAMA_LIKE, key: 0}).key == key
    if key != "num_key_value_heads":  # a null KV-head count means MHA (heads), as in HF
        assert "null is not allowed" in str(_refused(tmp_path, {**_LLAMA_LIKE, key: None}))


def test_moe_expert_width_is_required_and_named(tmp_path):
    error = _refused(tmp_path, {k: v for k, v in _MOE.items() if k != "moe_intermediate_size"})
    assert error.key == "moe_intermediate_size or intermediate_size" and "each of the 8 experts" in str(error)
    assert _refused(tmp_path, {**_MOE, "moe_intermediate_size": -1}).key == "moe_intermediate_size"


def test_an_moe_model_without_dense_layers_needs_no_intermediate_size(tmp_path):
    spec = load_model(_write(tmp_path, _MOE))
    # no dense layer: the only FFN weights are 2 layers × 8 experts × 3 · 1024 · 512 = 25,165,824
    assert spec.dense_ffn_layers == 0 and spec.dense_intermediate == 0
    assert param_counts(spec).routed_experts == 2 * 8 * 3 * 1024 * 512 == 25_165_824


def test_dense_first_layers_of_an_moe_model_need_their_width(tmp_path):
    error = _refused(tmp_path, {**_MOE, "first_k_dense_replace": 1})
    assert "MLP width of 1 dense layers" in str(error)
    too_many = tmp_path / "many"
    too_many.mkdir()
    with pytest.raises(
        ConfigError, match=r"first_k_dense_replace: 3 is not allowed \(allowed: an integer from 0 to 2,"
    ):
        load_model(_write(too_many, {**_MOE, "first_k_dense_replace": 3, "intermediate_size": 4096}))


@pytest.mark.parametrize(
    ("key", "value"), [("decoder_sparse_step", 1), ("n_shared_experts", 1), ("first_k_dense_replace", 1)]
)
def test_with_dense_layers_or_shared_experts_intermediate_size_is_not_the_experts_width(tmp_path, key, value):
    # newuser2 finding 3: a Qwen-MoE or DeepSeek config without moe_intermediate_size had its
    # experts read at intermediate_size (the dense MLP's width): Qwen3-30B-A3B at 6,144 instead of
    # 768, 54.38 GiB of weights instead of 7.13. Beside dense layers or shared experts the experts'
    # width must be stated.
    raw = {k: v for k, v in _MOE.items() if k != "moe_intermediate_size"} | {"intermediate_size": 4096, key: value}
    error = _refused(tmp_path, raw)
    assert error.key == "moe_intermediate_size" and f"with {key} set" in str(error)


def test_mixtral_style_experts_take_intermediate_size(tmp_path):
    # Mixtral, gpt-oss, MiniMax-M2: every layer MoE, the experts' width written as intermediate_size:
    # 2 layers × 8 experts × 3 · 1024 · 4096 = 201,326,592 routed parameters.
    raw = {k: v for k, v in _MOE.items() if k != "moe_intermediate_size"} | {"intermediate_size": 4096}
    assert param_counts(load_model(_write(tmp_path, raw))).routed_experts == 2 * 8 * 3 * 1024 * 4096 == 201_326_592


def test_hidden_size_not_divisible_by_heads_needs_head_dim(tmp_path):
    # 1,025 / 8 heads = 128.125: there is no head width to take from hidden_size
    error = _refused(tmp_path, {**_LLAMA_LIKE, "hidden_size": 1025})
    assert error.key == "head_dim" and "hidden_size 1025 is not a multiple of 8 heads" in str(error)
    # with an explicit head_dim it is a valid (if unusual) shape: q 1025·8·128 = 1,049,600 per layer
    assert load_model(_write(tmp_path, {**_LLAMA_LIKE, "hidden_size": 1025, "head_dim": 128})).hidden_size == 1025


def test_sliding_layers_need_a_window(tmp_path):
    types = {**_LLAMA_LIKE, "layer_types": ["sliding_attention", "full_attention"]}
    assert _refused(tmp_path, types).key == "sliding_window"
    assert load_model(_write(tmp_path, {**types, "sliding_window": 128})).sliding_window == 128


def test_memory_refuses_llama_without_intermediate_size_in_one_line(tmp_path):
    import tokenplan.catalog

    models = Path(tokenplan.catalog.__file__).parent / "models"
    raw = json.loads((models / "llama-3.1-8b.json").read_text(encoding="utf-8"))
    del raw["intermediate_size"]
    path = _write(tmp_path, raw)
    run = subprocess.run(
        [sys.executable, "-m", "tokenplan", "memory", "--model", path, "--gpu", "h100-sxm", "--tp", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"error: {path}: dense_intermediate_size or intermediate_size: required key is missing "
        "(allowed: an integer ≥ 1, the MLP width of 32 dense layers)"
    ]
