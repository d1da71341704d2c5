"""A multimodal config.json's ``vision_config`` counts and its ``language_model_only`` flag are
checked like the text fields: one line naming ``vision_config.KEY`` (or the flag), the value and
what is allowed. Text in ``vision_config.depth`` was a ValueError traceback; a negative or quoted
depth was read silently (weights taken off or put on); a ``vision_config`` that is not an object
and ``"language_model_only": "false"`` (text, so true) both dropped the vision tower's weights."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tokenplan.catalog import _PKG, load_model
from tokenplan.errors import ConfigError

QWEN36 = json.loads((_PKG / "models" / "qwen3.6-27b.json").read_text(encoding="utf-8"))


def _write(tmp_path: Path, cfg: dict) -> Path:
    folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


def _vision(**changes: object) -> dict:
    cfg = copy.deepcopy(QWEN36)
    cfg["vision_config"].update(changes)
    return cfg


def _refused(tmp_path: Path, cfg: dict) -> str:
    with pytest.raises(ConfigError) as info:
        load_model(str(_write(tmp_path, cfg)))
    text = str(info.value)
    assert "\n" not in text
    return text.split("config.json: ", 1)[1]


@pytest.mark.parametrize("bad", ["abc", "12", -5, 1.5, True])
def test_a_vision_depth_that_is_not_a_count_is_refused(tmp_path, bad):
    assert _refused(tmp_path, _vision(depth=bad)) == (
        f"vision_config.depth: {bad!r} is not allowed (allowed: an integer ≥ 0)"
    )


@pytest.mark.parametrize("key", ["hidden_size", "intermediate_size", "out_hidden_size", "patch_size"])
def test_a_vision_width_of_zero_or_text_is_refused(tmp_path, key):
    assert _refused(tmp_path, _vision(**{key: 0})) == f"vision_config.{key}: 0 is not allowed (allowed: an integer ≥ 1)"
    assert _refused(tmp_path, _vision(**{key: "x"})) == (
        f"vision_config.{key}: 'x' is not allowed (allowed: an integer ≥ 1)"
    )


def test_a_vision_config_that_is_not_an_object_is_refused(tmp_path):
    cfg = {**QWEN36, "vision_config": "x"}
    assert _refused(tmp_path, cfg) == "vision_config: 'x' is not allowed (allowed: a JSON object)"


def test_language_model_only_as_text_is_refused(tmp_path):
    cfg = {**QWEN36, "language_model_only": "false"}
    assert _refused(tmp_path, cfg) == "language_model_only: 'false' is not allowed (allowed: true or false)"


def test_the_shipped_vision_tower_still_counts_and_false_keeps_it(tmp_path):
    shipped = load_model(str(_write(tmp_path, QWEN36)))
    assert shipped.vision_layers == QWEN36["vision_config"]["depth"] > 0
    kept = load_model(str(_write(tmp_path, {**QWEN36, "language_model_only": False})))
    assert kept.vision_layers == shipped.vision_layers
    dropped = load_model(str(_write(tmp_path, {**QWEN36, "language_model_only": True})))
    assert dropped.vision_layers == 0


def test_the_cli_prints_one_line_and_no_traceback(tmp_path):
    folder = _write(tmp_path, _vision(depth="abc"))
    done = subprocess.run(
        [sys.executable, "-m", "tokenplan", "memory", "--model", str(folder / "config.json"), "--gpu", "b200"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("vision_config.depth: 'abc' is not allowed (allowed: an integer ≥ 0)")
    assert len(done.stderr.strip().splitlines()) == 1
