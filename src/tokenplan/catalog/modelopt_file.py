"""A ModelOpt checkpoint's quantization block, kept in ``hf_quant_config.json`` beside its
config.json by ModelOpt 0.29 and before."""

from __future__ import annotations

from pathlib import Path

from tokenplan.arch.quant import is_mixed_precision, mixed_layers
from tokenplan.arch.quant_match import module_rule
from tokenplan.errors import ConfigError
from tokenplan.loaders import parse_json, read_text


def with_modelopt_file(raw: object, path: Path) -> object:
    """``raw`` with the ``hf_quant_config.json`` beside ``path`` as its ``quantization_config``,
    where the config has no quantization block and that file exists: ModelOpt 0.29 and before
    wrote its block there, not into config.json, and vLLM reads it there (``get_config``:
    "ModelOpt 0.29.0 and before saves the quantization config in a separate
    hf_quant_config.json in the same directory as the model config file"). Where config.json's
    own block is MIXED_PRECISION without its ``quantized_layers`` map, the file's map joins it.

    Raises:
        ConfigError: the file is not JSON or not an object, or one of its lists of modules is
            malformed (:func:`tokenplan.arch.quant_match.module_rule`).
    """
    sibling = path.parent / "hf_quant_config.json"
    if not isinstance(raw, dict) or not sibling.is_file():
        return raw
    text_config = raw.get("text_config")
    blocks = [raw, text_config if isinstance(text_config, dict) else {}]
    holder = next((b for b in blocks if b.get("quantization_config")), None)
    own = holder["quantization_config"] if holder is not None else None
    if own is not None and not _mixed_without_map(own):
        return raw
    if any(b.get("compression_config") for b in blocks) and own is None:
        return raw
    block = parse_json(read_text(sibling), str(sibling))
    if not isinstance(block, dict):
        raise ConfigError(str(sibling), "(top level)", f"a JSON object, not {type(block).__name__}")
    # its lists checked here, so a malformed one names this file and its own keys (config.json's
    # reader would name config.json's quantization_config)
    module_rule(block, "", str(sibling))
    if own is not None:  # config.json's MIXED_PRECISION block names the algorithm, the file the layers
        inner = block.get("quantization")
        layers = (inner if isinstance(inner, dict) else block).get("quantized_layers")
        if not isinstance(layers, dict):
            return raw
        # the file's whole block joins (its exclude list and KV format too, as vLLM loads the file),
        # config.json's own keys kept where both have one
        merged = {**(inner if isinstance(inner, dict) else block), **own, "quantized_layers": layers}
        if holder is raw:
            return {**raw, "quantization_config": merged}
        return {**raw, "text_config": {**blocks[1], "quantization_config": merged}}
    return {**raw, "quantization_config": block}


def _mixed_without_map(block: object) -> bool:
    """A ModelOpt MIXED_PRECISION block without its ``quantized_layers`` map: "Newer checkpoints
    embed it directly; older ones keep it only in hf_quant_config.json" (vLLM
    ``get_quant_config``)."""
    return is_mixed_precision(block) and mixed_layers(block) is None
