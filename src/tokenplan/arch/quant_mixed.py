"""A ModelOpt MIXED_PRECISION release: each layer stored in its own format, read from the block's
``quantized_layers`` map (module name → ``quant_algo``).

NVIDIA ships its 4-bit Qwen3.6 releases this way (nvidia/Qwen3.6-27B-NVFP4 and
-35B-A3B-NVFP4: attention and the Gated DeltaNet ``out_proj`` in FP8, the MLPs and experts in
W4A16_NVFP4). A projection takes the algorithm of its own name's key or of a listed child, and a
routed expert's that of its fused MoE module (``…mlp.experts``), key or child (vLLM
``ModelOptMixedPrecisionConfig._resolve_quant_algo``: direct, then "prefix-based lookup for
FusedMoE / parent modules"); a projection none covers, or one the block's exclude list names,
is stored unquantized (vLLM: "Layer not in quantized_layers — leave unquantized"). Each
component's bytes per parameter are the parameter-weighted mean of its projections' formats'
bytes (:class:`tokenplan.units.Dtype`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from tokenplan.arch.quant import mixed_format, mixed_layers
from tokenplan.arch.quant_match import module_rule
from tokenplan.arch.quant_walk import per_component
from tokenplan.arch.spec import ModelSpec
from tokenplan.errors import ConfigError
from tokenplan.units import Dtype


def mixed_precision(
    quant: object,
    spec: ModelSpec,
    cfg: Mapping[str, object],
    dense_layers: Iterable[int],
    source: str,
    key: str = "quantization_config",
) -> ModelSpec | None:
    """``spec`` with each component's bytes per parameter (``native_component_bytes``) and
    quantized share (``native_quantized``) as the release stores them, or None where ``quant``
    is not a MIXED_PRECISION block with a ``quantized_layers`` map.

    Args:
        source, key: the config's path and the block's dotted path, for errors.

    Raises:
        ConfigError: a malformed map (:func:`_check`) or exclude list
            (:func:`tokenplan.arch.quant_match.module_rule`).
    """
    layers = mixed_layers(quant, source, key)
    if layers is None:
        return None
    _check(layers, source, key)
    rule = module_rule(quant, key, source)
    dense = list(dense_layers)
    # every module with a listed child → that child's algorithm (the first listed): the child
    # rule answered from an index, as a map of every expert's projections runs to 30,000 keys
    child_of: dict[str, str] = {}
    for k, a in layers.items():
        parts = k.split(".")
        for n in range(1, len(parts)):
            child_of.setdefault(".".join(parts[:n]), a)

    def algo_of(names: list[str]) -> str | None:
        for name in names:
            # vLLM's order: the module's own key, then a listed child of it; a routed expert's
            # projection is resolved at its fused MoE module (…mlp.experts), key or child
            found = layers.get(name) or child_of.get(name)
            if found is None and ".experts." in name:
                experts = name[: name.index(".experts.") + len(".experts")]
                found = layers.get(experts) or child_of.get(experts)
            if found is not None:
                return found
        return None

    seen: dict[str, Dtype] = {}  # by the projection's first full name: asked for bytes, then shares

    def stored(names: list[str]) -> Dtype:
        if names[0] not in seen:
            fmt = mixed_format(algo_of(names) or "")
            left_out = fmt is None or (rule is not None and not rule.quantized(names))
            seen[names[0]] = Dtype.BF16 if left_out or fmt is None else Dtype(fmt)
        return seen[names[0]]

    bytes_ = per_component(spec, cfg, dense, lambda names: stored(names).bytes_per_element)
    shares = per_component(spec, cfg, dense, lambda names: 0.0 if stored(names) is Dtype.BF16 else 1.0)
    notes = list(spec.approximations)
    if any(k == "lm_head" or k.endswith(".lm_head") for k in layers):
        notes.append("quantized_layers lists lm_head: it is sized at 16 bits, as every lm_head is here")
    if "W4A16_NVFP4" in layers.values():
        notes.append("W4A16_NVFP4 layers (NVFP4 weights, 16-bit activations) are costed at NVFP4's compute rate")
    unread = sorted({a for a in layers.values() if mixed_format(a) is None})
    if unread:
        notes.append(f"quantized_layers algorithms {', '.join(unread)} are not read: those layers are sized at 16 bits")
    return dataclasses.replace(
        spec, native_component_bytes=bytes_, native_quantized=shares, approximations=tuple(notes)
    )


# The projections the engines fuse into one GEMM, which must share one format (vLLM
# _resolve_quant_algo: "Mixed quant_algo within fused layer … All shards must use the same
# quantization")
_FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def _check(layers: Mapping[str, str], source: str, key: str) -> None:
    """Refuse a map the engines refuse: projections of one fused layer in different formats.

    Raises:
        ConfigError: naming the layer and the formats.
    """
    for group in _FUSED:
        seen: dict[str, set[str]] = {}
        for name, algo in layers.items():
            base, _, proj = name.rpartition(".")
            if proj in group:
                seen.setdefault(base, set()).add(algo)
        for base, algos in seen.items():
            if len(algos) > 1:
                raise ConfigError(
                    source,
                    f"{key}.quantized_layers",
                    f"{base}'s {'/'.join(group)} are one fused layer in the engines and must share a format, "
                    f"not {', '.join(sorted(algos))}",
                )
