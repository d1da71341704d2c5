"""A model whose repository ships its own code (Kimi-K2.5's tokenizer is ``tokenization_kimi.py``)
gets each engine's flag to run it; the launch commands had none, and neither engine would load the
tokenizer (a break-it pass). Flag names from the engines' CLIs: SGLang and vLLM
``--trust-remote-code``, trtllm-serve ``--trust_remote_code`` (its click option)."""

from __future__ import annotations

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.catalog import launch_info

FLAGS = {"sglang": "--trust-remote-code", "vllm": "--trust-remote-code", "trtllm": "--trust_remote_code"}


def _launch(model: str) -> dict[str, str]:
    return plan(PlanRequest(model=model, gpus=("8xb200",))).to_json()["options"][0]["launch"]


def test_a_repository_with_its_own_code_is_launched_with_each_engines_flag():
    assert launch_info("kimi-k2.5", "kimi-k2.5")[2] is True
    commands = _launch("kimi-k2.5")
    assert commands and all(FLAGS[engine] in command for engine, command in commands.items())


def test_a_model_the_engines_read_natively_gets_no_flag():
    assert launch_info("qwen3.6-27b", "qwen3.6-27b")[2] is False
    assert not any("trust" in command for command in _launch("qwen3.6-27b").values())
