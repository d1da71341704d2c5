"""Which engine runs a model's own MTP layers as the draft (``--spec mtp``).

An MTP draft needs an engine-side model class for the checkpoint's MTP layers; a config that
ships them (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``) does not make every engine
run them. Where an engine's source has no such class for an architecture, its speculative
config fails at start-up, so the planner refuses MTP there, with the reason:

- MiniMax-M3 (``MiniMaxM3ForCausalLM``; the release's ``MiniMaxM3SparseForConditionalGeneration``).
  SGLang builds no NextN module for it: ``models/minimax_m3.py`` skips the checkpoint's
  ``model.mtp.layers.*`` ("no NextN module is built for the main model"), its ``EntryClass`` is
  ``MiniMaxM3SparseForCausalLM`` alone, and no MiniMax-M3 draft class exists.
  TensorRT-LLM's MiniMax-M3 loader drops ``model.mtp.*`` as "MTP (multi-token prediction) not
  implemented" (``tensorrt_llm/_torch/models/modeling_minimaxm3.py``) and its model is a plain
  ``DecoderModelForCausalLM`` (MTP models derive from ``SpecDecOneEngineForCausalLM``). vLLM runs
  it (``SpeculativeConfig.hf_config_override`` → ``MiniMaxM3MTP``) for a checkpoint that holds the
  layers; the BF16 release holds none (``catalog/launch.yaml`` ``release_mtp_layers``), so this
  applies to a user's config that names them.
- MiniMax-M2 (``MiniMaxM2ForCausalLM``: M2, M2.1, M2.5), for a config that names MTP layers: vLLM's
  ``hf_config_override`` has no ``minimax_m2`` branch (no ``minimax_m2_mtp`` model type), and
  TensorRT-LLM's ``MiniMaxM2ForCausalLM`` (``modeling_minimaxm2.py``) has no MTP layers; and the
  released checkpoints hold no MTP weights at all (MiniMax-AI/MiniMax-M2.5#8; SGLang's
  ``configs/model_config.py`` maps ``MiniMaxM2ForCausalLM`` to no draft class; ``arch.hf_config``
  reads their configs as shipping none, so the catalog's MiniMax-M2.5 plans no MTP anywhere).
"""

from __future__ import annotations

_SGLANG_M3 = "SGLang builds no MTP draft for MiniMax-M3 (it skips the checkpoint's model.mtp layers)"
_TRTLLM_M3 = "TensorRT-LLM does not load MiniMax-M3's MTP layers (model.mtp.*: 'MTP not implemented')"
_M3 = {"sglang": _SGLANG_M3, "trtllm": _TRTLLM_M3}
# architecture (config.json ``architectures[0]``) → engine → why it does not run the MTP layers
_NO_MTP: dict[str, dict[str, str]] = {
    "MiniMaxM3ForCausalLM": _M3,
    "MiniMaxM3SparseForConditionalGeneration": _M3,
    "MiniMaxM2ForCausalLM": {
        "sglang": "SGLang maps MiniMaxM2ForCausalLM to no MTP draft, and the MiniMax-M2.x releases hold no "
        "MTP weights (MiniMax-AI/MiniMax-M2.5#8)",
        "vllm": "vLLM has no MTP draft for MiniMax-M2 (no minimax_m2 entry in SpeculativeConfig's MTP model types)",
        "trtllm": "TensorRT-LLM's MiniMaxM2ForCausalLM has no MTP layers",
    },
}


def mtp_refusal(engine: str, architecture: str) -> str | None:
    """Why ``engine`` (a catalog name) cannot run the MTP layers of a model of ``architecture``
    (its config's ``architectures[0]``) as the draft, ending in what to do, or None where
    nothing says it cannot (the module docstring gives each entry's source)."""
    why = _NO_MTP.get(architecture, {}).get(engine)
    if why is None:
        return None
    runs = sorted(e for e in ("sglang", "vllm", "trtllm") if e not in _NO_MTP[architecture])
    instead = f"--engine {runs[0]}, " if runs else ""
    return f"{why}, so --spec mtp does not start; use {instead}another draft (--spec eagle3:K) or --spec none"


# vLLM's MTP drafts of the Qwen3.5/3.6 and Qwen3-Next families do not implement SupportsPP: the
# draft model config is checked against the parallel config and the engine refuses to start
# ("Pipeline parallelism is not supported for this model. Supported models implement the
# `SupportsPP` interface"). v0.28.0 ``models/qwen3_5_mtp.py``: ``class Qwen3_5MTP(LocalArgmaxMixin,
# nn.Module, SupportsMultiModal)`` (syv-ai/qwen38-27b-rtx3090#160, against a v0.28.0 checkout);
# vllm-project/vllm#36643 ("Qwen3.5 does not work with pipeline parallelism", open), whose plan
# adds ``SupportsPP`` to ``Qwen3NextMTP`` and ``Qwen3_5MTP``.
_VLLM_MTP_NO_PP = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
    }
)


def mtp_pp_refusal(engine: str, architecture: str, pp: int) -> str | None:
    """Why ``engine`` cannot run a model of ``architecture``'s MTP draft with pipeline parallelism
    ``pp`` (see :data:`_VLLM_MTP_NO_PP`), ending in what to do, or None."""
    if pp <= 1 or engine != "vllm" or architecture not in _VLLM_MTP_NO_PP:
        return None
    return (
        f"vLLM's MTP draft for {architecture} does not implement pipeline parallelism (no SupportsPP: "
        "the engine refuses to start), so --spec mtp does not start at PP>1; use TP or DP without PP, "
        "or --spec none"
    )
