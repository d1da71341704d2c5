"""The causal convolution of a Gated DeltaNet or Mamba-2 layer keeps its last ``width − 1`` inputs
per sequence. A ``linear_conv_kernel_dim``/``conv_kernel`` of 0 was accepted and made that −1
columns: a negative conv state taken off every sequence's state (Qwen3.6-27B: 153,944,064 →
150,011,904 bytes). A width of 0 or less is refused in one line; a width of 1 keeps no column."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tokenplan.arch.kv import state_bytes_per_sequence
from tokenplan.catalog import _PKG, load_model
from tokenplan.errors import ConfigError

QWEN36 = json.loads((_PKG / "models" / "qwen3.6-27b.json").read_text(encoding="utf-8"))
NEMOTRON = json.loads((_PKG / "models" / "nemotron-3-nano-30b-a3b.json").read_text(encoding="utf-8"))
ALLOWED = "(allowed: an integer ≥ 1, the causal convolution's width (the state keeps width − 1 columns))"


def _load(tmp_path: Path, cfg: dict):
    folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return load_model(str(folder))


def _qwen(width: object) -> dict:
    cfg = copy.deepcopy(QWEN36)
    cfg["text_config"]["linear_conv_kernel_dim"] = width
    return cfg


@pytest.mark.parametrize("width", [0, -1])
def test_a_gated_deltanet_conv_width_below_one_is_refused(tmp_path, width):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, _qwen(width))
    assert str(info.value).endswith(f"linear_conv_kernel_dim: {width!r} is not allowed {ALLOWED}")


@pytest.mark.parametrize("width", [0, -1])
def test_a_mamba2_conv_width_below_one_is_refused(tmp_path, width):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, {**NEMOTRON, "conv_kernel": width})
    assert str(info.value).endswith(f"conv_kernel: {width!r} is not allowed {ALLOWED}")


def test_a_width_of_one_keeps_the_ssm_state_only(tmp_path):
    # Qwen3.6-27B: 48 linear layers × 48 value heads × 128 × 128 × 4 bytes (float32 SSM state)
    # = 48 × 3,145,728 = 150,994,944 bytes; width 1 keeps 0 conv columns
    spec = _load(tmp_path, _qwen(1))
    assert state_bytes_per_sequence(spec) == 150_994_944
    # the shipped width 4 adds 3 columns of the 10,240-wide conv input in BF16: 48 × 61,440 more
    assert state_bytes_per_sequence(_load(tmp_path, QWEN36)) == 150_994_944 + 48 * 10_240 * 3 * 2
