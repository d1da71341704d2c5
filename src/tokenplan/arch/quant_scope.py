"""Which share of each weight component a quantized checkpoint stores quantized, read from the
list of modules its ``quantization_config`` leaves unquantized, layer by layer and projection
by projection.

Which modules each method's lists leave out (and, for compressed-tensors, which its
``config_groups`` target) is :mod:`tokenplan.arch.quant_match`'s; this module adds up the
parameters of the projections :mod:`tokenplan.arch.quant_walk` walks, and hands a ModelOpt
MIXED_PRECISION block to :mod:`tokenplan.arch.quant_mixed`.

compressed-tensors leaves a module unquantized when an ``ignore`` entry matches its name
(``QuantizationConfig.ignore``; compressed-tensors ``match_name``, vLLM ``should_ignore_layer``):
an entry is a module name, or ``re:`` and a regular expression matched from the name's start
(``re.match``). Kimi-K2-Thinking and Kimi-K2.5 ignore ``lm_head``, ``re:.*self_attn.*``,
``re:.*shared_experts.*`` and ``re:.*mlp\\.(gate|up|gate_up|down)_proj.*``: only their routed
experts are INT4. A list may also name single layers or projections
(``model.layers.0.mlp.down_proj``), so each component's quantized share is the parameters of
its projections, over every layer that has them, whose name no entry matches (the walk:
:mod:`tokenplan.arch.quant_walk`; a projection counts as ignored when any spelling is; routed
experts are read at expert 0, so an entry naming some experts only is read as all or none).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from tokenplan.arch.quant import QuantBlock, native_kv_format
from tokenplan.arch.quant_match import module_rule
from tokenplan.arch.quant_mixed import mixed_precision
from tokenplan.arch.quant_walk import per_component
from tokenplan.arch.spec import ModelSpec


def quantized_shares(
    quant: object,
    spec: ModelSpec,
    cfg: Mapping[str, object],
    dense_layers: Iterable[int],
    source: str,
    key: str = "quantization_config",
) -> tuple[tuple[str, float], ...] | None:
    """The share (0–1, by parameters) of each weight component a quantized checkpoint stores
    quantized, or None where its config lists no module it leaves unquantized
    (:func:`tokenplan.arch.quant_match.module_rule`; then the format's own rule,
    :func:`tokenplan.arch.params.quantized_fraction`).

    Args:
        quant: the config's ``quantization_config``.
        spec: the model as read so far (its shapes and layer counts).
        cfg: the (text) config: ``layer_types``, ``full_attention_interval``,
            ``hybrid_override_pattern``.
        dense_layers: indices of the layers with a dense FFN.
        source: the config's path, for errors.
        key: the block's dotted path in the config, for errors.

    Returns:
        ``(component, share)`` pairs for each of ``attention``, ``linear_attention``,
        ``dense_ffn``, ``shared_experts`` and ``routed_experts`` the model has (a component it
        lacks has no parameters to share out and is left out).

    Raises:
        ConfigError: the list (``ignore``, ``exclude_modules``, ``modules_to_not_convert``, …)
            is not a list of text entries, a ``re:`` entry does not compile, or one takes over
            a second to match a module name.
    """
    rule = module_rule(quant, key, source)
    if rule is None:
        return None
    shares = per_component(spec, cfg, dense_layers, lambda names: 1.0 if rule.quantized(names) else 0.0)
    return tuple((c, v if rule.only is None or c in rule.only else 0.0) for c, v in shares)


def with_quantized_shares(
    spec: ModelSpec, quant: QuantBlock, cfg: Mapping[str, object], dense_layers: Iterable[int], source: str
) -> ModelSpec:
    """``spec`` with ``native_quantized`` set from :func:`quantized_shares` for the config's
    quantization block (unchanged where it lists no module left unquantized) and
    ``native_kv_dtype`` from it (:func:`tokenplan.arch.quant.native_kv_format`). Raises
    ConfigError as :func:`quantized_shares` does."""
    spec = dataclasses.replace(spec, native_kv_dtype=native_kv_format(quant.value))
    mixed = mixed_precision(quant.value, spec, cfg, dense_layers, source, quant.key)
    if mixed is not None:  # ModelOpt MIXED_PRECISION: each layer's own format
        return mixed
    shares = quantized_shares(quant.value, spec, cfg, dense_layers, source, quant.key)
    return spec if shares is None else dataclasses.replace(spec, native_quantized=shares)
