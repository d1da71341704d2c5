"""A ModelOpt checkpoint's quantization block, kept in ``hf_quant_config.json`` beside its
config.json by ModelOpt 0.29 and before."""

from __future__ import annotations

from pathlib import Path

from tokenplan.arch.quant_match import module_rule
from tokenplan.errors import ConfigError
from tokenplan.loaders import parse_json, read_text


def with_modelopt_file(raw: object, path: Path) -> object:
    """``raw`` with the ``hf_quant_config.json`` beside ``path`` as its ``quantization_config``,
    where the config has no quantization block and that file exists: ModelOpt 0.29 and before
    wrote its block there, not into config.json, and vLLM reads it there (``get_config``:
    "ModelOpt 0.29.0 and before saves the quantization config in a separate
    hf_quant_config.json in the same directory as the model config file").

    Raises:
        ConfigError: the file is not JSON or not an object, or one of its lists of modules is
            malformed (:func:`tokenplan.arch.quant_match.module_rule`).
    """
    sibling = path.parent / "hf_quant_config.json"
    if not isinstance(raw, dict) or not sibling.is_file():
        return raw
    text_config = raw.get("text_config")
    blocks = [raw, text_config if isinstance(text_config, dict) else {}]
    if any(b.get(k) for b in blocks for k in ("quantization_config", "compression_config")):
        return raw
    block = parse_json(read_text(sibling), str(sibling))
    if not isinstance(block, dict):
        raise ConfigError(str(sibling), "(top level)", f"a JSON object, not {type(block).__name__}")
    # its lists checked here, so a malformed one names this file and its own keys (config.json's
    # reader would name config.json's quantization_config)
    module_rule(block, "", str(sibling))
    return {**raw, "quantization_config": block}
