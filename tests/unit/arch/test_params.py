"""Parameter counts against hand arithmetic, parsing of every shipped config, named
approximations, and one-line ConfigErrors for malformed config.json files.

Counts follow the Hugging Face module shapes and leave out norms and biases (tokenplan.arch.params
module docstring), so a hand count below is the sum of the weight matrices only.
"""

from __future__ import annotations

import json

import pytest

from tokenplan.arch.params import param_counts
from tokenplan.catalog import load_model, model_names
from tokenplan.errors import ConfigError, TokenplanError

# ---------------------------------------------------------------- Llama-3.1-8B
# hidden 4096, vocab 128,256, 32 layers, 32 heads, 8 KV heads, head_dim 128, FFN 14,336, untied.
LLAMA_EMBEDDING = 128_256 * 4096  # = 525,336,576 (lm_head the same, untied)
# q 4096·4096 = 16,777,216; k, v 4096·8·128 = 4,194,304 each; o 4096·4096 = 16,777,216
# → 41,943,040 per layer × 32 = 1,342,177,280.
LLAMA_ATTENTION = 32 * (4096 * 4096 + 2 * 4096 * 8 * 128 + 4096 * 4096)
# gate, up, down 3·4096·14,336 = 176,160,768 per layer × 32 = 5,637,144,576.
LLAMA_FFN = 32 * 3 * 4096 * 14_336
# 2·525,336,576 + 1,342,177,280 + 5,637,144,576 = 8,029,995,008. Meta's 8.03 B (8,030,261,248)
# adds the RMSNorm weights: (2·32 + 1)·4096 = 266,240.
LLAMA_TOTAL = 8_029_995_008


def test_llama_3_1_8b_components_match_hand_count():
    p = param_counts(load_model("llama-3.1-8b"))
    assert p.embedding == LLAMA_EMBEDDING == 525_336_576
    assert p.lm_head == LLAMA_EMBEDDING
    assert p.attention == LLAMA_ATTENTION == 1_342_177_280
    assert p.dense_ffn == LLAMA_FFN == 5_637_144_576
    assert p.linear_attention == p.shared_experts == p.routed_experts == p.routed_active == 0
    assert p.total == LLAMA_TOTAL == 2 * LLAMA_EMBEDDING + LLAMA_ATTENTION + LLAMA_FFN


def test_llama_3_1_8b_total_is_meta_8_03b_less_its_norms():
    norms = (2 * 32 + 1) * 4096  # two RMSNorms per layer and a final one: 266,240
    assert param_counts(load_model("llama-3.1-8b")).total + norms == 8_030_261_248


def test_llama_active_matmul_excludes_embedding_lookup():
    # A token multiplies through lm_head, attention and FFN but only looks up its embedding:
    # 525,336,576 + 1,342,177,280 + 5,637,144,576 = 7,504,658,432.
    assert param_counts(load_model("llama-3.1-8b")).active_matmul == 7_504_658_432


# ---------------------------------------------------------------- DeepSeek-V3
# hidden 7168, vocab 129,280, 61 layers (first 3 dense), 128 heads, q_lora 1536, kv_lora 512,
# nope 128 + rope 64 = 192 per q/k head, v 128; dense FFN 18,432; 256 routed experts of 2048,
# top 8, one shared expert of 2048; 1 MTP layer.
DSV3_EMBEDDING = 7168 * 129_280  # = 926,679,040
# MLA per layer (arXiv:2412.19437 §2.1):
#   q_a 7168·1536 = 11,010,048;  q_b 1536·128·192 = 37,748,736;
#   kv_a 7168·(512 + 64) = 4,128,768;  kv_b 512·128·(128 + 128) = 16,777,216;
#   o 128·128·7168 = 117,440,512  → 187,105,280 per layer.
DSV3_ATTN_LAYER = 187_105_280
# dense FFN 3·7168·18,432 = 396,361,728 × 3 layers = 1,189,085,184.
DSV3_DENSE = 3 * 396_361_728
# one expert 3·7168·2048 = 44,040,192; router 7168·256 = 1,835,008.
DSV3_EXPERT = 44_040_192
# 58 MoE layers: shared + router (44,040,192 + 1,835,008 = 45,875,200) × 58 = 2,660,761,600;
# routed 44,040,192 × 256 × 58 = 653,908,770,816; active 44,040,192 × 8 × 58 = 20,434,649,088.
DSV3_SHARED = 2_660_761_600
DSV3_ROUTED = 653_908_770_816
DSV3_ROUTED_ACTIVE = 20_434_649_088
# total = 2·926,679,040 + 61·187,105,280 (= 11,413,422,080) + 1,189,085,184 + 2,660,761,600
#       + 653,908,770,816 = 671,025,397,760 ≈ 671 B (the report's 671 B main model).
DSV3_TOTAL = 671_025_397_760


