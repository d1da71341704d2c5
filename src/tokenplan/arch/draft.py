"""The drafter an engine loads beside the target for EAGLE, EAGLE-3 and DFlash: its parameters
and its attention layers, which hold KV cache like the target's.

MTP layers ship inside the target's checkpoint (``ParamCounts.mtp``, ``ModelSpec.mtp_layers``);
these drafters are separate checkpoints the planner does not read, so their shape is taken from
the target's as the published recipes build them:

- a drafter layer is a dense Llama/Qwen3 decoder layer at the target's hidden size, its attention
  the target's GQA shape (heads, KV heads, head size) without Qwen3.5's output gate, its FFN the
  target's dense width (z-lab's Qwen3-4B DFlash recipe: ``intermediate_size`` 9,728, Qwen3-4B's;
  yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: 14,336, Llama-3.1-8B's) or, for an MoE target, three
  times the hidden size (z-lab/Qwen3.5-122B-A10B-DFlash: 9,216 = 3 × 3,072);
- DFlash projects the hidden states of :data:`DFLASH_TARGET_TAPS` target layers through ``fc``
  (taps·h → h) and shares the target's embedding and lm_head (z-lab's Qwen3.6-27B drafter:
  ``fc`` [5,120, 25,600]; its safetensors hold no ``embed_tokens`` or ``lm_head``);
- EAGLE-3 feeds [embedding; hidden] (2h) to its one layer's q/k/v, fuses three target layers
  through ``fc`` (3h → h) and has its own lm_head over :data:`EAGLE3_DRAFT_VOCAB` tokens
  (arXiv:2503.01840 §3; SpecForge's draft configs); EAGLE-1/2 fuse [embedding; hidden] through
  ``fc`` (2h → h) and use the target's lm_head (arXiv:2401.15077 §4).

Check (Aryagm/dflash-mlx issue #2, memory baseline → DFlash, BF16): Qwen3.5-27B takes 54.33 GB
without and 58.25 GB with its DFlash drafter, +3.92 GB; these rules give 3.67 GB of drafter
weights for it, the rest being the drafter's cache and buffers (tests/unit/arch/test_draft.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenplan.arch.hf_fields import Reader, architecture
from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.errors import ConfigError

# Target layers whose hidden states a DFlash drafter reads: 5 in z-lab's Qwen3-4B recipe
# (target_layer_ids [1, 9, 17, 25, 33]) and Qwen3.6-27B drafter ([1, 16, 31, 46, 61], fc input
# 25,600 = 5 × 5,120); 8 in its Qwen3.5-122B-A10B drafter.
DFLASH_TARGET_TAPS = 5
# EAGLE-3's own lm_head covers the most frequent tokens only: ``draft_vocab_size: 32000`` in
# yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config and SpecForge's draft configs.
EAGLE3_DRAFT_VOCAB = 32_000
# An MoE target's drafter FFN width over its hidden size (z-lab/Qwen3.5-122B-A10B-DFlash).
MOE_DRAFT_FFN_PER_HIDDEN = 3

SEPARATE_DRAFTERS = ("eagle", "eagle3", "dflash")


def _attention(spec: ModelSpec) -> tuple[float, float]:
    """(q/o width, k+v width) of a drafter layer's attention: the target's GQA heads without an
    output gate; a target without GQA layers (MLA, pure state-space) gets a multi-head layer of
    width h (q, k, v and o each h × h)."""
    a, h = spec.attention, spec.hidden_size
    if a is None or a.kind is not AttentionKind.GQA:
        return float(h), float(2 * h)
    return float(a.num_heads * a.head_dim), float(a.num_kv_heads * (a.head_dim + a.v_head_dim))


def draft_layer_params(spec: ModelSpec) -> float:
    """Parameters of one drafter decoder layer for target ``spec`` (see the module docstring):
    q and o (h × width each), k and v, and a gated FFN (``ffn_matrices`` × h × I). Raises nothing."""
    h = spec.hidden_size
    qo, kv = _attention(spec)
    width = spec.dense_intermediate if spec.moe is None else MOE_DRAFT_FFN_PER_HIDDEN * h
    return 2.0 * h * qo + h * kv + float(spec.ffn_matrices * h * width)


def draft_params(spec: ModelSpec, method: str, draft_layers: int) -> float:
    """Parameters of the separately loaded drafter of ``method`` with ``draft_layers`` decoder
    layers (parameters, not bytes); 0 for ``mtp``, whose layers are the target's own.

    DFlash: layers + ``fc`` (taps·h × h). EAGLE-3: one layer whose q/k/v read 2h, ``fc`` (3h × h)
    and an lm_head of :data:`EAGLE3_DRAFT_VOCAB` rows. EAGLE: one layer and ``fc`` (2h × h).
    Norms (a few h each) are left out.

    Raises:
        ValueError: ``method`` is none of mtp, eagle, eagle3, dflash.
    """
    if method == "mtp":
        return 0.0
    if method not in SEPARATE_DRAFTERS:
        raise ValueError(f"unknown speculative method {method!r}")
    h = spec.hidden_size
    body = draft_layer_params(spec) * draft_layers + draft_fc_params(spec, method)
    if method == "eagle3":  # the first layer's q/k/v read 2h, and its own lm_head
        qo, kv = _attention(spec)
        return body + h * (qo + kv) + float(h * EAGLE3_DRAFT_VOCAB)
    return body


def draft_fc_params(spec: ModelSpec, method: str) -> float:
    """Parameters of the drafter's ``fc`` (taps·h × h for DFlash, 3h × h for EAGLE-3, 2h × h for
    EAGLE; 0 for MTP), which the engines hold whole on every TP rank: vLLM builds it as a
    ``ReplicatedLinear`` (``models/qwen3_dflash.py``, ``llama_eagle3.py``), SGLang as a plain
    ``nn.Linear``. Raises nothing."""
    taps = {"dflash": DFLASH_TARGET_TAPS, "eagle3": 3, "eagle": 2}.get(method, 0)
    return float(taps * spec.hidden_size * spec.hidden_size)


def draft_kv_layers(spec: ModelSpec, method: str, draft_layers: int) -> int:
    """Attention layers of the draft that hold KV cache for every token: the target's MTP layers
    under ``mtp``, else the drafter's ``draft_layers``. Raises nothing."""
    return spec.mtp_layers if method == "mtp" else draft_layers


