"""The reasoning parser (and the remote-code flag) a local config.json is launched with: the one
every shipped model of its ``model_type`` is launched with (``launch.yaml``), where they agree.

A user's own copy of a shipped model (or a fine-tune of one) carries the same ``model_type``
and chat template, so it emits the same reasoning markers: Qwen3.6-27B's config copied into a
folder was launched without ``--reasoning-parser`` (a new-user pass), and its thinking would
have come back inline in ``content`` for a job whose point is the reasoning traces. Where the
shipped models of one ``model_type`` disagree (DeepSeek-V3 has no parser, DeepSeek-R1 has one)
the type does not say which, and none is written. Likewise ``trust_remote_code``: a local copy
of Kimi-K2.5 or MiniMax-M2.5 needs its repository's own code (tokenizer, modelling) as the
shipped one does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

_UNSET = object()


def by_model_type(
    launch: Mapping[str, Mapping[str, object]], models: Path, key: str = "reasoning_parser"
) -> dict[str, object]:
    """``model_type`` → the ``launch.yaml`` value ``key`` (the reasoning parser: a name, or
    {engine: name}; ``trust_remote_code``: true) every shipped model of that type has; a type
    whose models disagree, or have none, is left out.

    Args:
        launch: ``launch.yaml``'s ``models`` (catalog name → its entry).
        models: the folder of the shipped config.json copies (``<name>.json``).
        key: the entry's key.
    """
    seen: dict[str, object] = {}
    for name, entry in launch.items():
        path = models / f"{name}.json"
        if not path.is_file():
            continue
        parser = entry.get(key)
        for model_type in _model_types(json.loads(path.read_text(encoding="utf-8"))):
            previous = seen.get(model_type, _UNSET)
            seen[model_type] = parser if previous is _UNSET or previous == parser else None
    return {t: p for t, p in seen.items() if p}


def local_value(config: Path, by_type: Mapping[str, object]) -> object:
    """The value (:func:`by_model_type`) for the config.json at ``config`` (a file or its folder)
    by its ``model_type`` (top level, then ``text_config``), or None where none is known or the
    file does not read as a JSON object (the loader has said so already)."""
    path = config / "config.json" if config.is_dir() else config
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return next((by_type[t] for t in _model_types(raw) if t in by_type), None)


def _model_types(raw: object) -> list[str]:
    if not isinstance(raw, Mapping):
        return []
    text = raw.get("text_config")
    found = [raw.get("model_type"), text.get("model_type") if isinstance(text, Mapping) else None]
    return [t for t in found if isinstance(t, str) and t]
