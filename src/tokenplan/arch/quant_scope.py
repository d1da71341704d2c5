"""Which share of each weight component a quantized checkpoint stores quantized, read from the
list of modules its ``quantization_config`` leaves unquantized, layer by layer and projection
by projection.

Each method keeps that list under its own key and matches its entries its own way
(:func:`exclusion_list`):

- compressed-tensors: ``ignore``, read as below;
- NVIDIA ModelOpt (``modelopt``, ``modelopt_fp4``): ``ignore`` in a config.json block, or
  ``exclude_modules`` (at the top, or under ``quantization`` as ``hf_quant_config.json`` writes
  it) — vLLM ``ModelOptQuantConfigBase.from_config``; entries are module names and ``fnmatch``
  wildcards (``model.layers.*.self_attn*``; vLLM ``is_layer_excluded``: "modelopt exclude
  modules are not simple strings, they are wildcards");
- FP8 (``fp8``, ``fbgemm_fp8``), MXFP4 (gpt-oss), AWQ/GPTQ: ``ignored_layers``, else
  ``modules_to_not_convert`` (vLLM ``Fp8Config.from_config``); bitsandbytes:
  ``llm_int8_skip_modules``. An entry names a module: it leaves out the modules whose dotted
  name holds it whole between dots (SGLang's dot-boundary match, sgl-project/sglang#23467:
  ``mlp.gate``, a MoE router, is not ``mlp.gate_proj``), and a wildcard entry the modules it
  or one of their parents matches (gpt-oss's ``model.layers.*.self_attn``).

The rest of this docstring is compressed-tensors' ``ignore`` list; the layer and projection
walk below serves every method.

compressed-tensors leaves a module unquantized when an ``ignore`` entry matches its name
(``QuantizationConfig.ignore``; compressed-tensors ``match_name``, vLLM ``should_ignore_layer``):
an entry is a module name, or ``re:`` and a regular expression matched from the name's start
(``re.match``). Kimi-K2-Thinking and Kimi-K2.5 ignore ``lm_head``, ``re:.*self_attn.*``,
``re:.*shared_experts.*`` and ``re:.*mlp\\.(gate|up|gate_up|down)_proj.*``: only their routed
experts are INT4. A list may also name single layers or projections
(``model.layers.0.mlp.down_proj``), so each component's quantized share is the parameters of
its projections, over every layer that has them, whose name no entry matches:

- layer kinds by index: Gated DeltaNet / Mamba layers where ``layer_types`` says
  ``linear_attention``, where ``(i + 1) % full_attention_interval`` is not 0 (transformers'
  Qwen3-Next/Qwen3.5 configs), or ``M`` in ``hybrid_override_pattern``; softmax attention in the
  rest (``*`` in the pattern); dense FFN and MoE layers as :mod:`tokenplan.arch.hf_config` reads them;
- projection names as Hugging Face's modelling code spells them, under each of the prefixes a
  text-only or multimodal checkpoint uses (``model.layers.N``, ``model.language_model.layers.N``,
  ``language_model.model.layers.N``; Nemotron-H's ``backbone.layers.N``); a projection counts as
  ignored when any spelling is;
- routed experts are read at expert 0: an entry naming some experts only is read as all or none.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Iterable, Mapping

import regex

from tokenplan.arch.quant import quant_method
from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.errors import ConfigError

_PREFIXES = (
    "model.layers.{i}.",
    "model.language_model.layers.{i}.",
    "language_model.model.layers.{i}.",
    "backbone.layers.{i}.",  # Nemotron-H
)
_COMPRESSED, _MODULES = "compressed-tensors", "modules"
_ALLOWED = {
    _COMPRESSED: "a list of module names and re:<regular expression> patterns (compressed-tensors)",
    _MODULES: "a list of module names and * wildcards",
}
# quant_method → the keys of its list of modules kept unquantized, the first present is read
# (vLLM Fp8Config: ignored_layers, else modules_to_not_convert; BitsAndBytesConfig:
# llm_int8_skip_modules)
_MODULE_LIST_KEYS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("fp8", "fbgemm-fp8", "mxfp4"), ("ignored_layers", "modules_to_not_convert")),
    **dict.fromkeys(("awq", "gptq", "awq-marlin", "gptq-marlin", "marlin"), ("modules_to_not_convert",)),
    "bitsandbytes": ("llm_int8_skip_modules",),
    "modelopt": ("ignore", "exclude_modules"),
    "modelopt-fp4": ("ignore", "exclude_modules"),
}
_MATCH_TIMEOUT_S = 1.0  # one pattern against one module name; a catastrophic backtrack is refused


def quantized_shares(
    quant: object, spec: ModelSpec, cfg: Mapping[str, object], dense_layers: Iterable[int], source: str
) -> tuple[tuple[str, float], ...] | None:
    """The share (0–1, by parameters) of each weight component a quantized checkpoint stores
    quantized, or None where its config lists no module it leaves unquantized
    (:func:`exclusion_list`; then the format's own rule, :func:`tokenplan.arch.params.quantized_fraction`).

    Args:
        quant: the config's ``quantization_config``.
        spec: the model as read so far (its shapes and layer counts).
        cfg: the (text) config: ``layer_types``, ``full_attention_interval``,
            ``hybrid_override_pattern``.
        dense_layers: indices of the layers with a dense FFN.
        source: the config's path, for errors.

    Returns:
        ``(component, share)`` pairs for each of ``attention``, ``linear_attention``,
        ``dense_ffn``, ``shared_experts`` and ``routed_experts`` the model has (a component it
        lacks has no parameters to share out and is left out).

    Raises:
        ConfigError: the list (``ignore``, ``exclude_modules``, ``modules_to_not_convert``, …)
            is not a list of text entries, a ``re:`` entry does not compile, or one takes over
            a second to match a module name.
    """
    found = exclusion_list(quant)
    if found is None:
        return None
    field, entries, style = found
    if not isinstance(entries, list) or not all(isinstance(p, str) for p in entries):
        raise ConfigError(source, field, f"{_short(entries)} is not {_ALLOWED[style]}")
    matches = _matcher(entries, source, field) if style == _COMPRESSED else _module_matcher(entries)
    layers = _layers_by_kind(spec, cfg, set(dense_layers))
    shares = []
    for component, projections in _projections(spec).items():
        total = kept = 0.0
        for i in layers[component]:
            prefixes = [p.format(i=i) for p in _PREFIXES]
            for spellings, params in projections:
                total += params
                if not any(matches(pre + name) for pre in prefixes for name in spellings):
                    kept += params
        if total > 0:
            shares.append((component, kept / total))
    return tuple(shares)


def exclusion_list(quant: object) -> tuple[str, object, str] | None:
    """Where a ``quantization_config`` lists the modules it leaves unquantized (see the module
    docstring): ``(the field's dotted name for messages, its value, how entries match:
    "compressed-tensors" or "modules")``, or None where it lists none (absent, null or empty)."""
    if not isinstance(quant, Mapping):
        return None
    method = quant_method(quant)
    where: Mapping[str, object] = quant
    prefix = "quantization_config"
    keys: tuple[str, ...]
    if method == "compressed-tensors":
        keys, style = ("ignore",), _COMPRESSED
    elif method in _MODULE_LIST_KEYS:
        keys, style = _MODULE_LIST_KEYS[method], _MODULES
        inner = quant.get("quantization")
        if method.startswith("modelopt") and isinstance(inner, Mapping):  # hf_quant_config.json's nesting
            where, prefix = inner, "quantization_config.quantization"
    else:
        return None
    for key in keys:
        value = where.get(key)
        if value is not None and value != []:
            return f"{prefix}.{key}", value, style
    return None


def with_quantized_shares(
    spec: ModelSpec, quant: object, cfg: Mapping[str, object], dense_layers: Iterable[int], source: str
) -> ModelSpec:
    """``spec`` with ``native_quantized`` set from :func:`quantized_shares` (unchanged where the
    config lists no module left unquantized). Raises ConfigError as :func:`quantized_shares` does."""
    shares = quantized_shares(quant, spec, cfg, dense_layers, source)
    return spec if shares is None else dataclasses.replace(spec, native_quantized=shares)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _module_matcher(entries: list[str]) -> Callable[[str], bool]:
    """A predicate ``name → left unquantized`` for a list of module names (FP8, MXFP4, AWQ/GPTQ,
    bitsandbytes, ModelOpt): an entry leaves out a module whose dotted name holds it whole
    between dots, or one the entry's wildcards match, itself or through a parent module."""
    plain = [f".{e}." for e in entries if not any(c in e for c in "*?[")]
    globs = [e for e in entries if any(c in e for c in "*?[")]

    def matches(name: str) -> bool:
        if any(p in f".{name}." for p in plain):
            return True
        parts = name.split(".")
        parents = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
        return any(fnmatch.fnmatchcase(p, g) for g in globs for p in parents)

    return matches


def _matcher(ignore: list[str], source: str, field: str) -> Callable[[str], bool]:
    """A predicate ``name → ignored`` over the entries: exact names, ``fnmatch`` wildcards (as
    ModelOpt-style lists write them), and ``re:`` patterns matched from the name's start."""
    exact = {p for p in ignore if not p.startswith("re:") and not any(c in p for c in "*?[")}
    globs = [p for p in ignore if not p.startswith("re:") and p not in exact]
    patterns = []
    for p in ignore:
        if p.startswith("re:"):
            try:
                patterns.append((p, regex.compile(p[3:])))
            except regex.error as exc:
                raise ConfigError(source, field, f"entry {_short(p)} is not a regular expression ({exc})") from None

    def matches(name: str) -> bool:
        if name in exact or any(fnmatch.fnmatchcase(name, g) for g in globs):
            return True
        for text, compiled in patterns:
            try:
                if compiled.match(name, timeout=_MATCH_TIMEOUT_S) is not None:
                    return True
            except TimeoutError:
                raise ConfigError(
                    source, field, f"entry {_short(text)} takes over {_MATCH_TIMEOUT_S:g} s to match {name!r}"
                ) from None
        return False

    return matches


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
        out["linear_attention"] = [
            (("linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv", "mixer.in_proj"), h * lin.in_proj_out),
            (("linear_attn.out_proj", "mixer.out_proj"), lin.num_v_heads * lin.v_head_dim * h),
        ]
    gated = spec.ffn_matrices == 3

    def ffn(prefixes: tuple[str, ...], width: int) -> list[Projection]:
        names = (
            (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2")) if gated else (("up_proj",), ("down_proj",))
        )
        return [(tuple(p + n for p in prefixes for n in spelled), float(h * width)) for spelled in names]

    out["dense_ffn"] = ffn(("mlp.", "mixer."), spec.dense_intermediate)
    m = spec.moe
    if m is not None:
        out["shared_experts"] = ffn(("mlp.shared_experts.", "mlp.shared_expert."), m.shared_intermediate)
        out["routed_experts"] = ffn(
            ("mlp.experts.0.", "block_sparse_moe.experts.0.", "mixer.experts.0."), m.expert_intermediate
        )
    return out
