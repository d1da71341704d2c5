"""A ModelOpt MIXED_PRECISION release stores each layer in its own format (``quantized_layers``);
each component is sized at its projections' own bytes (``tokenplan.arch.quant_mixed``). Before,
the block was "not read" and the release sized as BF16 (NVIDIA ships its 4-bit Qwen3.6 releases
this way: attention in FP8, the MLPs in W4A16_NVFP4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.arch.params import component_bytes
from tokenplan.catalog import load_model
from tokenplan.units import Dtype

MODELS = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models"
NVFP4_B = 0.5 + 1 / 16  # 4-bit values + one FP8 scale per 16 (units.py)


def _layers(skip_mlp_of: int | None = None) -> dict[str, dict[str, object]]:
    """Qwen3-8B (36 layers): every attention projection FP8, every MLP projection W4A16_NVFP4
    (leaf keys, as ModelOpt writes them; vLLM resolves a key, a child or a MoE's experts module,
    not a parent such as ``mlp``)."""
    out: dict[str, dict[str, object]] = {}
    for i in range(36):
        out.update({f"model.layers.{i}.self_attn.{p}_proj": {"quant_algo": "FP8"} for p in "qkvo"})
        if i != skip_mlp_of:
            mlp = {
                f"model.layers.{i}.mlp.{p}_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 16}
                for p in ("gate", "up", "down")
            }
            out.update(mlp)
    return out


def _folder(tmp_path: Path, files: dict[str, object]) -> str:
    folder = tmp_path / str(len(list(tmp_path.iterdir())))  # a new path: load_model caches by path
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))
    return str(folder)


def _config(block: dict[str, object]) -> dict[str, object]:
    raw = json.loads((MODELS / "qwen3-8b.json").read_text())
    return {**raw, "quantization_config": block}


def test_each_component_takes_its_layers_own_bytes(tmp_path):
    block = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": _layers(skip_mlp_of=0)}
    spec = load_model(_folder(tmp_path, {"config.json": _config(block)}))
    assert spec.native_weight_dtype == "nvfp4"  # named by its 4-bit layers
    assert component_bytes(spec, Dtype.NVFP4, "attention") == 1.0  # FP8: 1 byte each
    # layer 0's MLP is listed nowhere: unquantized (vLLM "leave unquantized"), 2 bytes; the other
    # 35 of 36 equal MLPs at NVFP4's 0.5625
    assert component_bytes(spec, Dtype.NVFP4, "dense_ffn") == pytest.approx((35 * NVFP4_B + 2) / 36, rel=1e-12)
    # served in another format it is re-quantized whole: that format's bytes, not the release's
    assert component_bytes(spec, Dtype.FP8, "dense_ffn") == 1.0
    assert any("W4A16_NVFP4" in a for a in spec.approximations)


def test_the_map_can_sit_in_hf_quant_config_json(tmp_path):
    # "Newer checkpoints embed it directly; older ones keep it only in hf_quant_config.json" (vLLM)
    block = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}
    side = {
        "producer": {"name": "modelopt"},
        "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": _layers()},
    }
    spec = load_model(_folder(tmp_path, {"config.json": _config(block), "hf_quant_config.json": side}))
    assert component_bytes(spec, Dtype.NVFP4, "dense_ffn") == pytest.approx(NVFP4_B, rel=1e-12)
    # without the file the block is said unread and sized as BF16
    bare = load_model(_folder(tmp_path, {"config.json": _config(block)}))
    assert bare.native_weight_dtype == "bf16" and any("MIXED_PRECISION" in a for a in bare.approximations)


def test_an_excluded_layer_stays_16_bit_and_a_moe_takes_its_experts_parent(tmp_path):
    # Qwen3-30B-A3B: the map names each layer's mlp.experts (a parent of every expert projection)
    raw = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())
    layers = {f"model.layers.{i}.mlp.experts": {"quant_algo": "NVFP4"} for i in range(48)}
    layers.update({f"model.layers.{i}.self_attn.q_proj": {"quant_algo": "FP8"} for i in range(48)})
    block = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    block["exclude_modules"] = ["model.layers.0.mlp.experts*"]  # 1 of 48 MoE layers left BF16
    folder = _folder(tmp_path, {"config.json": {**raw, "quantization_config": block}})
    spec = load_model(folder)
    assert component_bytes(spec, Dtype.NVFP4, "routed_experts") == pytest.approx((47 * NVFP4_B + 2) / 48, rel=1e-12)
    # attention: q_proj FP8 (1 byte), k, v, o unlisted (2 bytes); Qwen3-30B-A3B's q is 32 heads ×
    # 128 × 2,048 = 8.39 M, k and v 4 × 128 × 2,048 = 1.05 M each, o 8.39 M: (8.39 + 2 × 10.49) / 18.87
    q, kv = 32 * 128 * 2048, 4 * 128 * 2048
    assert component_bytes(spec, Dtype.NVFP4, "attention") == pytest.approx(
        (q * 1 + (2 * kv + q) * 2) / (2 * q + 2 * kv), rel=1e-12
    )


def test_experts_resolve_through_their_moe_modules_children_and_the_file_joins_whole(tmp_path):
    # fused expert keys (…mlp.experts.gate_up_proj, …down_proj) are children of the MoE module
    # vLLM resolves; the map, exclude list and KV format all come from hf_quant_config.json
    raw = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())
    layers = {
        f"model.layers.{i}.mlp.experts.{p}": {"quant_algo": "NVFP4"}
        for i in range(48)
        for p in ("gate_up_proj", "down_proj")
    }
    side = {
        "producer": {"name": "modelopt"},
        "quantization": {
            "quant_algo": "MIXED_PRECISION",
            "kv_cache_quant_algo": "FP8",
            "exclude_modules": ["model.layers.1.mlp.experts*"],
            "quantized_layers": layers,
        },
    }
    block = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}
    spec = load_model(
        _folder(tmp_path, {"config.json": {**raw, "quantization_config": block}, "hf_quant_config.json": side})
    )
    assert component_bytes(spec, Dtype.NVFP4, "routed_experts") == pytest.approx((47 * NVFP4_B + 2) / 48, rel=1e-12)
    assert spec.native_kv_dtype == "fp8"


def test_a_map_the_engines_refuse_is_refused_in_one_line(tmp_path):
    from tokenplan.errors import ConfigError

    fused = _layers()
    fused["model.layers.3.self_attn.k_proj"] = {"quant_algo": "NVFP4"}  # q and v are FP8: vLLM raises
    for layers, says in ((fused, "one fused layer"), ({"model.layers.0.self_attn.q_proj": "FP8"}, "quant_algo")):
        block = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
        with pytest.raises(ConfigError, match=says) as caught:
            load_model(_folder(tmp_path, {"config.json": _config(block)}))
        assert caught.value.key.startswith("quantization_config.quantized_layers")


def test_a_listed_lm_head_is_said_to_stay_16_bit(tmp_path):
    layers = {**_layers(), "lm_head": {"quant_algo": "W4A16_NVFP4"}}
    block = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    spec = load_model(_folder(tmp_path, {"config.json": _config(block)}))
    assert any("lm_head" in a for a in spec.approximations)
