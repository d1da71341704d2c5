"""A model with no full-attention layer (every layer Mamba-2, or every layer sliding under vLLM)
keeps no KV cache counted in tokens. ``memory``/``predict``/``plan --json`` wrote
``"kv_capacity_tokens": Infinity`` for it, which is not JSON (RFC 8259 has no infinity; ``jq``
and every strict parser refuse it), and ``tokenplan report --plan`` refused the plan tokenplan
itself had written ("kv_capacity_tokens: inf is not allowed"). The capacity is now null, the
tables say why, and the plan reads back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenplan.catalog import _PKG

NEMOTRON = json.loads((_PKG / "models" / "nemotron-3-nano-30b-a3b.json").read_text(encoding="utf-8"))
QWEN3_8B = json.loads((_PKG / "models" / "qwen3-8b.json").read_text(encoding="utf-8"))


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _tokenplan(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # the table's rows unwrapped
    return subprocess.run(
        [sys.executable, "-m", "tokenplan", *args], capture_output=True, text=True, timeout=120, env=env
    )


def _write(tmp_path: Path, name: str, cfg: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return str(path)


@pytest.fixture
def all_mamba(tmp_path: Path) -> str:
    # every attention layer ("*") of the hybrid pattern made a Mamba-2 layer ("M"): no layer keeps KV per token
    pattern = NEMOTRON["hybrid_override_pattern"].replace("*", "M")
    return _write(tmp_path, "all-mamba", {**NEMOTRON, "hybrid_override_pattern": pattern})


@pytest.mark.parametrize("command", ["memory", "predict"])
def test_memory_and_predict_json_of_a_model_without_full_attention_is_strict_json(all_mamba, command):
    done = _tokenplan(command, "--model", all_mamba, "--gpu", "h200", "--json")
    assert done.returncode == 0, done.stderr
    assert _strict(done.stdout)["kv_capacity_tokens"] is None  # type: ignore[index]


def test_the_table_says_why_there_is_no_token_count(all_mamba):
    done = _tokenplan("memory", "--model", all_mamba, "--gpu", "h200")
    assert done.returncode == 0, done.stderr
    assert "inf tokens" not in done.stdout
    assert "none counted (no full-attention layer)" in done.stdout


def test_a_sliding_only_model_under_vllm_is_strict_json(tmp_path):
    # 36 sliding layers of a 4,096-token window: vLLM holds each request's window, no full-attention token
    cfg = {**QWEN3_8B, "layer_types": ["sliding_attention"] * 36, "sliding_window": 4096}
    done = _tokenplan(
        "predict", "--model", _write(tmp_path, "sliding", cfg), "--gpu", "h200", "--engine", "vllm", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert _strict(done.stdout)["kv_capacity_tokens"] is None  # type: ignore[index]


def test_report_reads_back_the_plan_of_such_a_model(tmp_path, all_mamba):
    plan = _tokenplan("plan", "--model", all_mamba, "--gpu", "1xh200", "--json")
    assert plan.returncode == 0, plan.stderr
    _strict(plan.stdout)
    (tmp_path / "plan.json").write_text(plan.stdout, encoding="utf-8")
    done = _tokenplan("report", "--plan", str(tmp_path / "plan.json"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.html").stat().st_size > 0


def test_a_model_with_full_attention_still_counts_its_tokens():
    # Qwen3-8B on an H100 SXM: the pool over 147,456 B per token (36 layers × 8 heads × 128 × 2 × 2 B)
    done = _tokenplan("memory", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--json")
    m = _strict(done.stdout)
    assert m["kv_capacity_tokens"] == m["kv_pool_bytes"] // 147_456  # whole tokens  # type: ignore[index]
