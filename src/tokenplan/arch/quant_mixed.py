"""A ModelOpt MIXED_PRECISION release: each layer stored in its own format, read from the block's
``quantized_layers`` map (module name → ``quant_algo``).

NVIDIA ships its 4-bit Qwen3.6 releases this way (nvidia/Qwen3.6-27B-NVFP4 and
-35B-A3B-NVFP4: attention and the Gated DeltaNet ``out_proj`` in FP8, the MLPs and experts in
W4A16_NVFP4). A projection takes the algorithm of its own name, of its nearest parent module
(``…mlp.experts`` covers every expert), or of a listed child (vLLM
``ModelOptMixedPrecisionConfig._resolve_quant_algo``: direct, then "prefix-based lookup for
FusedMoE / parent modules"); a projection none covers, or one the block's exclude list names,
is stored unquantized (vLLM: "Layer not in quantized_layers — leave unquantized"). Each
component's bytes per parameter are the parameter-weighted mean of its projections' formats'
bytes (:class:`tokenplan.units.Dtype`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from tokenplan.arch.quant import mixed_format, mixed_layers
from tokenplan.arch.quant_match import module_rule
from tokenplan.arch.spec import ModelSpec
from tokenplan.units import Dtype

PerComponent = Callable[
    [ModelSpec, Mapping[str, object], Iterable[int], Callable[[list[str]], float]], tuple[tuple[str, float], ...]
]


def mixed_precision(
    quant: object,
    spec: ModelSpec,
    cfg: Mapping[str, object],
    dense_layers: Iterable[int],
    per_component: PerComponent,
    source: str,
    key: str = "quantization_config",
) -> ModelSpec | None:
    """``spec`` with each component's bytes per parameter (``native_component_bytes``) and
    quantized share (``native_quantized``) as the release stores them, or None where ``quant``
    is not a MIXED_PRECISION block with a ``quantized_layers`` map.

    Args:
        per_component: ``arch.quant_scope.per_component``, the walk over each component's
            projections and layers.
        source, key: the config's path and the block's dotted path, for errors.

    Raises:
        ConfigError: a malformed exclude list (:func:`tokenplan.arch.quant_match.module_rule`).
    """
    layers = mixed_layers(quant)
    if layers is None:
        return None
    rule = module_rule(quant, key, source)
    dense = list(dense_layers)

    def algo_of(names: list[str]) -> str | None:
        for name in names:
            parts = name.split(".")
            for n in range(len(parts), 0, -1):  # the module itself, then each parent
                if (found := layers.get(".".join(parts[:n]))) is not None:
                    return found
            child = next((a for k, a in layers.items() if k.startswith(name + ".")), None)
            if child is not None:
                return child
        return None

    def stored(names: list[str]) -> Dtype:
        fmt = mixed_format(algo_of(names) or "")
        return Dtype.BF16 if fmt is None or (rule is not None and not rule.quantized(names)) else Dtype(fmt)

    bytes_ = per_component(spec, cfg, dense, lambda names: stored(names).bytes_per_element)
    shares = per_component(spec, cfg, dense, lambda names: 0.0 if stored(names) is Dtype.BF16 else 1.0)
    notes = list(spec.approximations)
    if "W4A16_NVFP4" in layers.values():
        notes.append("W4A16_NVFP4 layers (NVFP4 weights, 16-bit activations) are costed at NVFP4's compute rate")
    unread = sorted({a for a in layers.values() if mixed_format(a) is None})
    if unread:
        notes.append(f"quantized_layers algorithms {', '.join(unread) or '(none)'} are not read: sized at 16 bits")
    return dataclasses.replace(
        spec, native_component_bytes=bytes_, native_quantized=shares, approximations=tuple(notes)
    )