def test_deepseek_v3_components_match_hand_count():
    p = param_counts(load_model("deepseek-v3"))
    assert DSV3_EMBEDDING == 926_679_040 and p.embedding == p.lm_head == DSV3_EMBEDDING
    assert (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168) == DSV3_ATTN_LAYER
    assert p.attention == 61 * DSV3_ATTN_LAYER == 11_413_422_080
    assert p.dense_ffn == DSV3_DENSE == 1_189_085_184
    assert 3 * 7168 * 2048 == DSV3_EXPERT
    assert p.shared_experts == 58 * (DSV3_EXPERT + 7168 * 256) == DSV3_SHARED
    assert p.routed_experts == 58 * 256 * DSV3_EXPERT == DSV3_ROUTED
    assert p.routed_active == 58 * 8 * DSV3_EXPERT == DSV3_ROUTED_ACTIVE


def test_deepseek_v3_total_is_671b():
    assert param_counts(load_model("deepseek-v3")).total == DSV3_TOTAL
    assert 2 * DSV3_EMBEDDING + 61 * DSV3_ATTN_LAYER + DSV3_DENSE + DSV3_SHARED + DSV3_ROUTED == DSV3_TOTAL


def test_deepseek_v3_active_parameters_are_about_37b():
    # lm_head 926,679,040 + attention 11,413,422,080 + dense 1,189,085,184 + shared 2,660,761,600
    # + routed active 20,434,649,088 = 36,624,596,992 (the report's "37 B activated" counts the
    # embedding too: + 0.93 B = 37.55 B).
    assert param_counts(load_model("deepseek-v3")).active_matmul == 36_624_596_992


def test_deepseek_v3_mtp_layer_is_one_decoder_layer_plus_its_projection():
    # attention 187,105,280 + MoE FFN (shared+router 45,875,200 + routed 256·44,040,192 =
    # 11,274,289,152) + eh_proj 2·7168·7168 = 102,760,448 → 11,610,030,080.
    assert param_counts(load_model("deepseek-v3")).mtp == 11_610_030_080


# ---------------------------------------------------------------- Qwen3.6-27B
# text_config: hidden 5120, vocab 248,320, 64 layers (16 full attention, 48 Gated DeltaNet),
# 24 heads × 256 with an output gate, 4 KV heads; GDN 16 k-heads, 48 v-heads, 128 × 128,
# conv kernel 4; dense FFN 17,408 on every layer; untied.
QWEN36_EMBEDDING = 5120 * 248_320  # = 1,271,398,400
# attention: q with gate 5120·24·256·2 = 62,914,560; k, v 5120·4·256 = 5,242,880 each;
# o 24·256·5120 = 31,457,280 → 104,857,600 × 16 = 1,677,721,600.
QWEN36_ATTENTION = 16 * (5120 * 24 * 256 * 2 + 2 * 5120 * 4 * 256 + 24 * 256 * 5120)
# GDN: in_proj 5120·(q,k 2·16·128 + v,z 2·48·128 + b,a 2·48 = 16,480) = 84,377,600;
# conv (2·16·128 + 48·128 = 10,240)·4 = 40,960; out 48·128·5120 = 31,457,280
# → 115,875,840 × 48 = 5,562,040,320.
QWEN36_LINEAR = 48 * (5120 * 16_480 + 10_240 * 4 + 48 * 128 * 5120)
# FFN 3·5120·17,408 = 267,386,880 × 64 = 17,112,760,320.
QWEN36_FFN = 64 * 3 * 5120 * 17_408
# total 2·1,271,398,400 + 1,677,721,600 + 5,562,040,320 + 17,112,760,320 = 26,895,319,040.
QWEN36_TOTAL = 26_895_319_040


def test_qwen3_6_27b_components_match_hand_count():
    p = param_counts(load_model("qwen3.6-27b"))
    assert p.embedding == p.lm_head == QWEN36_EMBEDDING == 1_271_398_400
    assert p.attention == QWEN36_ATTENTION == 1_677_721_600
    assert p.linear_attention == QWEN36_LINEAR == 5_562_040_320
    assert p.dense_ffn == QWEN36_FFN == 17_112_760_320
    assert p.total == QWEN36_TOTAL
    assert 2 * QWEN36_EMBEDDING + QWEN36_ATTENTION + QWEN36_LINEAR + QWEN36_FFN == QWEN36_TOTAL


# ---------------------------------------------------------------- two MoE checks against model cards
def test_mixtral_8x7b_total_is_46_7b():
    # embeddings 2·32,000·4096 = 262,144,000; attention 32·41,943,040 = 1,342,177,280;
    # routers 32·4096·8 = 1,048,576; experts 32·8·3·4096·14,336 = 45,097,156,608
    # → 46,702,526,464 (Mistral: 46.7 B).
    assert param_counts(load_model("mixtral-8x7b")).total == 46_702_526_464


