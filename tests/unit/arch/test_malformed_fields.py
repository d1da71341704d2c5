"""A config.json field of the wrong type or out of its range is refused in one line naming the
file, the key, the value and what is allowed, instead of a traceback or a silent misreading
(tester findings on ``arch/hf_config.py``): a ``max_window_layers`` that is text, negative or past
the layer count (a TypeError; -40,960 KV bytes per token), a ``layer_types`` that is not a list
(every layer taken as full attention), ``max_position_embeddings`` 0 (no context limit at all
while 128 is too short), ``decoder_sparse_step`` 0 (Hugging Face divides by it), and an
``architectures`` or ``torch_dtype`` of the wrong type.

JSON null stays "not set" for these keys, as in transformers (``layer_types=None`` derives the
types from other fields; a null ``max_window_layers`` means every layer keeps full attention, a
null ``max_position_embeddings`` no limit tokenplan knows of, a null ``architectures`` falls back
to ``model_type``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tokenplan.catalog import _PKG, load_model
from tokenplan.errors import ConfigError

# Qwen3-8B: 36 layers, 8 KV heads × 128 dims × 2 (K and V) × 2 bytes = 4,096 bytes per layer and token
QWEN3_8B = json.loads((_PKG / "models" / "qwen3-8b.json").read_text(encoding="utf-8"))
QWEN3_30B_A3B = json.loads((_PKG / "models" / "qwen3-30b-a3b.json").read_text(encoding="utf-8"))
SLIDING = {"use_sliding_window": True, "sliding_window": 4096}
WINDOW_ALLOWED = (
    "(allowed: an integer from 0 to 36, the first layers that keep full attention, the rest using the sliding window)"
)
LAYER_TYPES_ALLOWED = "(allowed: a list of 36 entries, each one of full_attention, sliding_attention, linear_attention)"


def _load(tmp_path: Path, base: dict, **changes: object):
    folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**base, **changes}), encoding="utf-8")
    return load_model(str(folder))


def _refused(tmp_path: Path, base: dict, **changes: object) -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, base, **changes)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(tmp_path)) and "config.json: " in text
    return text.split("config.json: ", 1)[1]


@pytest.mark.parametrize("bad", ["10", -10, -1, 37, 100, 10.0, True])
def test_max_window_layers_outside_0_to_the_layer_count_is_refused(tmp_path, bad):
    # transformers' Qwen2Config/Qwen3Config: layer i slides when i >= max_window_layers, so the
    # count of full-attention layers is 0 to num_hidden_layers (36)
    assert _refused(tmp_path, QWEN3_8B, **SLIDING, max_window_layers=bad) == (
        f"max_window_layers: {bad!r} is not allowed {WINDOW_ALLOWED}"
    )


@pytest.mark.parametrize(("count", "full"), [(0, 0), (10, 10), (36, 36), (None, 36)])
def test_max_window_layers_in_range_sets_the_full_layers(tmp_path, count, full):
    spec = _load(tmp_path, QWEN3_8B, **SLIDING, max_window_layers=count)
    assert (spec.full_attention_layers, spec.sliding_layers) == (full, 36 - full)
    assert spec.sliding_window == (4096 if full < 36 else 0)  # no sliding layer, no window


def test_max_window_layers_is_not_read_without_use_sliding_window(tmp_path):
    # unused without the sliding window (real Qwen configs carry counts past their layers there)
    spec = _load(tmp_path, QWEN3_8B, max_window_layers="10")
    assert (spec.full_attention_layers, spec.sliding_layers) == (36, 0)


def test_a_text_max_window_layers_is_one_error_line_from_the_cli(tmp_path):
    (tmp_path / "model").mkdir()
    config = {**QWEN3_8B, **SLIDING, "max_window_layers": "10"}
    (tmp_path / "model" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "tokenplan", "predict", "--model", "model", "--gpu", "h100-sxm"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"error: model/config.json: max_window_layers: '10' is not allowed {WINDOW_ALLOWED}"
    ]


@pytest.mark.parametrize("bad", ["full_attention", 36, {"0": "full_attention"}, True])
def test_a_layer_types_that_is_not_a_list_is_refused(tmp_path, bad):
    assert _refused(tmp_path, QWEN3_8B, layer_types=bad) == f"layer_types: {bad!r} is not allowed {LAYER_TYPES_ALLOWED}"


def test_layer_types_entries_that_are_not_names_are_refused(tmp_path):
    # a list entry could not be looked up among the known names (TypeError: unhashable type)
    text = _refused(tmp_path, QWEN3_8B, layer_types=[["full_attention"]] * 36)
    assert text.startswith("layer_types: unknown layer type ['full_attention'] (known: ")


def test_a_null_layer_types_means_not_set(tmp_path):
    # JSON null is "not set", as transformers' layer_types=None: the types come from the other
    # fields, here the sliding window over the layers from max_window_layers (30) on
    spec = _load(tmp_path, QWEN3_8B, **SLIDING, max_window_layers=30, layer_types=None)
    assert (spec.full_attention_layers, spec.sliding_layers) == (30, 6)


@pytest.mark.parametrize("bad", [0, -1, -128])
def test_max_position_embeddings_below_1_is_refused(tmp_path, bad):
    # 0 used to mean "no context limit" while 128 rejected every request as too long
    assert _refused(tmp_path, QWEN3_8B, max_position_embeddings=bad) == (
        f"max_position_embeddings: {bad} is not allowed (allowed: an integer ≥ 1, the tokens a request may span)"
    )
    assert _load(tmp_path, QWEN3_8B, max_position_embeddings=128).max_context_tokens == 128
    assert _load(tmp_path, QWEN3_8B, max_position_embeddings=None).max_context_tokens is None


@pytest.mark.parametrize("bad", [0, -1, "1"])
def test_decoder_sparse_step_below_1_is_refused(tmp_path, bad):
    # transformers' Qwen2-MoE/Qwen3-MoE: layer i has experts when (layer_idx + 1) % decoder_sparse_step == 0
    assert _refused(tmp_path, QWEN3_30B_A3B, decoder_sparse_step=bad) == (
        f"decoder_sparse_step: {bad!r} is not allowed (allowed: an integer ≥ 1, every how many layers one has experts)"
    )
    assert _load(tmp_path, QWEN3_30B_A3B, decoder_sparse_step=None).moe_layers == 48


@pytest.mark.parametrize("bad", ["Qwen3ForCausalLM", 5, {"name": "Qwen3ForCausalLM"}, [5], [""]])
def test_architectures_must_be_a_list_of_names(tmp_path, bad):
    # a bare string used to be read letter by letter: architecture "Q", with an "unknown" warning
    assert _refused(tmp_path, QWEN3_8B, architectures=bad) == (
        f'architectures: {bad!r} is not allowed (allowed: a list of model class names, e.g. ["Qwen3ForCausalLM"])'
    )


@pytest.mark.parametrize(
    ("value", "name"), [(None, "qwen3"), ([], "qwen3"), (["Qwen3ForCausalLM"], "Qwen3ForCausalLM")]
)
def test_architectures_null_or_empty_falls_back_to_model_type(tmp_path, value, name):
    assert _load(tmp_path, QWEN3_8B, architectures=value).architecture == name


@pytest.mark.parametrize(("key", "bad"), [("torch_dtype", 5), ("torch_dtype", ["bfloat16"]), ("dtype", 16)])
def test_a_dtype_that_is_not_a_name_is_refused(tmp_path, key, bad):
    raw = {k: v for k, v in QWEN3_8B.items() if k != "torch_dtype"}
    assert _refused(tmp_path, raw, **{key: bad}) == (
        f"{key}: {bad!r} is not allowed (allowed: a dtype name, e.g. bfloat16, float16, float32)"
    )


def test_an_unknown_dtype_name_is_planned_as_bf16_with_its_note(tmp_path):
    # the planner costs weights from the checkpoint's format (bf16 unless quantized or
    # --weight-dtype), not torch_dtype: an unknown name changes no result and says so
    # (tests/cli/test_bad_files_cli.py checks the warning and the equal weight bytes end to end)
    spec = _load(tmp_path, QWEN3_8B, torch_dtype="float64")
    assert spec.native_weight_dtype == "bf16"
    assert [n for n in spec.approximations if "float64" in n] == [
        "torch_dtype 'float64' is not one tokenplan knows (bfloat16, float16, float32): the checkpoint is "
        "taken as bf16, 2 bytes per weight, unless --weight-dtype names the served format"
    ]


def test_a_hybrid_override_pattern_that_is_not_text_is_refused(tmp_path):
    assert _refused(tmp_path, QWEN3_8B, hybrid_override_pattern=["M"] * 36) == (
        f"hybrid_override_pattern: {['M'] * 36!r} is not allowed (allowed: a string of 36 characters, each M, *, E or -)"
    )


def test_decoder_sparse_step_and_mlp_only_layers_place_the_dense_layers_as_transformers_does(tmp_path):
    # Qwen3MoeDecoderLayer: layer i has experts when i not in mlp_only_layers and
    # (i + 1) % decoder_sparse_step == 0. Qwen3-30B-A3B has 48 layers: step 2 leaves experts on the
    # 24 odd-indexed layers (i = 1, 3, …, 47) and a dense MLP on the 24 others; mlp_only_layers
    # [1, 2] with step 2 makes layer 1 dense too (2 is dense already): 25 dense, 23 with experts.
    # Before, every step above 1 was read as 1 (48 layers of experts).
    halved = _load(tmp_path, QWEN3_30B_A3B, decoder_sparse_step=2, intermediate_size=6144)
    assert (halved.dense_ffn_layers, halved.num_layers - halved.dense_ffn_layers) == (24, 24)
    listed = _load(tmp_path, QWEN3_30B_A3B, decoder_sparse_step=2, mlp_only_layers=[1, 2], intermediate_size=6144)
    assert listed.dense_ffn_layers == 25
    allowed = "(allowed: a list of distinct layer indices from 0 to 47)"
    for bad in (["1"], [48], [-1], [3, 3], "1"):
        assert _refused(tmp_path, QWEN3_30B_A3B, mlp_only_layers=bad, intermediate_size=6144) == (
            f"mlp_only_layers: {bad!r} is not allowed {allowed}"
        )


def test_tie_word_embeddings_must_be_true_or_false(tmp_path):
    # bool("false") is True: a separate lm_head (151,936 × 4,096 weights for Qwen3-8B) was dropped
    assert _refused(tmp_path, QWEN3_8B, tie_word_embeddings="false") == (
        "tie_word_embeddings: 'false' is not allowed (allowed: true or false)"
    )
    assert _load(tmp_path, QWEN3_8B, tie_word_embeddings=None).tie_word_embeddings is False


def test_sparse_attention_counts_must_be_integers(tmp_path):
    sparse = {"use_sparse_attention": True, "sparse_block_size": "64", "sparse_topk_blocks": 16}
    assert _refused(tmp_path, QWEN3_8B, sparse_attention_config=sparse) == (
        "sparse_attention_config.sparse_block_size: '64' is not allowed (allowed: an integer ≥ 0)"
    )
    off = {"use_sparse_attention": False, "sparse_block_size": "64"}  # off: its counts are not read
    assert _load(tmp_path, QWEN3_8B, sparse_attention_config=off).num_layers == 36


DEEPSEEK_V3 = json.loads((_PKG / "models" / "deepseek-v3.json").read_text(encoding="utf-8"))
QWEN3_6_27B = json.loads((_PKG / "models" / "qwen3.6-27b.json").read_text(encoding="utf-8"))


def test_moe_layer_freq_puts_experts_on_every_freq_th_layer_and_refuses_text(tmp_path):
    # DeepSeek (modeling_deepseek.py): experts where layer_idx >= first_k_dense_replace (3) and
    # layer_idx % moe_layer_freq == 0. Of 61 layers, freq 1: 3..60 → 58 MoE layers; freq 2: the
    # even ones of 4..60 → 29, the other 32 dense.
    assert (load_model("deepseek-v3").moe_layers, load_model("deepseek-v3").dense_ffn_layers) == (58, 3)
    every_other = _load(tmp_path, DEEPSEEK_V3, moe_layer_freq=2)
    assert (every_other.moe_layers, every_other.dense_ffn_layers) == (29, 32)
    with pytest.raises(ConfigError, match="moe_layer_freq: '2' is not allowed"):
        _load(tmp_path, DEEPSEEK_V3, moe_layer_freq="2")


def test_an_ssm_dtype_the_engines_do_not_take_names_the_configs_key(tmp_path):
    text = QWEN3_6_27B.get("text_config", QWEN3_6_27B)
    bad = {**QWEN3_6_27B, "text_config": {**text, "mamba_ssm_dtype": "int7"}} if "text_config" in QWEN3_6_27B else None
    with pytest.raises(ConfigError, match="mamba_ssm_dtype: 'int7' is not allowed"):
        _load(tmp_path, bad if bad is not None else {**QWEN3_6_27B, "mamba_ssm_dtype": "int7"})
