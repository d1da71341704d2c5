"""Parse a Hugging Face ``config.json`` into a :class:`~tokenplan.arch.spec.ModelSpec`.

Handles nested ``text_config`` (Qwen3.5/3.6 multimodal checkpoints), GQA/MHA, MLA (DeepSeek-V3/R1, Kimi-K2, GLM-5),
MoE with shared experts and dense first layers, alternating sliding-window layers (gpt-oss ``layer_types``), Gated
DeltaNet hybrids (Qwen3-Next, Qwen3.5/3.6: ``layer_types`` or ``full_attention_interval``), Mamba-2 hybrids
(Nemotron-H ``hybrid_override_pattern``), MTP layers, tied embeddings and the quantized layers. Architectures modelled
only approximately (sparse attention, Mamba-2 scans) carry a caveat (``approximations``).

Raises ConfigError naming the file and the key for a missing or malformed field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenplan.arch.hf_defaults import (
    UNGATED_MODEL_TYPES,
    UNREAD_MODEL_TYPES,
    context_factor,
    sliding_pattern,
    with_class_defaults,
)
from tokenplan.arch.hf_fields import (
    Reader,
    architecture,
    dense_layer_indices,
    dtype_notes,
    flag,
    full_window_layers,
    layer_types,
    rotary_dim,
    sparse_attention,
    state_dtype,
)
from tokenplan.arch.quant import native_format, quantization_block
from tokenplan.arch.quant_scope import with_quantized_shares
from tokenplan.arch.spec import Attention, AttentionKind, LinearAttention, ModelSpec, Moe
from tokenplan.arch.vision import checked_vision_config, vision_params
from tokenplan.errors import ConfigError

# Architectures whose config fields tokenplan reads as their modelling code uses them (the
# shipped configs' families and their close relatives). Others are parsed from the same generic
# fields, with a warning that the mapping is unverified.
KNOWN_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV2ForCausalLM",
        "GptOssForCausalLM",
        "MiniMaxM2ForCausalLM",
        "MiniMaxM3ForCausalLM",
        "NemotronHForCausalLM",
        "GlmMoeDsaForCausalLM",
        "Llama4ForConditionalGeneration",
        "Llama4ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Gemma3ForCausalLM",
        "Starcoder2ForCausalLM",
    }
)

# Activations of FFNs with an up and a down projection only (no gate matrix).
_UNGATED_ACTS = {"relu2", "relu", "gelu"}


def _text_config(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Merge a nested ``text_config`` over the top level (top-level keys fill the gaps)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(source, "<root>", "expected a JSON object")
    text = raw.get("text_config")
    if text is None:
        return dict(raw)
    if not isinstance(text, Mapping):
        raise ConfigError(source, "text_config", "expected a JSON object")
    merged = {k: v for k, v in raw.items() if k != "text_config"}
    merged.update(text)
    # Qwen3.5/3.6 keep tie_word_embeddings at the top level too; the top level wins there.
    if "tie_word_embeddings" in raw:
        merged["tie_word_embeddings"] = raw["tie_word_embeddings"]
    return merged


def _layer_kinds(r: Reader, num_layers: int) -> dict[str, int]:
    """Count full, sliding, linear (GDN/Mamba) and FFN-only layers."""
    cfg = r.cfg
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise r.refuse("hybrid_override_pattern", f"a string of {num_layers} characters, each M, *, E or -")
    if isinstance(pattern, str):
        if len(pattern) != num_layers or set(pattern) - set("M*E-"):
            raise ConfigError(r.source, "hybrid_override_pattern", f"expected {num_layers} of M * E -")
        return {
            "full": pattern.count("*"),
            "sliding": 0,
            "linear": pattern.count("M"),
            "moe": pattern.count("E"),
            "dense": pattern.count("-"),
            "ffn_only": True,
        }
    types = layer_types(r, num_layers)
    if types is not None:
        return {
            "full": types.count("full_attention"),
            "sliding": types.count("sliding_attention"),
            "linear": types.count("linear_attention"),
        }
    interval = cfg.get("full_attention_interval")
    if interval is not None and r.has("linear_num_value_heads"):
        full = num_layers // r.int("full_attention_interval", minimum=1)
        return {"full": full, "sliding": 0, "linear": num_layers - full}
    window = cfg.get("sliding_window")
    pattern = sliding_pattern(cfg)
    if pattern and window:  # Gemma-2/3 without layer_types: every pattern-th layer keeps full attention
        return {"full": num_layers // pattern, "sliding": num_layers - num_layers // pattern, "linear": 0}
    if flag(r, "use_sliding_window") and window:  # text ("false") is refused, not read as true
        max_window = full_window_layers(r, num_layers)
        return {"full": max_window, "sliding": num_layers - max_window, "linear": 0}
    return {"full": num_layers, "sliding": 0, "linear": 0}


def _attention(r: Reader, hidden: int) -> tuple[Attention, list[str]]:
    notes: list[str] = []
    heads = r.int("num_attention_heads", minimum=1, what="the attention heads")
    if r.has("kv_lora_rank"):
        rope = r.int("qk_rope_head_dim", minimum=1)
        nope = r.int("qk_nope_head_dim", minimum=1)
        att = Attention(
            kind=AttentionKind.MLA,
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=nope + rope,
            v_head_dim=r.int("v_head_dim", minimum=1),
            kv_lora_rank=r.int("kv_lora_rank", minimum=1),
            q_lora_rank=r.int("q_lora_rank", default=0),
            qk_rope_head_dim=rope,
            sparse_topk_tokens=r.int("index_topk", default=0),
            index_bytes_per_token=float(r.int("index_head_dim", default=0)),  # FP8 indexer keys
        )
        if att.sparse_topk_tokens:
            notes.append(
                f"DeepSeek sparse attention (DSA) approximated: attention reads at most "
                f"{att.sparse_topk_tokens} tokens per layer plus an FP8 indexer key per token"
            )
        return att, notes
    if not r.has("head_dim") and hidden % heads:
        raise r.fail("head_dim", 1, f"required as hidden_size {hidden} is not a multiple of {heads} heads")
    head_dim = r.int("head_dim", default=hidden // heads, minimum=1)
    kv_heads = r.int("num_key_value_heads", default=heads, minimum=1)
    if heads % kv_heads:
        raise ConfigError(r.source, "num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    topk_tokens, index_bytes = 0, 0.0
    sparse = sparse_attention(r)
    if sparse is not None:
        topk_tokens, index_bytes = sparse
        notes.append(
            f"block-sparse attention approximated: every attention layer reads at most "
            f"{topk_tokens} tokens plus a BF16 index key per token"
        )
    gate = flag(r, "attn_output_gate") or flag(r, "attention_output_gate")
    return Attention(
        AttentionKind.GQA,
        heads,
        kv_heads,
        head_dim,
        head_dim,
        output_gate=gate,
        sparse_topk_tokens=topk_tokens,
        index_bytes_per_token=index_bytes,
    ), notes


# A causal convolution keeps its last kernel − 1 inputs per sequence: a width of 0 made that −1
# columns, a negative conv state that took bytes off every sequence's state.
_CONV_WHAT = "the causal convolution's width (the state keeps width − 1 columns)"


def _linear(r: Reader, hidden: int) -> tuple[LinearAttention, list[str]]:
    if r.has("mamba_num_heads"):
        heads, head_dim = r.int("mamba_num_heads", minimum=1), r.int("mamba_head_dim", minimum=1)
        state, groups = r.int("ssm_state_size", minimum=1), r.int("n_groups", default=1, minimum=1)
        inner = heads * head_dim
        conv_dim = inner + 2 * groups * state
        lin = LinearAttention(
            "mamba2",
            groups,
            heads,
            state,
            head_dim,
            conv_dim,
            r.int("conv_kernel", default=4, minimum=1, what=_CONV_WHAT),
            in_proj_out=2 * inner + 2 * groups * state + heads,
            state_dtype=state_dtype(r, "mamba_ssm_cache_dtype"),
        )
        return lin, [
            "Mamba-2 layers approximated: the scan is costed as reading and writing each "
            "sequence's state once per decode step"
        ]
    nk, nv = r.int("linear_num_key_heads", minimum=1), r.int("linear_num_value_heads", minimum=1)
    dk, dv = r.int("linear_key_head_dim", minimum=1), r.int("linear_value_head_dim", minimum=1)
    conv_dim = 2 * nk * dk + nv * dv
    lin = LinearAttention(
        "gated_deltanet",
        nk,
        nv,
        dk,
        dv,
        conv_dim,
        r.int("linear_conv_kernel_dim", default=4, minimum=1, what=_CONV_WHAT),
        in_proj_out=2 * nk * dk + 2 * nv * dv + 2 * nv,
        state_dtype=state_dtype(r, "mamba_ssm_dtype"),
    )
    return lin, []


# Keys of a MoE config with dense MLP layers or shared experts beside the routed ones.
_DENSE_BESIDE_EXPERTS = ("first_k_dense_replace", "n_shared_experts", "moe_layer_freq", "decoder_sparse_step")


# Llama-4 (transformers ``Llama4TextConfig``/``Llama4TextDecoderLayer``): layer ``i`` has experts
# when ``(i + 1) % interleave_moe_layer_step == 0`` (its ``moe_layers`` default), the same rule as
# Qwen-MoE's ``decoder_sparse_step``; the other layers' MLP is ``intermediate_size_mlp`` wide, and
# each MoE layer runs one shared expert of the routed experts' width (``Llama4TextMoe.shared_expert``).
_SPARSE_STEP = {False: "decoder_sparse_step", True: "interleave_moe_layer_step"}
MAX_LAYERS = 100_000
MAX_CONTEXT_TOKENS = 2**30  # 1,073,741,824: past any model's context (Llama-4 Scout's is 10,485,760)


def _context(r: Reader) -> int | None:
    """The longest request in tokens (None: not stated): ``max_position_embeddings``, lengthened
    by a ``rope_scaling`` factor as vLLM derives ``max_model_len`` (:func:`context_factor`)."""
    base = r.int("max_position_embeddings", default=0, minimum=1, what="the tokens a request may span") or None
    scaling = r.cfg.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, dict):  # "yes" was read as no scaling (a break-it pass)
        raise ConfigError(r.source, "rope_scaling", f"{scaling!r} (allowed: an object, or null)")
    stated = scaling.get("factor") if scaling else None
    # transformers' rope_config_validation refuses a factor below 1 ("factor field must be a float >= 1")
    if isinstance(stated, (int, float)) and not isinstance(stated, bool) and not stated >= 1:
        raise ConfigError(r.source, "rope_scaling.factor", f"{stated!r} (allowed: a number ≥ 1)")
    factor, original = context_factor(r.cfg)
    if base is None or factor == 1.0:
        return base
    context = (original or base) * factor
    if not context <= MAX_CONTEXT_TOKENS:  # a factor of 1e305 overflowed int(); 1e12 sized a RoPE table of 7.8 B GiB
        raise ConfigError(
            r.source,
            "rope_scaling.factor",
            f"{factor:g} gives a context of {context:.4g} tokens (allowed: a context of at most {MAX_CONTEXT_TOKENS:,})",
        )
    return int(context)


def _moe(r: Reader, llama4: bool = False) -> Moe | None:
    experts = r.first_int(("num_experts", "n_routed_experts", "num_local_experts"), default=0)
    if experts <= 1:
        return None
    # Qwen-MoE: layer i has experts when (i + 1) % decoder_sparse_step == 0 (0 divides by zero)
    r.int(_SPARSE_STEP[llama4], default=1, minimum=1, what="every how many layers one has experts")
    # Mixtral, gpt-oss, MiniMax-M2: the experts' width is ``intermediate_size``; with dense layers or
    # shared experts beside them (DeepSeek, Qwen-MoE) that is the dense MLP's, and a missing
    # ``moe_intermediate_size`` is an error, not 8× wider experts.
    dense = [k for k in _DENSE_BESIDE_EXPERTS if k in r.cfg]
    widths = ("moe_intermediate_size",) + (() if dense else ("intermediate_size",))
    what = f"the width of each of the {experts} experts" + (f", with {dense[0]} set" if dense else "")
    expert_width = r.first_int(widths, minimum=1, what=what)
    if r.has("shared_expert_intermediate_size"):
        shared = r.int("shared_expert_intermediate_size")
    elif r.has("moe_shared_expert_intermediate_size"):
        shared = r.int("moe_shared_expert_intermediate_size") * r.int("n_shared_experts", default=1)
    elif r.has("shared_intermediate_size"):
        shared = r.int("shared_intermediate_size")
    else:
        shared = (1 if llama4 else r.int("n_shared_experts", default=0)) * expert_width
    top_k = r.first_int(("num_experts_per_tok", "experts_per_token"), minimum=1)
    if top_k > experts:
        raise ConfigError(
            r.source, "num_experts_per_tok", f"expected at most the {experts} routed experts, got {top_k}"
        )
    return Moe(experts, top_k, expert_width, shared)


def parse_hf_config(raw: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """Build a ModelSpec from a parsed ``config.json``.

    Args:
        raw: the JSON object.
        name: the model's short name (catalog key or file stem).
        source: where it came from, used in error messages (a path).

    Raises:
        ConfigError: a required key is missing or has the wrong type.
    """
    cfg = with_class_defaults(_text_config(raw, source))  # Gemma's vocabulary and tied lm_head
    r = Reader(cfg, source)
    arch = architecture(r)
    unread = UNREAD_MODEL_TYPES.get(str(cfg.get("model_type", "")))
    if unread:  # refused: a figure without these layers would be silently wrong (a break-it pass)
        raise ConfigError(source, "model_type", f"{cfg['model_type']!r} is not modelled: {unread}")
    hidden = r.int("hidden_size", minimum=1, what="the model width")
    # at most MAX_LAYERS: the layer lists are built per layer (2^53 layers hung, 2^31 ran out of memory)
    layers = r.int("num_hidden_layers", minimum=1, maximum=MAX_LAYERS, what="the decoder layers")
    kinds = _layer_kinds(r, layers)
    notes: list[str] = []
    if arch not in KNOWN_ARCHITECTURES:
        notes.append(
            f"architecture {arch} is not one tokenplan knows: modelled from its generic "
            "config fields (hidden_size, layers, heads, experts) without a check of its code"
        )
    attention = None
    if kinds["full"] + kinds["sliding"]:
        attention, att_notes = _attention(r, hidden)
        notes += att_notes
    linear = None
    if kinds["linear"]:
        linear, lin_notes = _linear(r, hidden)
        notes += lin_notes
    llama4 = str(cfg.get("model_type", "")).startswith("llama4")
    moe = _moe(r, llama4)
    if kinds.get("ffn_only"):
        moe_layers, dense_layers = (kinds["moe"], kinds["dense"]) if moe else (0, kinds["moe"] + kinds["dense"])
        dense_at = {i for i, c in enumerate(cfg["hybrid_override_pattern"]) if c == "-" or (c == "E" and not moe)}
    else:
        dense_first = r.int("first_k_dense_replace", default=0, maximum=layers, what="the first dense-MLP layers")
        step = r.int(_SPARSE_STEP[llama4], default=1, minimum=1) if moe else 1
        dense_at = dense_layer_indices(r, layers, dense_first, step) if moe else set(range(layers))
        dense_layers = len(dense_at)
        moe_layers = layers - dense_layers if moe else 0
    # Every layer with a dense MLP needs its width: without it the MLP would silently weigh nothing.
    dense_width = (
        r.first_int(
            ("intermediate_size_mlp",) if llama4 else ("dense_intermediate_size", "intermediate_size"),
            minimum=1,
            what=f"the MLP width of {dense_layers} dense layers",
        )
        if dense_layers
        else 0
    )
    # the checkpoint's own weight format (a multimodal checkpoint may keep it at the top level)
    native, quant_notes = native_format((quant := quantization_block(cfg, raw)).value)
    notes += quant_notes + dtype_notes(r, native)
    # MiniMax-M2.x configs also declare use_mtp / num_mtp_modules, but their releases hold no MTP
    # tensors (MiniMax-AI/MiniMax-M2.5#8; M2.7#16: 0 of ~1,369 keys match mtp.*): not read as layers
    mtp = r.first_int(("num_nextn_predict_layers", "mtp_num_hidden_layers"), default=0)
    vision = checked_vision_config(raw, source)
    ungated = (
        str(cfg.get("mlp_hidden_act", "")).lower() in _UNGATED_ACTS or cfg.get("model_type") in UNGATED_MODEL_TYPES
    )
    if llama4 and r.has("attention_chunk_size"):
        notes.append(
            f"attention_chunk_size {cfg['attention_chunk_size']}: Llama-4's RoPE layers attend within chunks; "
            "their KV is counted for the whole context (more than an engine keeps past one chunk)"
        )
    top = Reader(raw, source)
    language_only = flag(top, "language_model_only") or flag(top, "language_only")
    if vision and not language_only and not vision_params(vision):
        notes.append(
            "vision_config is not read (tokenplan costs Qwen3-VL-shaped towers only): the vision tower's "
            "weights, typically 0.4–0.7 B parameters, are not counted"
        )
    spec = ModelSpec(
        name=name,
        architecture=arch,
        hidden_size=hidden,
        vocab_size=r.int("vocab_size", minimum=1, what="the vocabulary"),
        num_layers=layers,
        tie_word_embeddings=flag(r, "tie_word_embeddings"),
        attention=attention,
        full_attention_layers=kinds["full"],
        sliding_layers=kinds["sliding"],
        sliding_window=r.int("sliding_window", minimum=1, what="the window of the sliding layers")
        if kinds["sliding"]
        else 0,
        linear=linear,
        linear_layers=kinds["linear"],
        dense_ffn_layers=dense_layers,
        dense_intermediate=dense_width,
        moe=moe,
        moe_layers=moe_layers,
        mtp_layers=mtp,
        ffn_matrices=2 if ungated else 3,
        native_weight_dtype=native,
        max_context_tokens=_context(r),
        rotary_dim=rotary_dim(r, attention, arch),
        vision_layers=0 if language_only else int(vision.get("depth", vision.get("num_hidden_layers", 0)) or 0),
        vision_hidden=0 if language_only else int(vision.get("hidden_size", 0) or 0),
        **({} if language_only else vision_params(vision)),
        approximations=tuple(notes),
    )
    return with_quantized_shares(spec, quant, cfg, dense_at, source)  # which layers a quantized release keeps 16-bit
