"""``--draft-model``: the drafter an EAGLE, EAGLE-3 or DFlash plan loads, as a local checkpoint
folder (or its ``config.json``), whose shape replaces the one taken from the target's, or as a
Hugging Face repository id, which the launch commands name (its config cannot be downloaded
here, so the shape stays the target's)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenplan.arch.draft import drafter_shape
from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import load_json
from tokenplan.perf.speculative import SpecDecode

# owner/name as Hugging Face spells a repository: letters, digits, '-', '_', '.'
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def attach_drafter(spec: SpecDecode | None, draft_model: str | None) -> SpecDecode | None:
    """``spec`` with its drafter: the launch name ``draft_model``, and the shape read from a
    local ``config.json`` (its folder, or the file; the launch then names the folder, absolute; a
    JSON file of another name gives the shape only).

    Raises:
        InputError: ``draft_model`` without a method that loads one (none, mtp), a path that
            does not exist, or neither a path nor an ``owner/name`` repository id.
        ConfigError: the config.json is malformed or another method's drafter.
    """
    if draft_model is None:
        return spec
    if spec is None or spec.method == "mtp":
        raise InputError(
            "draft_model",
            draft_model,
            "a drafter for --spec eagle, eagle3 or dflash (MTP's layers are in the target's checkpoint)",
        )
    path = Path(draft_model).expanduser()
    config = path / "config.json" if path.is_dir() else path
    if config.is_file():
        cfg: Any = load_json(config)
        if not isinstance(cfg, dict):
            raise ConfigError(str(config), "(top level)", "a JSON object (a Hugging Face config.json)")
        shape = drafter_shape(cfg, str(config), spec.method)
        if shape.block_size and spec.draft_tokens >= shape.block_size:  # a pass proposes block − 1 drafts
            raise InputError(
                "spec",
                f"{spec.method}:{spec.draft_tokens}",
                f"{spec.method}:K with K at most {shape.block_size - 1}: the drafter {config} drafts blocks of "
                f"{shape.block_size} tokens (dflash_config.block_size)",
            )
        # the launches name the checkpoint folder, absolute (an engine started elsewhere finds it);
        # a JSON file of another name gives the shape only, and the launches keep the placeholder
        name = str(config.resolve().parent) if config.name == "config.json" else None
        return replace(spec, draft_model=name, drafter=shape, draft_layers=shape.layers)
    if path.exists() or not _REPO_ID.match(draft_model):
        held = f"{path} holds no config.json" if path.is_dir() else "not found"
        raise InputError(
            "draft_model", draft_model, f"a drafter folder with a config.json, or an owner/name repository id ({held})"
        )
    return replace(spec, draft_model=draft_model)
