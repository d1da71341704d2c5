"""A ModelOpt checkpoint's quantization block, kept in ``hf_quant_config.json`` beside its
config.json by ModelOpt 0.29 and before."""

from __future__ import annotations

from pathlib import Path

from tokenplan.errors import ConfigError
from tokenplan.loaders import parse_json, read_text


def with_modelopt_file(raw: object, path: Path) -> object:
    """``raw`` with the ``hf_quant_config.json`` beside ``path`` as its ``quantization_config``,
    where the config has no quantization block and that file exists: ModelOpt 0.29 and before
    wrote its block there, not into config.json, and vLLM reads it there (``get_config``:
    "ModelOpt 0.29.0 and before saves the quantization config in a separate
    hf_quant_config.json in the same directory as the model config file").

    Raises:
        ConfigError: the file is not JSON or not an object.
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
    inner = block.get("quantization")
    listed = inner.get("exclude_modules") if isinstance(inner, dict) else None
    if listed is not None and (not isinstance(listed, list) or not all(isinstance(e, str) for e in listed)):
        # said here, naming this file (config.json's reader would name config.json)
        raise ConfigError(
            str(sibling),
            "quantization.exclude_modules",
            f"{listed!r:.60} is not a list of module names and * wildcards",
        )
    return {**raw, "quantization_config": block}
