"""Hand-written config.json contents of models not in the catalog, shared by tests.

``LLAMA4_MAVERICK_TEXT`` holds the text fields of meta-llama/Llama-4-Maverick-17B-128E's
config.json (transformers ``Llama4TextConfig`` names); Scout differs in 16 experts, experts in
every layer and a 10,485,760-token context.
"""

from __future__ import annotations

from typing import Any

LLAMA4_MAVERICK_TEXT: dict[str, Any] = {
    "model_type": "llama4_text",
    "hidden_size": 5120,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_local_experts": 128,
    "num_experts_per_tok": 1,
    "interleave_moe_layer_step": 2,
    "vocab_size": 202048,
    "max_position_embeddings": 1048576,
}


def llama4_config(**text: Any) -> dict[str, Any]:
    """A Llama-4 multimodal config.json (its text fields nested as transformers writes them),
    Maverick's text fields with ``text`` overriding them."""
    return {"architectures": ["Llama4ForConditionalGeneration"], "text_config": {**LLAMA4_MAVERICK_TEXT, **text}}


def llama4_scout(max_position_embeddings: int = 10_485_760) -> dict[str, Any]:
    """Llama-4 Scout's config.json: 16 experts, experts in every layer."""
    return llama4_config(
        num_local_experts=16, interleave_moe_layer_step=1, max_position_embeddings=max_position_embeddings
    )
