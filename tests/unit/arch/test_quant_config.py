"""A pre-quantized checkpoint's ``quantization_config`` sets the weight format it is served in
(``tokenplan.arch.quant``): a break-it pass found every method but ``mxfp4`` read as BF16, so an AWQ
Llama-3.1-8B was sized at 15.0 GiB of weights (the BF16 model's) and planned with ``--quantization
fp8``, a method mismatch the engines refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan import PredictRequest, predict
from tokenplan.arch.quant import native_format
from tokenplan.catalog import load_model

LLAMA = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models" / "llama-3.1-8b.json"


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        # the config blocks as the checkpoints ship them (method keys per transformers / vLLM)
        ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, "fp8"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "w4a16"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "w4a16"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}, "nvfp4"),
        ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, "fp8"),
        ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "fp8"),
        ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, "nvfp4"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}, "input_activations": None}},
            },
            "w4a16",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "input_activations": None}},
            },
            "fp8",
        ),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        (None, "bf16"),
    ],
)
def test_each_method_names_the_format_it_ships(quant, expected):
    fmt, notes = native_format(quant)
    assert fmt == expected and notes == []


@pytest.mark.parametrize(
    "quant",
    [
        {"quant_method": "gptq", "bits": 8},  # 8-bit weight-only: no such served format here
        {"quant_method": "hqq", "nbits": 4},
        {"quant_method": "bitsandbytes", "load_in_8bit": True},
        "fp8",  # not an object: said, not silently bf16
    ],
)
def test_a_method_it_does_not_read_is_said_not_silently_bf16(quant):
    fmt, notes = native_format(quant)
    assert fmt == "bf16" and len(notes) == 1 and "is not read" in notes[0]


def _with(tmp_path: Path, quant: dict) -> str:
    cfg = json.loads(LLAMA.read_text())
    cfg["quantization_config"] = quant
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_an_awq_checkpoint_weighs_what_the_named_w4a16_format_weighs(tmp_path):
    # The same Llama-3.1-8B served from an AWQ checkpoint and as --weight-dtype w4a16 move the same
    # bytes; by hand: 6.98 B linear parameters at 4 bits (3.49 GB) plus embedding and lm_head
    # (2 × 128,256 × 4,096 = 1.05 B at 2 bytes: 2.10 GB) ≈ 5.6 GB = 5.2 GiB before scales, against
    # 16.06 GB (15.0 GiB) in BF16.
    path = _with(tmp_path, {"quant_method": "awq", "bits": 4, "group_size": 128})
    assert load_model(path).native_weight_dtype == "w4a16"
    served = predict(PredictRequest(model=path, gpu="h100-sxm", tp=1, weight_dtype="auto"))
    named = predict(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", tp=1, weight_dtype="w4a16"))
    assert served.weight_dtype == "w4a16"
    assert served.weight_bytes_per_gpu == pytest.approx(named.weight_bytes_per_gpu)
    assert 5.2 * 2**30 <= served.weight_bytes_per_gpu <= 5.6 * 2**30


def test_tensorrt_llm_refuses_a_released_4bit_checkpoint(tmp_path):
    # TensorRT-LLM's PyTorch backend reads no AWQ/GPTQ/bitsandbytes/compressed-tensors W4A16
    # checkpoint (ModelConfig.load_hf_quant_config): a launch review found the plan printing a
    # trtllm-serve command for one. vLLM and SGLang load it through Marlin.
    path = _with(tmp_path, {"quant_method": "awq", "bits": 4, "group_size": 128})
    refused = predict(PredictRequest(model=path, gpu="h100-sxm", tp=1, weight_dtype="auto", engine="trtllm"))
    assert "TensorRT-LLM does not load AWQ" in refused.rejected
    served = predict(PredictRequest(model=path, gpu="h100-sxm", tp=1, weight_dtype="auto", engine="vllm"))
    assert served.weight_dtype == "w4a16"


def test_an_8bit_integer_checkpoint_is_int8_only_with_quantized_activations():
    # compressed-tensors "int-quantized" covers W8A8 (input activations quantized: the INT8 GEMM
    # format) and weight-only W8A16 (no served format here: said, sized as bf16)
    group = {"weights": {"num_bits": 8, "type": "int"}}
    w8a8 = {"quant_method": "compressed-tensors", "format": "int-quantized"}
    w8a8["config_groups"] = {"group_0": dict(group, input_activations={"num_bits": 8, "type": "int"})}
    assert native_format(w8a8) == ("int8", [])
    w8a16 = {"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"group_0": group}}
    fmt, notes = native_format(w8a16)
    assert fmt == "bf16" and "is not read" in notes[0]


def test_a_mixed_recipe_is_said_to_be_sized_in_one_format():
    # W8A8 attention beside W4A16 MLPs (two config_groups): sized in the first group's format, said
    w8a8 = {
        "targets": ["re:.*self_attn.*"],
        "weights": {"num_bits": 8, "type": "int"},
        "input_activations": {"num_bits": 8},
    }
    w4a16 = {"targets": ["re:.*mlp.*"], "weights": {"num_bits": 4, "type": "int"}, "input_activations": None}
    quant = {"quant_method": "compressed-tensors", "config_groups": {"group_0": w8a8, "group_1": w4a16}}
    fmt, notes = native_format(quant)
    assert fmt == "int8" and "2 sets of layers differently" in notes[0]
    # one recipe in two groups of the same weights says nothing more
    assert native_format({"quant_method": "compressed-tensors", "config_groups": {"a": w4a16, "b": w4a16}}) == (
        "w4a16",
        [],
    )
    # the format's name is read in any case
    assert native_format({"quant_method": "compressed-tensors", "format": "NVFP4-pack-quantized"}) == ("nvfp4", [])