@dataclass(frozen=True, slots=True)
class DrafterShape:
    """A drafter read from its own ``config.json`` (``--draft-model``), in place of the shape
    taken from the target's.

    Attributes:
        params: parameters the engine loads for it (its decoder layers, ``fc``, an own lm_head;
            not the embedding and lm_head it shares with the target).
        layers: its decoder layers, each holding KV for every token.
        kv_heads, head_dim: K/V heads and head size of its attention.
        replicated_params: the part of ``params`` every TP rank holds whole: ``fc``
            (:func:`draft_fc_params`).
        block_size: a DFlash drafter's block (``dflash_config.block_size``: the drafts and the
            bonus token one pass proposes, so at most ``block_size − 1`` drafts); 0 when not stated.
    """

    params: float
    layers: int
    kv_heads: int
    head_dim: int
    replicated_params: float = 0.0
    block_size: int = 0


def drafter_shape(cfg: Mapping[str, Any], source: str, method: str) -> DrafterShape:
    """The shape of a drafter from its ``config.json`` dict (``source`` names the file in errors):
    a DFlash drafter (``DFlashDraftModel``; ``fc`` over ``len(dflash_config.target_layer_ids)``
    target layers) or an EAGLE/EAGLE-3 head (``fc`` over 2 or 3 target layers of
    ``target_hidden_size``, default the drafter's; EAGLE-3's own lm_head of
    ``draft_vocab_size`` rows). Layer parameters as :func:`draft_layer_params`, from the file's
    ``hidden_size``, heads, ``head_dim`` and ``intermediate_size``.

    Raises:
        ConfigError: a field is missing or malformed, or the file is another method's drafter
            (a DFlash drafter named for ``--spec eagle3``, or the reverse).
    """
    r = Reader(cfg, source)
    arch = architecture(r)
    if ("dflash" in arch.lower()) != (method == "dflash"):
        raise r.refuse("architectures", f"a drafter for --spec {method}, not {arch}")
    h = r.int("hidden_size", minimum=1)
    layers = r.int("num_hidden_layers", minimum=1)
    heads = r.int("num_attention_heads", minimum=1)
    kv_heads = r.int("num_key_value_heads", default=heads, minimum=1)
    head_dim = r.int("head_dim", default=h // heads, minimum=1)
    inter = r.int("intermediate_size", minimum=1)
    qo, kv = heads * head_dim, 2 * kv_heads * head_dim
    layer = 2.0 * h * qo + h * kv + 3.0 * h * inter
    if method == "dflash":
        dflash = cfg.get("dflash_config")
        taps = dflash.get("target_layer_ids") if isinstance(dflash, Mapping) else None
        if not isinstance(taps, list) or not taps:
            raise ConfigError(source, "dflash_config.target_layer_ids", "a non-empty list of target layer indices")
        fc = float(len(taps) * h * h)
        block = Reader(dflash if isinstance(dflash, Mapping) else {}, f"{source}: dflash_config").int(
            "block_size", default=0, minimum=2
        )
        return DrafterShape(layers * layer + fc, layers, kv_heads, head_dim, fc, block)
    target_h = r.int("target_hidden_size", default=h, minimum=1)
    if method == "eagle3":
        vocab = r.first_int(("draft_vocab_size", "vocab_size"), minimum=1)
        # the first layer's q/k/v read [embedding; hidden], 2h wide
        fc = 3.0 * target_h * h
        extra = float(h * (qo + kv)) + fc + float(h * vocab)
    else:
        fc = extra = 2.0 * target_h * h
    return DrafterShape(layers * layer + extra, layers, kv_heads, head_dim, fc)
