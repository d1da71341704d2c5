"""Which engine runs a model's own MTP layers as the draft (``--spec mtp``).

An MTP draft needs an engine-side model class for the checkpoint's MTP layers; a config that
ships them (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``) does not make the engine
run them. Where an engine's source has no such class for an architecture, its speculative
config fails at start-up, so the planner refuses MTP there, with the reason:

- MiniMax-M2 (``MiniMaxM2ForCausalLM``: MiniMax-M2, M2.1, M2.5). vLLM's
  ``SpeculativeConfig.hf_config_override`` (``vllm/config/speculative.py``) rewrites a target
  config into an MTP draft only for the model types it lists (``deepseek_v3``, ``glm_moe_dsa``,
  ``qwen3_next``, ``qwen3_5``/``qwen3_5_moe``, MiniMax-M3 and others); ``minimax_m2`` is not
  among them and no ``minimax_m2_mtp`` model type exists, so ``method: mtp`` leaves the draft
  as the target architecture and the draft-model path refuses it. TensorRT-LLM's
  ``MiniMaxM2ForCausalLM`` (``tensorrt_llm/_torch/models/modeling_minimaxm2.py``) is a plain
  ``DecoderModelForCausalLM`` with no MTP layers (its MTP models derive from
  ``SpecDecOneEngineForCausalLM``). SGLang runs it (``MiniMaxM2ForCausalLMNextN``).
"""

from __future__ import annotations

# architecture (config.json ``architectures[0]``) → engine → why it does not run the MTP layers
_NO_MTP: dict[str, dict[str, str]] = {
    "MiniMaxM2ForCausalLM": {
        "vllm": "vLLM has no MTP draft for MiniMax-M2 (no minimax_m2 entry in SpeculativeConfig's MTP model types), "
        "so --spec mtp does not start; SGLang runs it (--engine sglang)",
        "trtllm": "TensorRT-LLM's MiniMaxM2ForCausalLM has no MTP layers, so --spec mtp does not start; "
        "SGLang runs it (--engine sglang)",
    },
}


def mtp_refusal(engine: str, architecture: str) -> str | None:
    """Why ``engine`` (a catalog name) cannot run the MTP layers of a model of ``architecture``
    (its config's ``architectures[0]``) as the draft, and what runs them, or None where nothing
    says it cannot (the module docstring gives each entry's source)."""
    return _NO_MTP.get(architecture, {}).get(engine)
