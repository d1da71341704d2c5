"""The walk every reading of a quantized release shares: each weight component's projections,
in every layer that holds it, under every spelling of their module names.

- layer kinds by index: Gated DeltaNet / Mamba layers where ``layer_types`` says
  ``linear_attention``, where ``(i + 1) % full_attention_interval`` is not 0 (transformers'
  Qwen3-Next/Qwen3.5 configs), or ``M`` in ``hybrid_override_pattern``; softmax attention in the
  rest (``*`` in the pattern); dense FFN and MoE layers as :mod:`tokenplan.arch.hf_config` reads them;
- projection names as Hugging Face's modelling code spells them, under each of the prefixes a
  text-only or multimodal checkpoint uses (``model.layers.N``, ``model.language_model.layers.N``,
  ``language_model.model.layers.N``; Nemotron-H's ``backbone.layers.N``), with each
  projection's parameter count from the shapes :mod:`tokenplan.arch.params` counts;
- routed experts are read at expert 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from tokenplan.arch.spec import AttentionKind, ModelSpec

_PREFIXES = (
    "model.layers.{i}.",
    "model.language_model.layers.{i}.",
    "language_model.model.layers.{i}.",
    "backbone.layers.{i}.",  # Nemotron-H
)


def per_component(
    spec: ModelSpec, cfg: Mapping[str, object], dense_layers: Iterable[int], value: Callable[[list[str]], float]
) -> tuple[tuple[str, float], ...]:
    """Each weight component's parameter-weighted mean of ``value(names)`` over its projections
    in every layer that holds it (``names``: one projection's full module names, every spelling
    under every layer prefix), for the components the model has (see the module docstring)."""
    layers = _layers_by_kind(spec, cfg, set(dense_layers))
    out = []
    for component, projections in _projections(spec).items():
        total = summed = 0.0
        for i in layers[component]:
            prefixes = [p.format(i=i) for p in _PREFIXES]
            for spellings, params in projections:
                total += params
                summed += params * value([pre + name for pre in prefixes for name in spellings])
        if total > 0:
            out.append((component, summed / total))
    return tuple(out)


def _layers_by_kind(spec: ModelSpec, cfg: Mapping[str, object], dense: set[int]) -> dict[str, list[int]]:
    """The layer indices that hold each component (see the module docstring)."""
    n = spec.num_layers
    pattern = cfg.get("hybrid_override_pattern")
    types = cfg.get("layer_types")
    if isinstance(pattern, str):
        linear = {i for i, c in enumerate(pattern) if c == "M"}
        attention = {i for i, c in enumerate(pattern) if c == "*"}
    else:
        if isinstance(types, list):
            linear = {i for i, t in enumerate(types) if t == "linear_attention"}
        elif spec.linear_layers and isinstance(interval := cfg.get("full_attention_interval"), int) and interval > 0:
            linear = {i for i in range(n) if (i + 1) % interval}
        else:
            linear = (
                set(range(n))
                if spec.linear_layers and not (spec.full_attention_layers + spec.sliding_layers)
                else set()
            )
        attention = set(range(n)) - linear if spec.attention is not None else set()
    if spec.moe is None or not spec.moe_layers:
        moe: list[int] = []
    elif isinstance(pattern, str):  # Nemotron-H: the MoE layers are the pattern's E, apart from M and *
        moe = [i for i, c in enumerate(pattern) if c == "E"]
    else:
        moe = sorted(set(range(n)) - dense)
    return {
        "attention": sorted(attention),
        "linear_attention": sorted(linear),
        "dense_ffn": sorted(dense) if spec.dense_ffn_layers else [],
        "shared_experts": moe if spec.moe is not None and spec.moe.shared_intermediate else [],
        "routed_experts": moe,
    }


Projection = tuple[tuple[str, ...], float]  # (spellings of one projection's name, its parameters)


def _projections(spec: ModelSpec) -> dict[str, list[Projection]]:
    """Each component's projections in one layer: (spellings of its module name after the layer
    prefix, parameters), from the shapes :mod:`tokenplan.arch.params` counts."""
    h = spec.hidden_size
    out: dict[str, list[Projection]] = {}
    a = spec.attention
    if a is not None and a.kind is AttentionKind.MLA:
        nope = a.head_dim - a.qk_rope_head_dim
        q: list[Projection] = (
            [
                (("self_attn.q_a_proj",), float(h * a.q_lora_rank)),
                (("self_attn.q_b_proj",), float(a.q_lora_rank * a.num_heads * a.head_dim)),
            ]
            if a.q_lora_rank
            else [(("self_attn.q_proj",), float(h * a.num_heads * a.head_dim))]
        )
        out["attention"] = q + [
            (("self_attn.kv_a_proj_with_mqa",), h * (a.kv_lora_rank + a.qk_rope_head_dim)),
            (("self_attn.kv_b_proj",), a.kv_lora_rank * a.num_heads * (nope + a.v_head_dim)),
            (("self_attn.o_proj",), a.num_heads * a.v_head_dim * h),
        ]
    elif a is not None:
        out["attention"] = [  # Nemotron-H names its attention projections mixer.*
            (("self_attn.q_proj", "mixer.q_proj"), h * a.num_heads * a.head_dim * (2 if a.output_gate else 1)),
            (("self_attn.k_proj", "mixer.k_proj"), h * a.num_kv_heads * a.head_dim),
            (("self_attn.v_proj", "mixer.v_proj"), h * a.num_kv_heads * a.v_head_dim),
            (("self_attn.o_proj", "self_attn.out_proj", "mixer.o_proj"), a.num_heads * a.v_head_dim * h),
        ]
    lin = spec.linear
    if lin is not None:
        v = lin.num_v_heads * lin.v_head_dim
        if lin.kind == "gated_deltanet":  # Qwen3-Next fuses qkvz and ba; Qwen3.5 splits qkv, z, b, a
            qk = 2 * lin.num_k_heads * lin.k_head_dim
            inputs: list[Projection] = [
                (("linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv"), h * (qk + v)),
                (("linear_attn.in_proj_qkvz", "linear_attn.in_proj_z"), h * v),
                (("linear_attn.in_proj_ba", "linear_attn.in_proj_b"), h * lin.num_v_heads),
                (("linear_attn.in_proj_ba", "linear_attn.in_proj_a"), h * lin.num_v_heads),
            ]
        else:  # Mamba-2: one in_proj
            inputs = [(("mixer.in_proj",), h * lin.in_proj_out)]
        out["linear_attention"] = inputs + [(("linear_attn.out_proj", "mixer.out_proj"), v * h)]
    gated = spec.ffn_matrices == 3

    def ffn(prefixes: tuple[str, ...], width: int) -> list[Projection]:
        names = (
            (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2")) if gated else (("up_proj",), ("down_proj",))
        )
        return [(tuple(p + n for p in prefixes for n in spelled), float(h * width)) for spelled in names]

    out["dense_ffn"] = ffn(("mlp.", "mixer."), spec.dense_intermediate)
    m = spec.moe
    if m is not None:
        out["shared_experts"] = ffn(  # Nemotron-H: mixer.shared_experts
            ("mlp.shared_experts.", "mlp.shared_expert.", "mixer.shared_experts."), m.shared_intermediate
        )
        out["routed_experts"] = ffn(
            ("mlp.experts.0.", "block_sparse_moe.experts.0.", "mixer.experts.0."), m.expert_intermediate
        )
    return out
