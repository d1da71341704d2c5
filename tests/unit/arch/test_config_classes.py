"""What a config.json leaves to its model class (``tokenplan.arch.hf_defaults``) and architectures
the generic fields misread (a break-it pass with hand-written configs of models not in the catalog:
each case below was silently wrong or refused before). Expected values are derived by hand from
the config fields and the transformers modelling code each comment names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.model_configs import llama4_config, llama4_scout

from tokenplan.arch.kv import kv_bytes_per_token
from tokenplan.arch.params import param_counts
from tokenplan.catalog import load_model
from tokenplan.errors import ConfigError
from tokenplan.units import Dtype


def _load(tmp_path: Path, cfg: dict, name: str = "config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return load_model(str(path))


def test_llama4_maverick_has_interleaved_moe_layers_and_a_shared_expert(tmp_path):
    # Llama4TextDecoderLayer: layer i has experts when (i + 1) % 2 == 0 → 24 MoE, 24 dense layers;
    # dense MLP 3 × 5,120 × 16,384 = 251,658,240 per layer; each MoE layer 128 routed experts and one
    # shared expert of 3 × 5,120 × 8,192 = 125,829,120. By hand:
    #   routed 24 × 128 × 125,829,120 = 386,547,056,640; shared 24 × 125,829,120 = 3,019,898,880;
    #   dense 24 × 251,658,240 = 6,039,797,760. Before: 48 MoE layers, 778 B parameters, no shared.
    spec = _load(tmp_path, llama4_config())
    pc = param_counts(spec)
    assert (spec.moe_layers, spec.dense_ffn_layers) == (24, 24)
    assert pc.routed_experts == 386_547_056_640
    assert pc.dense_ffn == 6_039_797_760
    assert pc.shared_experts >= 3_019_898_880  # + the routers' 5,120 × 128 per MoE layer where counted there
    # attention 48 × (2 × 5,120 × 5,120 + 2 × 5,120 × 1,024) = 3,019,898,880; embedding and lm_head
    # 2 × 202,048 × 5,120 = 2,068,971,520: 400.71 B in all (Meta: "400B total parameters")
    assert pc.total == pytest.approx(400.71e9, rel=1e-3)


GEMMA3_27B_IT = {  # google/gemma-3-27b-it config.json's text fields: no vocab_size, no pattern
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "num_hidden_layers": 62,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "sliding_window": 1024,
        "max_position_embeddings": 131072,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    },
}


def test_gemma3_takes_its_class_defaults_and_slides_five_layers_of_six(tmp_path):
    # Gemma3TextConfig: vocab_size 262,208, tie_word_embeddings True, sliding_window_pattern 6 —
    # layer i keeps full attention when (i + 1) % 6 == 0: 62 // 6 = 10 full, 52 sliding. Full-layer
    # KV per token 10 × 2 × 16 × 128 × 2 B = 81,920 (it read all 62 as full: 507,904). The file
    # states no vocab_size: it was refused.
    spec = _load(tmp_path, GEMMA3_27B_IT)
    assert spec.vocab_size == 262_208 and spec.tie_word_embeddings
    assert (spec.full_attention_layers, spec.sliding_layers, spec.sliding_window) == (10, 52, 1024)
    assert kv_bytes_per_token(spec, Dtype.BF16) == 81_920
    assert param_counts(spec).lm_head == 0  # tied: no separate lm_head
    # vLLM does not scale Gemma-3's stated 131,072 by its linear factor 8 (already scaled)
    assert spec.max_context_tokens == 131_072


def test_an_ungated_mlp_has_two_matrices(tmp_path):
    # Starcoder2MLP: c_fc (6,144 → 24,576) and c_proj back, no gate: 2 × 6,144 × 24,576 × 40 layers
    # = 12,079,595,520 (it counted a gate too: 18.1 B).
    cfg = {
        "architectures": ["Starcoder2ForCausalLM"],
        "model_type": "starcoder2",
        "hidden_size": 6144,
        "intermediate_size": 24576,
        "num_hidden_layers": 40,
        "num_attention_heads": 48,
        "num_key_value_heads": 4,
        "vocab_size": 49152,
        "hidden_act": "gelu_pytorch_tanh",
    }
    spec = _load(tmp_path, cfg)
    assert spec.ffn_matrices == 2
    assert param_counts(spec).dense_ffn == 12_079_595_520


def test_yarn_lengthens_the_context_as_vllm_derives_it(tmp_path):
    # vLLM _get_and_verify_max_len: yarn → original_max_position_embeddings × factor = 32,768 × 4
    # = 131,072 (Qwen3's model card); it refused a 67,584-token request at the 40,960 stated.
    cfg = json.loads((Path(__file__).resolve().parents[3] / "src/tokenplan/catalog/models/qwen3-8b.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert _load(tmp_path, cfg).max_context_tokens == 131_072


@pytest.mark.parametrize(("model_type", "field"), [("jamba", "attn_layer_period"), ("falcon_h1", "mamba_d_state")])
def test_mamba_hybrids_whose_layers_are_not_read_are_refused(tmp_path, model_type, field):
    # Jamba read as 32 attention layers (8× its KV, no state); Falcon-H1 without its Mamba half.
    cfg = {
        "model_type": model_type,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 65536,
        field: 8,
    }
    with pytest.raises(ConfigError, match=f"model_type: '{model_type}' is not modelled"):
        _load(tmp_path, cfg)


def test_a_layer_count_past_the_cap_is_refused_not_iterated(tmp_path):
    # 2^53 layers on a MoE config hung building its per-layer lists; 100,000 is the most allowed.
    cfg = json.loads(
        (Path(__file__).resolve().parents[3] / "src/tokenplan/catalog/models/qwen3-30b-a3b.json").read_text()
    )
    cfg["num_hidden_layers"] = 2**53
    with pytest.raises(ConfigError, match="num_hidden_layers.*from 1 to 100000"):
        _load(tmp_path, cfg)


def test_a_vision_tower_it_cannot_cost_is_said(tmp_path):
    cfg = dict(GEMMA3_27B_IT, vision_config={"model_type": "siglip_vision_model", "hidden_size": 1152})
    spec = _load(tmp_path, cfg)
    assert any("vision_config is not read" in note for note in spec.approximations)


def test_vllm_checks_the_context_against_each_attention_dp_rank(tmp_path):
    # vLLM's start-up check (kv_cache_utils.check_enough_kv_cache_memory) runs in every engine
    # core, and each attention-DP rank is one: Llama-4 Scout (16 experts, MoE every layer, a
    # 1,048,576-token context here) on 8× B200 at TP8 EP8 DP-attn holds ~0.6 M tokens per rank,
    # ~4.9 M over the 8 — the sum passed the check, one rank cannot take one whole-context request.
    # The launch then sets --max-model-len to the job's longest request, which one rank holds.
    from tokenplan import PredictRequest, predict

    path = tmp_path / "config.json"
    path.write_text(json.dumps(llama4_scout(max_position_embeddings=1_048_576)))
    req = dict(model=str(path), gpu="b200", tp=8, ep=8, attention_dp=True, num_gpus=8, isl=1024, osl=1024)
    result = predict(PredictRequest(**req, engine="vllm", isl_sigma=0.0, osl_sigma=0.0))
    (said,) = [w for w in result.warnings if "max_model_len" in w]
    # fixed lengths: the longest request is 1,024 + 1,024 = 2,048 tokens
    assert "1,048,576-token context, does not fit one rank's KV cache" in said
    assert "the launch sets --max-model-len 2,048" in said


def test_the_max_model_len_fallback_holds_the_jobs_capped_requests(tmp_path):
    # a break-it pass: the fallback took the length grid's top quantile (7,481 + 27,309 = 34,791
    # on the default job), while generate --plan sends each prompt up to the ISL cap with the
    # output cap as max_tokens: vLLM refused ~10 % of them. By hand: 16,384 + 32,768 = 49,152.
    from tokenplan.api.plan import PlanRequest, plan

    (tmp_path / "config.json").write_text(json.dumps(llama4_scout()))
    result = plan(PlanRequest(model=str(tmp_path), gpus=("8xh100-sxm",), engine="vllm", isl_sigma=0.0, osl_sigma=0.0))
    out = result.to_json()
    commands = [o["launch"]["vllm"] for o in out["options"] if o.get("launch")]
    assert commands and all("--max-model-len 49152" in c for c in commands)
    assert out["job"]["osl_cap_tokens"] == 32768


def test_gemma3_without_a_stated_context_takes_its_class_default(tmp_path):
    # Gemma3TextConfig's max_position_embeddings default is 131,072; the stock 27B config states
    # none, so a 200,500-token request was planned and vLLM's start-up check skipped.
    spec = _load(
        tmp_path,
        dict(
            GEMMA3_27B_IT,
            text_config={k: v for k, v in GEMMA3_27B_IT["text_config"].items() if k != "max_position_embeddings"},
        ),
    )
    assert spec.max_context_tokens == 131_072


def test_a_rope_factor_past_any_context_is_refused_in_one_line(tmp_path):
    cfg = json.loads((Path(__file__).resolve().parents[3] / "src/tokenplan/catalog/models/qwen3-8b.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 1e305, "original_max_position_embeddings": 32768}
    with pytest.raises(ConfigError, match=r"rope_scaling\.factor: 1e\+305 gives a context of inf tokens"):
        _load(tmp_path, cfg)


def test_an_integer_past_pythons_conversion_limit_is_one_line(tmp_path):
    from tokenplan.loaders import parse_json

    # Python's own message (sys.set_int_max_str_digits) is not the user's business (a break-it pass)
    with pytest.raises(ConfigError, match="holds a number of over 4,300 digits") as caught:
        parse_json('{"bits": ' + "9" * 5000 + "}", "config.json")
    assert "set_int_max_str_digits" not in str(caught.value)


@pytest.mark.parametrize(
    ("scaling", "field", "allowed"),
    [
        ({"factor": -8, "rope_type": "linear"}, "rope_scaling.factor", "a number ≥ 1"),
        ({"factor": 0.5, "rope_type": "linear"}, "rope_scaling.factor", "a number ≥ 1"),
        ("yes", "rope_scaling", "an object, or null"),
    ],
)
def test_a_rope_scaling_transformers_would_refuse_is_one_line(tmp_path, scaling, field, allowed):
    # a break-it pass: both were read as "no scaling"; transformers' rope_config_validation
    # refuses a factor below 1, and the field is an object or null
    cfg = json.loads((Path(__file__).parents[3] / "src/tokenplan/catalog/models/llama-3.1-8b.json").read_text())
    cfg["rope_scaling"] = scaling
    with pytest.raises(ConfigError, match=rf"{field}: .*\(allowed: {allowed}\)"):
        _load(tmp_path, cfg)
