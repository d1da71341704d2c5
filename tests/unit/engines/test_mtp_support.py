"""An engine with no draft model for a checkpoint's MTP layers gets no MTP plan and no command:
``--speculative-config '{"method":"mtp"}'`` fails at vLLM's start-up for MiniMax-M2.5 (vLLM's
``SpeculativeConfig.hf_config_override`` has no ``minimax_m2`` branch) and TensorRT-LLM's
``MiniMaxM2ForCausalLM`` has no MTP layers; SGLang runs them (``MiniMaxM2ForCausalLMNextN``)."""

from __future__ import annotations

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.engines.mtp_support import mtp_refusal


def test_the_table_names_minimax_m2_for_vllm_and_trtllm_only():
    assert mtp_refusal("vllm", "MiniMaxM2ForCausalLM") is not None
    assert mtp_refusal("trtllm", "MiniMaxM2ForCausalLM") is not None
    assert mtp_refusal("sglang", "MiniMaxM2ForCausalLM") is None
    # Qwen3.5/3.6 (qwen3_5 in vLLM's override) and DeepSeek-V3 (deepseek_mtp) run their MTP layers
    assert mtp_refusal("vllm", "Qwen3_5ForConditionalGeneration") is None
    assert mtp_refusal("trtllm", "DeepseekV3ForCausalLM") is None


def test_a_vllm_mtp_plan_of_minimax_m25_says_why_nothing_runs():
    p = plan(PlanRequest(model="minimax-m2.5", gpus=("8xh200",), engine="vllm", specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert "best" not in option  # nothing runs
    # one reason for every configuration searched: it holds for every layout and format alike
    (reason,) = option["rejected"]
    assert option["rejected"][reason] == option["configurations"]
    assert reason.startswith("vLLM has no MTP draft for MiniMax-M2") and "SGLang runs it" in reason


def test_an_sglang_mtp_plan_writes_no_command_for_the_engines_that_cannot_start_it():
    p = plan(PlanRequest(model="minimax-m2.5", gpus=("8xh200",), specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert list(option["launch"]) == ["sglang"]
    assert "NEXTN" in option["launch"]["sglang"]
    said = " ".join(option["warnings"])
    assert "no vLLM command in --json: vLLM has no MTP draft for MiniMax-M2" in said
    assert "no TensorRT-LLM command in --json: TensorRT-LLM's MiniMaxM2ForCausalLM has no MTP layers" in said


def test_a_model_whose_mtp_vllm_runs_keeps_its_vllm_command():
    p = plan(PlanRequest(model="qwen3.6-27b", gpus=("1xb200",), specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert '"method":"mtp"' in option["launch"]["vllm"]
