"""Typed, checked reads of a Hugging Face ``config.json``'s fields for :mod:`tokenplan.arch.hf_config`.

Every refusal is one :class:`~tokenplan.errors.ConfigError` line naming the file, the key, the
value (or that it is missing) and what is allowed.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from tokenplan.arch.kv import SSM_STATE_DTYPES
from tokenplan.arch.spec import Attention, AttentionKind
from tokenplan.errors import ConfigError

# ``torch_dtype`` (``dtype`` since transformers 4.56) values whose weights the engines serve in 16
# bits: BF16/FP16 as stored, FP32 cast down by ``--dtype auto`` (vLLM: "FP16 precision for FP32
# and FP16 models, BF16 precision for BF16 models"; SGLang's ``--dtype auto`` alike). Any other
# name is costed the same way (2 bytes per weight), with a note naming it; a value that is not a
# name at all (a number, a list) is refused.
SIXTEEN_BIT_DTYPES = ("bfloat16", "float16", "float32")

# The ``layer_types`` entries tokenplan models (transformers' ``ALLOWED_LAYER_TYPES`` it costs).
LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")


# The largest integer a field takes (2^53, the largest a float holds exactly): a config's sizes are
# multiplied into byte counts in floats, and an integer past ~1.8e308 does not convert at all.
MAX_FIELD_INT = 2**53


class Reader:
    """Typed access to a config dict that names the file and key in every error."""

    def __init__(self, cfg: Mapping[str, Any], source: str):
        self.cfg, self.source = cfg, source

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def refuse(self, key: str, allowed: str) -> ConfigError:
        """One line: the file, the key, its value (or that it is missing) and ``allowed``."""
        value = self.cfg.get(key)
        shown = (
            "required key is missing"
            if key not in self.cfg
            else f"{'null' if value is None else repr(value)} is not allowed"
        )
        return ConfigError(self.source, key, f"{shown} (allowed: {allowed})")

    def fail(self, key: str, minimum: builtins.int, what: str = "", maximum: builtins.int | None = None) -> ConfigError:
        """:meth:`refuse` for an integer field: ``an integer ≥ minimum`` (or ``from minimum to
        maximum``), then ``what``."""
        bounds = f"≥ {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        return self.refuse(key, f"an integer {bounds}" + (f", {what}" if what else ""))

    def int(
        self,
        key: str,
        default: builtins.int | None = None,
        minimum: builtins.int = 0,
        what: str = "",
        maximum: builtins.int | None = None,
    ) -> builtins.int:
        """The integer at ``key``, ``default`` when missing or null; ``what`` names it in errors."""
        value = self.cfg.get(key)
        if value is None and default is not None:
            return default
        top = MAX_FIELD_INT if maximum is None else maximum
        if value is None or isinstance(value, bool) or not isinstance(value, builtins.int) or value < minimum:
            raise self.fail(key, minimum, what, maximum)
        if value > top:
            raise self.fail(key, minimum, what, top)
        return value

    def first_int(
        self, keys: tuple[str, ...], default: builtins.int | None = None, minimum: builtins.int = 0, what: str = ""
    ) -> builtins.int:
        for key in keys:
            if self.has(key):
                return self.int(key, minimum=minimum, what=what)
        if default is None:
            nulls = [key for key in keys if key in self.cfg]  # present but null: show that one
            raise self.fail(nulls[0] if nulls else " or ".join(keys), minimum, what)
        return default


def architecture(r: Reader) -> str:
    """``architectures[0]`` (the model class the planner names and checks against the ones it
    knows), ``model_type`` when ``architectures`` is absent, null or empty. A value that is not a
    list of names (``"Qwen3ForCausalLM"`` without brackets would be read as ``"Q"``) is refused."""
    archs = r.cfg.get("architectures")
    if archs is None or archs == []:
        return str(r.cfg.get("model_type") or "unknown")
    if not isinstance(archs, list) or not all(isinstance(a, str) and a for a in archs):
        raise r.refuse("architectures", 'a list of model class names, e.g. ["Qwen3ForCausalLM"]')
    return str(archs[0])


def layer_types(r: Reader, num_layers: int) -> list[str] | None:
    """``layer_types`` checked: one known type per layer; None when absent or null (JSON null is
    "not set", as transformers' ``layer_types=None`` default, which derives the types from other
    fields)."""
    types = r.cfg.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list):
        raise r.refuse("layer_types", f"a list of {num_layers} entries, each one of {', '.join(LAYER_TYPES)}")
    if len(types) != num_layers:
        raise ConfigError(r.source, "layer_types", f"expected {num_layers} entries, got {len(types)}")
    bad = [t for t in types if not isinstance(t, str) or t not in LAYER_TYPES]
    if bad:
        raise ConfigError(r.source, "layer_types", f"unknown layer type {bad[0]!r} (known: {sorted(LAYER_TYPES)})")
    return types


def full_window_layers(r: Reader, num_layers: int) -> int:
    """Layers of full attention in a Qwen2/Qwen3 config with ``use_sliding_window``: the first
    ``max_window_layers`` (transformers' ``Qwen2Config``/``Qwen3Config``: layer ``i`` slides when
    ``i >= max_window_layers``), every layer when it is absent or null. Refused outside 0 to
    ``num_hidden_layers``: a negative count left fewer than no full layers (negative KV bytes), a
    larger one more full layers than the model has."""
    return r.int(
        "max_window_layers",
        default=num_layers,
        minimum=0,
        maximum=num_layers,
        what="the first layers that keep full attention, the rest using the sliding window",
    )


def dtype_notes(r: Reader, native: str) -> list[str]:
    """A note when the checkpoint's ``torch_dtype``/``dtype`` is not one of
    :data:`SIXTEEN_BIT_DTYPES` (a quantized checkpoint's own format is ``native``). A value that
    is not a name (a number, a list, an object) is refused."""
    key = "torch_dtype" if r.has("torch_dtype") else "dtype"
    dtype = r.cfg.get(key)
    if dtype is not None and not isinstance(dtype, str):
        raise r.refuse(key, f"a dtype name, e.g. {', '.join(SIXTEEN_BIT_DTYPES)}")
    if dtype is None or native != "bf16" or dtype in SIXTEEN_BIT_DTYPES:
        return []
    return [
        f"{key} {dtype!r} is not one tokenplan knows ({', '.join(SIXTEEN_BIT_DTYPES)}): the checkpoint is "
        "taken as bf16, 2 bytes per weight, unless --weight-dtype names the served format"
    ]


def flag(r: Reader, key: str, default: bool = False) -> bool:
    """A true/false field (``tie_word_embeddings``): JSON ``true``/``false``, ``default`` when
    absent or null. Anything else is refused: ``bool("false")`` is true, which silently dropped a
    separate ``lm_head``'s weights."""
    value = r.cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise r.refuse(key, "true or false")
    return value


def dense_layer_indices(r: Reader, num_layers: int, dense_first: int, step: int) -> set[int]:
    """Indices of the layers with a dense MLP in a mixture-of-experts model: the first
    ``dense_first`` (DeepSeek's ``first_k_dense_replace``), those listed in ``mlp_only_layers``
    (Qwen-MoE), and with ``decoder_sparse_step`` = ``step`` > 1 each layer ``i`` with
    ``(i + 1) % step != 0`` (transformers' ``Qwen2MoeDecoderLayer``/``Qwen3MoeDecoderLayer``: a
    layer has experts when ``layer_idx not in mlp_only_layers and num_experts > 0 and
    (layer_idx + 1) % decoder_sparse_step == 0``), and those ``moe_layer_freq`` leaves dense: as an
    integer f, each layer with ``i % f != 0`` (DeepSeek's ``modeling_deepseek.py``: experts where
    ``layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0``), as a list, each
    layer whose entry is 0 (MiniMax-M3: one 0 or 1 per layer). ``mlp_only_layers`` must hold
    distinct layer indices from 0 to ``num_layers − 1``."""
    listed = r.cfg.get("mlp_only_layers") or []
    if (
        not isinstance(listed, list)
        or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < num_layers for i in listed)
        or len(set(listed)) != len(listed)
    ):
        raise r.refuse("mlp_only_layers", f"a list of distinct layer indices from 0 to {num_layers - 1}")
    dense = set(range(min(dense_first, num_layers))) | set(listed)
    if step > 1:
        dense |= {i for i in range(num_layers) if (i + 1) % step}
    freq = r.cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        if len(freq) != num_layers or any(f not in (0, 1) or isinstance(f, bool) for f in freq):
            raise r.refuse(
                "moe_layer_freq", f"an integer ≥ 1, or a list of {num_layers} entries, 0 (dense) or 1 (experts)"
            )
        dense |= {i for i, f in enumerate(freq) if f == 0}
    else:
        every = r.int("moe_layer_freq", default=1, minimum=1, what="every how many layers one has experts")
        dense |= {i for i in range(num_layers) if i % every}
    return dense


