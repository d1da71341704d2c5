"""Kimi-K2.5 is released with INT4 routed experts (compressed-tensors, group size 32: ROCm/ATOM
recipes/Kimi-K2.5.md), served as w4a16; our copy of its config.json has no
quantization_config, and a break-it pass found it sized as BF16 (240.8 GiB of weights per B200 at
TP8: no layout fitted on 8× B200, where the release runs). Only its routed experts are INT4: the
release's compressed-tensors ``ignore`` list keeps attention, the shared experts and the dense
layer in BF16 (``arch.quant_scope``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan import PredictRequest, predict
from tokenplan.arch.params import quantized_components
from tokenplan.catalog import load_model
from tokenplan.units import Dtype

MODELS = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models"

GIB = 2**30


def test_kimi_k25_is_sized_in_its_released_int4_format():
    result = predict(PredictRequest(model="kimi-k2.5", gpu="b200", tp=8, num_gpus=8, weight_dtype="auto"))
    assert result.weight_dtype == "w4a16"
    # By hand from its parameter counts (arch.params): the routed experts, 1,014.69 B at 0.5 + 2.5/128 B
    # (w4a16, units.py), over 8 GPUs; the release's ignore list keeps attention, the dense FFN
    # (0.40 B) and the shared experts (2.81 B) at 2 B, as the 1.17 B embedding, 1.17 B lm_head and
    # 0.17 B router. MLA's down-projections (61 layers × 7,168 × (1,536 + 576) = 0.92 B) are whole
    # on every GPU, the rest of attention's 6.17 B shards by 8: 1.58 B per GPU.
    # 65.92 + 3.16 + 0.80 + 0.63 GB = 70.48 GB = 65.64 GiB per GPU.
    mla_down = 61 * 7_168 * (1_536 + 576)
    attention = (6_168_444_928 - mla_down) / 8 + mla_down
    hand = (
        1_014_686_023_680 * (0.5 + 2.5 / 128) / 8
        + attention * 2
        + (396_361_728 + 2_807_562_240) * 2 / 8
        + (1_174_405_120 * 2 + 165_150_720) * 2 / 8
    )
    assert hand / GIB > 65.6
    assert hand <= result.weight_bytes_per_gpu < 1.02 * hand  # norms and MLA's small pieces besides


def test_a_user_copy_of_the_release_config_reads_the_same_scope(tmp_path):
    # The release's quantization_config (Kimi-K2-Thinking's and K2.5's ignore list) in a user's
    # config.json gives the same weights as the catalog entry, whose copy lost that block.
    raw = json.loads((MODELS / "kimi-k2.5.json").read_text())
    raw["text_config"]["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    spec = load_model(str(path))
    assert spec.native_weight_dtype == "w4a16"
    assert quantized_components(spec, Dtype.W4A16) == ("routed_experts",)
    catalog = predict(PredictRequest(model="kimi-k2.5", gpu="b200", tp=8, num_gpus=8, weight_dtype="auto"))
    mine = predict(PredictRequest(model=str(path), gpu="b200", tp=8, num_gpus=8, weight_dtype="auto"))
    assert mine.weight_bytes_per_gpu == pytest.approx(catalog.weight_bytes_per_gpu)


def test_another_format_named_for_the_release_keeps_that_formats_rule():
    # --weight-dtype fp8 on Kimi-K2.5 is another checkpoint (every decoder linear in FP8), so the
    # INT4 release's scope does not apply: attention then weighs 1 B per parameter, not 2.
    spec = load_model("kimi-k2.5")
    assert quantized_components(spec, Dtype.W4A16) == ("routed_experts",)
    assert "attention" in quantized_components(spec, Dtype.FP8)
