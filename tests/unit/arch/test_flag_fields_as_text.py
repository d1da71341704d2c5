"""``use_sliding_window`` and ``attn_output_gate``/``attention_output_gate`` are true/false flags:
JSON text there is refused in one line, as ``tie_word_embeddings`` is. Read as Python truth,
``"use_sliding_window": "false"`` turned sliding windows on (Qwen3-8B with a 4,096 window and
``max_window_layers`` 10: 40,960 KV bytes per token instead of 147,456) and
``"attn_output_gate": "false"`` added a gate projection to every attention layer (+1.1 GiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.arch.kv import kv_bytes_per_token
from tokenplan.catalog import _PKG, load_model
from tokenplan.errors import ConfigError
from tokenplan.units import Dtype

QWEN3_8B = json.loads((_PKG / "models" / "qwen3-8b.json").read_text(encoding="utf-8"))
WINDOW = {"sliding_window": 4096, "max_window_layers": 10}


def _load(tmp_path: Path, **changes: object):
    folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN3_8B, **changes}), encoding="utf-8")
    return load_model(str(folder))


@pytest.mark.parametrize("key", ["use_sliding_window", "attn_output_gate", "attention_output_gate"])
@pytest.mark.parametrize("bad", ["false", "true", 0, 1])
def test_a_flag_given_as_text_or_a_number_is_refused(tmp_path, key, bad):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, **WINDOW, **{key: bad})
    assert str(info.value).endswith(f"config.json: {key}: {bad!r} is not allowed (allowed: true or false)")


def test_use_sliding_window_false_keeps_every_layer_full(tmp_path):
    # 36 full layers × 8 KV heads × (128 + 128) dims × 2 bytes = 147,456 bytes per token
    spec = _load(tmp_path, **WINDOW, use_sliding_window=False)
    assert (spec.full_attention_layers, spec.sliding_layers) == (36, 0)
    assert kv_bytes_per_token(spec, Dtype.BF16) == 147_456


def test_use_sliding_window_true_slides_past_max_window_layers(tmp_path):
    # the first 10 layers keep full attention: 10 × 4,096 = 40,960 full-attention bytes per token
    spec = _load(tmp_path, **WINDOW, use_sliding_window=True)
    assert (spec.full_attention_layers, spec.sliding_layers) == (10, 26)
    assert kv_bytes_per_token(spec, Dtype.BF16) == 40_960


def test_attn_output_gate_false_adds_no_gate(tmp_path):
    assert _load(tmp_path, attn_output_gate=False).attention.output_gate is False
    assert _load(tmp_path, attn_output_gate=True).attention.output_gate is True
