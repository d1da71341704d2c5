"""The rotated dimensions of a head (``ModelSpec.rotary_dim``, ``arch.hf_fields.rotary_dim``), which
size the RoPE cos/sin table the engines build while they load a model (``perf.memory.rope_table_bytes``),
read from each catalog config as vLLM's ``get_rope`` reads it: ``int(head_size × partial_rotary_factor)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.catalog import _PKG, load_model
from tokenplan.errors import ConfigError
from tokenplan.perf.memory import rope_table_bytes

QWEN3_8B = json.loads((_PKG / "models" / "qwen3-8b.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name, rotary_dim, table_bytes",
    [
        # head_dim 128, no partial factor: all 128; 40,960 positions × 128 × 2 B = 10,485,760
        ("qwen3-8b", 128, 10_485_760),
        # head_dim 256 × rope_parameters.partial_rotary_factor 0.25 = 64 (inside text_config);
        # 262,144 × 64 × 2 B = 33,554,432
        ("qwen3.5-35b-a3b", 64, 33_554_432),
        # top-level partial_rotary_factor 0.25 × head_dim 256 = 64
        ("qwen3-next-80b-a3b", 64, 33_554_432),
        # the config's own rotary_dim: 64 of head_dim 128; 196,608 × 64 × 2 B = 25,165,824
        ("minimax-m2.5", 64, 25_165_824),
        # MLA: the decoupled RoPE key, qk_rope_head_dim 64; 163,840 × 64 × 2 B = 20,971,520
        ("deepseek-r1", 64, 20_971_520),
        # Nemotron-H's attention has no positional encoding, though its config says
        # partial_rotary_factor 1.0: no table
        ("nemotron-3-nano-30b-a3b", 0, 0),
    ],
)
def test_each_catalog_model_reads_its_rotated_dimensions(name: str, rotary_dim: int, table_bytes: int) -> None:
    spec = load_model(name)
    assert spec.rotary_dim == rotary_dim
    assert rope_table_bytes(spec) == table_bytes


def _load(tmp_path: Path, **changes: object):
    folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"  # a folder each: models load once per path
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN3_8B, **changes}), encoding="utf-8")
    return load_model(str(folder))


def test_a_partial_factor_in_rope_scaling_counts_and_one_out_of_range_is_refused(tmp_path: Path) -> None:
    # rope_scaling {"partial_rotary_factor": 0.5} × head_dim 128 = 64
    assert _load(tmp_path, rope_scaling={"rope_type": "default", "partial_rotary_factor": 0.5}).rotary_dim == 64
    for bad in (0, 1.5, "half", True):
        with pytest.raises(ConfigError, match=r"partial_rotary_factor: .* \(allowed: a number in \(0, 1\]"):
            _load(tmp_path, partial_rotary_factor=bad)
    with pytest.raises(ConfigError, match="rotary_dim"):
        _load(tmp_path, rotary_dim=512)  # more than the head's 128 dimensions