def state_dtype(r: Reader, key: str) -> str:
    """The recurrent state's dtype at ``key`` (``mamba_ssm_dtype``, ``mamba_ssm_cache_dtype``),
    float32 when missing or null; a name the engines do not take is refused naming the key."""
    value = r.cfg.get(key)
    if value is None:
        return "float32"
    if not isinstance(value, str) or value.lower() not in SSM_STATE_DTYPES:
        raise r.refuse(key, ", ".join(SSM_STATE_DTYPES))
    return value.lower()


def sparse_attention(r: Reader) -> tuple[int, float] | None:
    """(tokens an attention layer reads, index-key bytes per token) of a block-sparse attention
    config (``sparse_attention_config`` with ``use_sparse_attention``), or None without one.
    Its counts must be non-negative integers: text there made a traceback."""
    sparse = r.cfg.get("sparse_attention_config")
    if sparse is None or (isinstance(sparse, Mapping) and not sparse.get("use_sparse_attention")):
        return None
    if not isinstance(sparse, Mapping):
        raise r.refuse("sparse_attention_config", "an object with use_sparse_attention and its block counts")
    counts = {}
    for key in (
        "sparse_block_size",
        "sparse_topk_blocks",
        "sparse_local_block",
        "sparse_num_index_heads",
        "sparse_index_dim",
    ):
        value = sparse.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, builtins.int) or value < 0:
            raise ConfigError(
                r.source,
                f"sparse_attention_config.{key}",
                f"{value!r} is not allowed (allowed: an integer ≥ 0)",
            )
        counts[key] = value
    tokens = (counts["sparse_topk_blocks"] + counts["sparse_local_block"]) * counts["sparse_block_size"]
    return tokens, float(counts["sparse_num_index_heads"] * counts["sparse_index_dim"] * 2)


