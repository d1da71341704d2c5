"""What ``generate`` takes from a plan file and a ``generation_config.json`` is held to the bounds
of its own options (issue 26): an output cap from 1 to 2^24 tokens, Hugging Face's sampling values
in range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.errors import ConfigError
from tokenplan.files.plan_hint import plan_max_tokens
from tokenplan.runner.defaults import read_generation_config


def test_the_plan_cap_bound_is_two_to_the_24_tokens_inclusive() -> None:
    assert plan_max_tokens({"job": {"osl_cap_tokens": 16_777_216}}) == 16_777_216  # 2^24
    with pytest.raises(ConfigError, match=r"^p.json: job.osl_cap_tokens: 16777217 is not allowed"):
        plan_max_tokens({"job": {"osl_cap_tokens": 16_777_217}}, "p.json")


@pytest.mark.parametrize("cap", [0, 0.5, float("nan"), "32768", True])
def test_a_plan_cap_that_is_not_a_count_of_tokens_is_refused(cap) -> None:
    with pytest.raises(
        ConfigError,
        match=r"job.osl_cap_tokens: .* is not allowed \(allowed: an output cap of 1 to "
        r"16,777,216 tokens, as --max-tokens\)",
    ):
        plan_max_tokens({"job": {"osl_cap_tokens": cap}}, "p.json")


def test_a_plan_cap_in_the_osl_text_is_held_to_the_same_bound() -> None:
    with pytest.raises(ConfigError, match=r"job.osl: 99999999999 is not allowed"):
        plan_max_tokens({"job": {"osl": "lognormal mean 2,500, σ 1, cap 99,999,999,999"}}, "p.json")


def _config(tmp_path: Path, body: dict | str) -> Path:
    (tmp_path / "generation_config.json").write_text(body if isinstance(body, str) else json.dumps(body))
    return tmp_path


def test_top_k_0_is_hugging_faces_no_top_k_and_is_not_sent(tmp_path) -> None:
    # transformers adds no top-k warper for top_k 0; engines refuse 0 (SGLang: -1 or ≥ 1)
    assert read_generation_config(_config(tmp_path, {"temperature": 0.6, "top_k": 0})) == {"temperature": 0.6}


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"top_p": 0}, "top_p"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": 101}, "temperature"),
        ({"top_k": 2**31}, "top_k"),
        ({"top_k": True}, "top_k"),
        ('{"temperature": Infinity}', "temperature"),
    ],
    ids=[
        "top_p_0",
        "temperature_negative",
        "temperature_above_100",
        "top_k_past_int32",
        "top_k_bool",
        "temperature_inf",
    ],
)
def test_sampling_values_outside_what_generate_allows_are_refused_by_key(tmp_path, body, key) -> None:
    with pytest.raises(ConfigError, match=rf"generation_config.json: {key}: .* is not allowed \(allowed: "):
        read_generation_config(_config(tmp_path, body))


def test_a_generation_config_with_a_key_twice_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="key 'temperature': given twice in one object"):
        read_generation_config(_config(tmp_path, '{"temperature": 0.6, "temperature": 1.0}'))
