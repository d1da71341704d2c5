"""What a ``config.json`` leaves to its model class: the defaults, MLP shapes, sliding-window
patterns and context length that transformers' configuration and modelling code supply where the
file is silent, for :mod:`tokenplan.arch.hf_config`.

Sources (transformers ``models/<type>/configuration_<type>.py`` and ``modeling_<type>.py``):

- ``GemmaConfig`` / ``Gemma2Config``: ``vocab_size`` 256,000, ``tie_word_embeddings`` True,
  ``max_position_embeddings`` 8,192; ``Gemma3TextConfig``: ``vocab_size`` 262,208,
  ``tie_word_embeddings`` True, ``max_position_embeddings`` 131,072,
  ``sliding_window_pattern`` 6 (its ``layer_types`` default: layer ``i`` slides unless
  ``(i + 1) % 6 == 0``); Gemma-2 alternates (layer ``i`` slides unless ``(i + 1) % 2 == 0``).
  The stock ``google/gemma-3-27b-it`` config.json states neither ``vocab_size`` nor the pattern.
- MLPs with an up and a down projection only (no gate): ``Starcoder2MLP`` (``c_fc``, ``c_proj``),
  ``PhiMLP`` (``fc1``, ``fc2``), ``GPTNeoXMLP`` (``dense_h_to_4h``, ``dense_4h_to_h``),
  ``GPTBigCodeMLP``, ``GPTJMLP``, ``CodeGenMLP``, ``FalconMLP``, ``MptMLP``, ``BloomMLP``, OPT's
  ``fc1``/``fc2``.
- Context: vLLM's ``_get_and_verify_max_len`` (``vllm/config/model.py``) multiplies
  ``max_position_embeddings`` by ``rope_scaling["factor"]`` for scaling types other than
  ``su``, ``longrope``, ``llama3``, ``mrope`` and ``default`` — for ``yarn`` from
  ``original_max_position_embeddings`` where given (Qwen3's model card: 32,768 × 4 = 131,072);
  not for Gemma-3, whose stated context is already scaled ("Gemma3's max_model_len (128K) is
  already scaled by RoPE scaling").
- Qwen3-Next's one MTP layer: its config.json names none, and the engines' draft classes take
  ``num_nextn_predict_layers`` 1 where it is absent (vLLM ``models/qwen3_next_mtp.py``
  ``Qwen3NextMultiTokenPredictor``: ``getattr(config, "num_nextn_predict_layers", 1)``; SGLang
  ``configs/model_config.py`` sets it to 1 for the ``Qwen3NextForCausalLMMTP`` draft).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma": {"vocab_size": 256_000, "tie_word_embeddings": True, "max_position_embeddings": 8192},
    "gemma2": {"vocab_size": 256_000, "tie_word_embeddings": True, "max_position_embeddings": 8192},
    "gemma3_text": {"vocab_size": 262_208, "tie_word_embeddings": True, "max_position_embeddings": 131_072},
    "qwen3_next": {"num_nextn_predict_layers": 1},
}

# model_type → every how many layers one keeps full attention, the others sliding
SLIDING_PATTERNS = {"gemma2": 2, "gemma3_text": 6}

UNGATED_MODEL_TYPES = frozenset(
    {"starcoder2", "phi", "gpt_neox", "gpt_bigcode", "gptj", "codegen", "falcon", "mpt", "bloom", "opt"}
)

# Model types whose layers tokenplan's generic fields would misread, refused rather than costed:
# their state-space layers are described by fields it does not read.
_MAMBA = "its Mamba layers (and their recurrent state per request) are described by fields tokenplan does not read"
UNREAD_MODEL_TYPES = {
    "jamba": f"{_MAMBA} (attn_layer_period/offset, expert_layer_period); read as all attention it would be wrong",
    "falcon_h1": f"{_MAMBA} (mamba_n_heads, mamba_d_state beside attention in every layer)",
    "bamba": _MAMBA,
    "zamba": _MAMBA,
    "zamba2": _MAMBA,
    "mamba": "a pure state-space model (no attention layers): not modelled",
    "mamba2": "a pure state-space model (no attention layers): not modelled",
    "falcon_mamba": "a pure state-space model (no attention layers): not modelled",
}

# rope_scaling types whose factor does not lengthen the context vLLM allows
_UNSCALED_ROPE = frozenset({"su", "longrope", "llama3", "mrope", "default"})


def with_class_defaults(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with its model class's defaults (:data:`_CLASS_DEFAULTS`) where a key is absent or
    null."""
    out = dict(cfg)
    for key, value in _CLASS_DEFAULTS.get(str(cfg.get("model_type", "")), {}).items():
        if out.get(key) is None:
            out[key] = value
    return out


def sliding_pattern(cfg: Mapping[str, Any]) -> int | None:
    """Every how many layers one keeps full attention where the class slides the others by
    default (Gemma-2: 2; Gemma-3: ``sliding_window_pattern``, 6 when unset), else None."""
    model_type = str(cfg.get("model_type", ""))
    if model_type not in SLIDING_PATTERNS:
        return None
    pattern = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern"))
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 1:
        return pattern
    return SLIDING_PATTERNS[model_type]


def context_factor(cfg: Mapping[str, Any]) -> tuple[float, int | None]:
    """(factor, base) of a ``rope_scaling`` that lengthens the context vLLM allows: the context
    is ``base × factor`` (``base`` None: ``max_position_embeddings``); (1, None) without one."""
    scaling = cfg.get("rope_scaling")
    # vLLM skips Gemma-3, whose max_position_embeddings (131,072) is already the scaled context
    if not isinstance(scaling, Mapping) or "gemma3" in str(cfg.get("model_type", "")):
        return 1.0, None
    kind = str(scaling.get("rope_type", scaling.get("type", "default")))
    factor = scaling.get("factor")
    if kind in _UNSCALED_ROPE or isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 1:
        return 1.0, None
    base = scaling.get("original_max_position_embeddings") if kind == "yarn" else None
    good_base = isinstance(base, int) and not isinstance(base, bool) and base >= 1
    return float(factor), base if good_base else None