# Architectures whose softmax attention has no positional encoding (no RoPE table is built):
# Nemotron-H ("Grouped-query attention without positional encoding", its attention layers in
# vLLM/SGLang/TRT-LLM create no rotary embedding).
NO_ROPE_ARCHITECTURES = ("NemotronHForCausalLM",)


def rotary_dim(r: Reader, attention: Attention | None, arch: str) -> int:
    """The dimensions of each head the rotary embedding turns (RoPE), which size the cos/sin table
    the engines build when they load the model (``perf.memory.rope_table_bytes``): MLA's
    decoupled key width (``qk_rope_head_dim``), ``rotary_dim`` where the config states it
    (MiniMax), else ``head_dim × partial_rotary_factor`` (at the top level, in
    ``rope_parameters`` or in ``rope_scaling``; 1 where none states it), as vLLM's ``get_rope``
    derives it (``rotary_dim = int(head_size * partial_rotary_factor)``). 0 without softmax
    attention or without positional encoding (:data:`NO_ROPE_ARCHITECTURES`).

    Raises:
        ConfigError: a ``rotary_dim`` outside 1 to ``head_dim`` or a factor outside (0, 1].
    """
    if attention is None or arch in NO_ROPE_ARCHITECTURES:
        return 0
    if attention.kind is AttentionKind.MLA:
        return attention.qk_rope_head_dim
    if r.has("rotary_dim"):
        return r.int("rotary_dim", minimum=1, maximum=attention.head_dim, what="the rotated dimensions of a head")
    factor: Any = 1.0
    for where in (r.cfg, r.cfg.get("rope_parameters"), r.cfg.get("rope_scaling")):
        if isinstance(where, Mapping) and where.get("partial_rotary_factor") is not None:
            factor = where["partial_rotary_factor"]
            break
    if isinstance(factor, bool) or not isinstance(factor, builtins.int | float) or not 0 < factor <= 1:
        raise ConfigError(
            r.source,
            "partial_rotary_factor",
            f"{factor!r} is not allowed (allowed: a number in (0, 1], the share of a head RoPE turns)",
        )
    return builtins.int(attention.head_dim * factor)