def test_gpt_oss_120b_total_is_116_8b():
    # embeddings 2·2880·201,088 = 1,158,266,880; attention 36·(q 2880·64·64 + k,v 2·2880·8·64
    # + o 64·64·2880 = 26,542,080) = 955,514,880; routers 36·2880·128 = 13,271,040;
    # experts 36·128·3·2880·2880 = 114,661,785,600 → 116,788,838,400 (OpenAI: 116.83 B).
    assert param_counts(load_model("gpt-oss-120b")).total == 116_788_838_400


# ---------------------------------------------------------------- every shipped config
@pytest.mark.parametrize("name", model_names())
def test_every_shipped_config_parses_and_its_layers_add_up(name):
    spec = load_model(name)
    ffn_only = spec.num_layers - spec.full_attention_layers - spec.sliding_layers - spec.linear_layers
    assert ffn_only >= 0
    assert spec.full_attention_layers + spec.sliding_layers + spec.linear_layers > 0
    assert param_counts(spec).total > 0


def test_the_catalog_ships_every_reference_config():
    names = set(model_names())
    assert {
        "llama-3.1-8b",
        "deepseek-v3",
        "qwen3.6-27b",
        "gpt-oss-120b",
        "glm-5",
        "minimax-m3",
        "nemotron-3-nano-30b-a3b",
        "qwen3-next-80b-a3b",
    } <= names


@pytest.mark.parametrize("name", ["glm-5", "minimax-m3", "nemotron-3-nano-30b-a3b"])
def test_architectures_modelled_approximately_name_their_approximation(name):
    assert load_model(name).approximations


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v3", "qwen3.6-27b", "gpt-oss-120b", "mixtral-8x7b"])
def test_exactly_modelled_architectures_carry_no_approximation(name):
    assert load_model(name).approximations == ()


# ---------------------------------------------------------------- malformed config.json
_LLAMA_LIKE = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "intermediate_size": 4096,
}


def _write(tmp_path, payload) -> str:
    path = tmp_path / "config.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    return str(path)


def test_a_small_local_config_parses_by_path(tmp_path):
    spec = load_model(_write(tmp_path, _LLAMA_LIKE))
    # embeddings 2·1000·1024 = 2,048,000; attention 2·(1024·1024·2 + 2·1024·2·128) = 5,242,880;
    # FFN 2·3·1024·4096 = 25,165,824 → 32,456,704.
    assert param_counts(spec).total == 32_456_704


def test_tied_embeddings_have_no_separate_lm_head(tmp_path):
    spec = load_model(_write(tmp_path, {**_LLAMA_LIKE, "tie_word_embeddings": True}))
    assert param_counts(spec).lm_head == 0
    assert param_counts(spec).total == 32_456_704 - 1000 * 1024


def test_nested_text_config_is_read(tmp_path):
    nested = {"architectures": ["X"], "text_config": {k: v for k, v in _LLAMA_LIKE.items() if k != "architectures"}}
    assert load_model(_write(tmp_path, nested)).hidden_size == 1024


def test_missing_hidden_size_raises_config_error_naming_the_key(tmp_path):
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k != "hidden_size"}
    path = _write(tmp_path, cfg)
    with pytest.raises(ConfigError) as info:
        load_model(path)
    assert info.value.key == "hidden_size"
    assert "hidden_size" in str(info.value) and path in str(info.value)
    assert "\n" not in str(info.value)


def test_wrong_type_raises_config_error_naming_the_key(tmp_path):
    path = _write(tmp_path, {**_LLAMA_LIKE, "num_hidden_layers": "two"})
    with pytest.raises(ConfigError) as info:
        load_model(path)
    assert info.value.key == "num_hidden_layers"
    assert "'two'" in str(info.value)


def test_boolean_is_not_accepted_as_an_integer(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_model(_write(tmp_path, {**_LLAMA_LIKE, "num_attention_heads": True}))
    assert info.value.key == "num_attention_heads"


def test_kv_heads_that_do_not_divide_heads_raise_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_model(_write(tmp_path, {**_LLAMA_LIKE, "num_key_value_heads": 3}))
    assert info.value.key == "num_key_value_heads"


def test_invalid_json_raises_config_error_naming_the_line(tmp_path):
    path = _write(tmp_path, '{"hidden_size": 1024,\n "num_hidden_layers": }')
    with pytest.raises(ConfigError) as info:
        load_model(path)
    assert info.value.key == "line 2"
    assert "not valid JSON" in str(info.value)


def test_a_json_array_is_not_a_config(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_model(_write(tmp_path, "[1, 2]"))
    assert info.value.key == "<root>"


def test_unknown_model_name_is_a_tokenplan_error():
    with pytest.raises(TokenplanError, match="not in the catalog"):
        load_model("no-such-model")


def test_more_experts_per_token_than_routed_experts_is_a_config_error(tmp_path):
    moe = {**_LLAMA_LIKE, "num_local_experts": 8, "num_experts_per_tok": 9, "moe_intermediate_size": 512}
    with pytest.raises(ConfigError) as info:
        load_model(_write(tmp_path, moe))
    assert info.value.key == "num_experts_per_tok" and "at most the 8 routed experts, got 9" in str(info.value)
