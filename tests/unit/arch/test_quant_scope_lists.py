"""Every quantization method's own list of modules it leaves unquantized sets the share of each
component the checkpoint stores quantized (``tokenplan.arch.quant_scope.exclusion_list``):
ModelOpt's ``ignore`` / ``exclude_modules`` (wildcards), FP8's ``ignored_layers`` /
``modules_to_not_convert``, AWQ's ``modules_to_not_convert``, gpt-oss's MXFP4 list. Before,
only compressed-tensors' ``ignore`` was read, and a ModelOpt NVFP4 checkpoint that keeps its
attention in BF16 was sized with 4-bit attention."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.arch.params import quantized_fraction
from tokenplan.catalog import load_model
from tokenplan.errors import ConfigError
from tokenplan.units import Dtype

MODELS = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models"
COMPONENTS = ("attention", "dense_ffn", "shared_experts", "routed_experts")


def _config(tmp_path: Path, model: str, quant: dict) -> str:
    raw = json.loads((MODELS / f"{model}.json").read_text())
    raw["quantization_config"] = quant
    folder = tmp_path / str(len(list(tmp_path.iterdir())))  # a new path: load_model caches by path
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw))
    return str(folder / "config.json")


def _shares(path: str, dtype: Dtype) -> dict[str, float]:
    spec = load_model(path)
    assert spec.native_weight_dtype == dtype.value
    return {c: quantized_fraction(spec, dtype, c) for c in COMPONENTS}


def test_modelopt_wildcards_keep_attention_at_16_bits(tmp_path):
    # config.json's block (vLLM reads "ignore" there): every layer's self_attn.* matches
    # model.layers.*.self_attn*, so no attention is stored in NVFP4; Qwen3-8B's MLPs all are
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head", "model.layers.*.self_attn*"]}
    shares = _shares(_config(tmp_path, "qwen3-8b", quant), Dtype.NVFP4)
    assert shares["attention"] == 0.0 and shares["dense_ffn"] == 1.0
    # hf_quant_config.json's nesting: exclude_modules under "quantization"; layer 0's MLP is one
    # of Qwen3-8B's 36 equal MLPs, so 35/36 of the dense FFN stays NVFP4, all of attention
    nested = {
        "quant_method": "modelopt",
        "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head", "model.layers.0.mlp*"]},
    }
    shares = _shares(_config(tmp_path, "qwen3-8b", nested), Dtype.NVFP4)
    assert shares["dense_ffn"] == pytest.approx(35 / 36, rel=1e-12) and shares["attention"] == 1.0


def test_an_fp8_router_entry_is_not_the_gate_projection(tmp_path):
    # "mlp.gate" names Qwen3-30B-A3B's router (mlp.gate), not its experts' gate_proj: matched
    # whole between dots (sgl-project/sglang#23467), every expert stays FP8
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head", "mlp.gate"]}
    shares = _shares(_config(tmp_path, "qwen3-30b-a3b", quant), Dtype.FP8)
    assert shares["routed_experts"] == 1.0 and shares["attention"] == 1.0


def test_fp8_reads_ignored_layers_before_modules_to_not_convert(tmp_path):
    # vLLM Fp8Config.from_config: ignored_layers, else modules_to_not_convert; "self_attn" holds
    # every attention projection's name whole between dots
    quant = {"quant_method": "fp8", "ignored_layers": ["self_attn"], "modules_to_not_convert": ["lm_head"]}
    shares = _shares(_config(tmp_path, "qwen3-8b", quant), Dtype.FP8)
    assert shares["attention"] == 0.0 and shares["dense_ffn"] == 1.0


def test_an_awq_list_of_other_towers_leaves_the_decoder_quantized(tmp_path):
    quant = {"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["visual"]}
    shares = _shares(_config(tmp_path, "qwen3-8b", quant), Dtype.W4A16)
    assert shares["attention"] == shares["dense_ffn"] == 1.0


def test_gpt_oss_own_list_says_what_the_mxfp4_rule_says():
    # gpt-oss-120b's config: modules_to_not_convert model.layers.*.self_attn (a parent of each
    # q/k/v/o projection), model.layers.*.mlp.router, model.embed_tokens, lm_head
    spec = load_model("gpt-oss-120b")
    assert dict(spec.native_quantized or ()) == {"attention": 0.0, "routed_experts": 1.0}


@pytest.mark.parametrize(
    ("quant", "key"),
    [
        ({"quant_method": "fp8", "modules_to_not_convert": "lm_head"}, "quantization_config.modules_to_not_convert"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": [1]}, "quantization_config.ignore"),
        ({"quant_method": "fp8", "ignored_layers": {"a": 1}}, "quantization_config.ignored_layers"),
        (
            {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "exclude_modules": {"a": 1}}},
            "quantization_config.quantization.exclude_modules",
        ),
    ],
)
def test_a_malformed_list_is_refused_naming_its_key(tmp_path, quant, key):
    with pytest.raises(ConfigError) as caught:
        load_model(_config(tmp_path, "qwen3-8b", quant))
    assert caught.value.key == key and "a list of module names" in caught.value.problem


def _folder(tmp_path: Path, model: str, files: dict[str, object]) -> str:
    folder = tmp_path / str(len(list(tmp_path.iterdir())))  # a new path: load_model caches by path
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))
    return str(folder)


# the block ModelOpt 0.29 and before wrote to hf_quant_config.json (no quant_method: vLLM names
# it by its producer)
LEGACY = {
    "producer": {"name": "modelopt", "version": "0.27.1"},
    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16},
}


def test_a_modelopt_folder_with_hf_quant_config_json_is_sized_as_released(tmp_path):
    raw = json.loads((MODELS / "qwen3-8b.json").read_text())
    quant = {**LEGACY, "quantization": {**LEGACY["quantization"], "exclude_modules": ["lm_head", "*self_attn*"]}}
    spec = load_model(_folder(tmp_path, "qwen3-8b", {"config.json": raw, "hf_quant_config.json": quant}))
    assert spec.native_weight_dtype == "nvfp4"
    assert quantized_fraction(spec, Dtype.NVFP4, "attention") == 0.0
    assert quantized_fraction(spec, Dtype.NVFP4, "dense_ffn") == 1.0
    # config.json's own block wins where it has one (ModelOpt 0.31 and after write it there)
    own = {**raw, "quantization_config": {"quant_method": "fp8"}}
    spec = load_model(_folder(tmp_path, "qwen3-8b", {"config.json": own, "hf_quant_config.json": quant}))
    assert spec.native_weight_dtype == "fp8"


def test_a_malformed_hf_quant_config_json_is_named(tmp_path):
    raw = json.loads((MODELS / "qwen3-8b.json").read_text())
    quant = {**LEGACY, "quantization": {**LEGACY["quantization"], "exclude_modules": "lm_head"}}
    with pytest.raises(ConfigError) as caught:
        load_model(_folder(tmp_path, "qwen3-8b", {"config.json": raw, "hf_quant_config.json": quant}))
    assert caught.value.path.endswith("hf_quant_config.json") and caught.value.key == "quantization.exclude_modules"
    with pytest.raises(ConfigError) as caught:
        load_model(_folder(tmp_path, "qwen3-8b", {"config.json": raw, "hf_quant_config.json": [1]}))
    assert caught.value.path.endswith("hf_quant_config.json")


def test_compressed_tensors_older_compression_config_key_is_read(tmp_path):
    # vLLM reads compression_config where quantization_config is absent
    raw = json.loads((MODELS / "qwen3-8b.json").read_text())
    raw["compression_config"] = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}},
        "ignore": ["lm_head", "re:.*self_attn.*"],
    }
    spec = load_model(_folder(tmp_path, "qwen3-8b", {"config.json": raw}))
    assert spec.native_weight_dtype == "w4a16"
    assert quantized_fraction(spec, Dtype.W4A16, "attention") == 0.0


def test_mxfp4_quantizes_the_experts_only_whatever_its_list_leaves(tmp_path):
    # vLLM's Mxfp4Config gives every linear layer UnquantizedLinearMethod: a list naming only
    # lm_head still leaves gpt-oss's attention in BF16 (a break-it pass: it was sized at MXFP4)
    quant = {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}
    spec = load_model(_config(tmp_path, "gpt-oss-20b", quant))
    assert dict(spec.native_quantized or ()) == {"attention": 0.0, "routed_experts": 1.0}


def test_nemotron_h_shared_experts_are_found_under_mixer(tmp_path):
    # Nemotron-H names them backbone.layers.N.mixer.shared_experts.{up,down}_proj
    quant = {
        "quant_method": "modelopt",
        "quant_algo": "FP8",
        "ignore": ["lm_head", "*mixer.shared_experts*"],
    }
    spec = load_model(_config(tmp_path, "nemotron-3-nano-30b-a3b", quant))
    shares = dict(spec.native_quantized or ())
    assert shares["shared_experts"] == 0.0 and shares["routed_experts"] == 1.0


def test_gptq_dynamic_negative_rules_leave_modules_out(tmp_path):
    # vLLM get_dynamic_override: a "-:" key is a regular expression matched from the name's start,
    # its modules excluded; a "+:" key only overrides bits, the module stays quantized
    quant = {"quant_method": "gptq", "bits": 4, "dynamic": {"-:.*self_attn.*": {}, "+:.*mlp.*": {"bits": 8}}}
    shares = _shares(_config(tmp_path, "qwen3-8b", quant), Dtype.W4A16)
    assert shares["attention"] == 0.0 and shares["dense_ffn"] == 1.0


def test_compressed_tensors_targets_say_what_is_quantized(tmp_path):
    # one group targeting the routed experts only: attention is not a target, so it stays BF16
    quant = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {"g": {"targets": ["re:.*mlp\\.experts\\..*"], "weights": {"num_bits": 8, "type": "float"}}},
    }
    shares = _shares(_config(tmp_path, "qwen3-30b-a3b", quant), Dtype.FP8)
    assert shares["attention"] == 0.0 and shares["routed_experts"] == 1.0


def test_a_malformed_list_under_text_config_names_that_path(tmp_path):
    raw = json.loads((MODELS / "qwen3.5-27b.json").read_text())
    raw["text_config"]["quantization_config"] = {"quant_method": "fp8", "modules_to_not_convert": "visual"}
    with pytest.raises(ConfigError) as caught:
        load_model(_folder(tmp_path, "qwen3.5-27b", {"config.json": raw}))
    assert caught.value.key == "text_config.quantization_config.modules_to_not_convert"
    # a sidecar's top-level list names the sidecar and its own key
    plain = json.loads((MODELS / "qwen3-8b.json").read_text())
    side = {"producer": {"name": "modelopt"}, "quant_algo": "FP8", "exclude_modules": "lm_head"}
    with pytest.raises(ConfigError) as caught:
        load_model(_folder(tmp_path, "qwen3-8b", {"config.json": plain, "hf_quant_config.json": side}))
    assert caught.value.path.endswith("hf_quant_config.json") and caught.value.key == "exclude_modules"


def test_a_modelopt_checkpoints_fp8_kv_is_what_auto_gives(tmp_path):
    # SGLang configure_kv_cache_dtype and vLLM resolve_kv_cache_dtype_string: --kv-cache-dtype auto
    # takes kv_cache_quant_algo FP8; Qwen3-8B's KV per token is then 36 layers × 8 KV heads × 128
    # × 2 (K and V) × 1 byte = 73,728 B (BF16: 147,456 B)
    from tokenplan.api.predict import PredictRequest, predict

    raw = json.loads((MODELS / "qwen3-8b.json").read_text())
    quant = {**LEGACY, "quantization": {**LEGACY["quantization"], "exclude_modules": ["lm_head"]}}
    folder = _folder(tmp_path, "qwen3-8b", {"config.json": raw, "hf_quant_config.json": quant})
    assert load_model(folder).native_kv_dtype == "fp8"
    served = predict(PredictRequest(model=folder, gpu="b200")).to_json()
    assert served["kv_bytes_per_token"] == 36 * 8 * 128 * 2 * 1
    # weights re-quantized to FP8 from elsewhere: not this checkpoint's KV scales, the engine's BF16
    other = predict(PredictRequest(model=folder, gpu="b200", weight_dtype="fp8")).to_json()
    assert other["kv_bytes_per_token"] == 36 * 8 * 128 * 2 * 2


def test_another_kv_format_than_the_checkpoints_own_is_refused_in_one_line(tmp_path):
    # the launch commands leave --kv-cache-dtype to the checkpoint (auto → its FP8), so a BF16-KV
    # figure would describe a server the commands do not start (a break-it pass)
    from tokenplan.api.predict import PredictRequest, predict
    from tokenplan.job.results import Rejected

    raw = json.loads((MODELS / "qwen3-8b.json").read_text())
    folder = _folder(tmp_path, "qwen3-8b", {"config.json": raw, "hf_quant_config.json": LEGACY})
    result = predict(PredictRequest(model=folder, gpu="b200", kv_dtype="bf16"))
    assert isinstance(result, Rejected)
    assert "sets an fp8 KV cache" in result.rejected and "use --kv-dtype fp8" in result.rejected
