"""The reasoning-parser names the launch writes for SGLang and TensorRT-LLM are ones the engines
register (a launch-flag review: SGLang's argparse takes ``--reasoning-parser`` choices from
``ReasoningParser.DetectorMap``, whose Nemotron-3 key is "nemotron_3", so "nano_v3" refused to
start; TensorRT-LLM's minimax_m2 and nano-v3 parsers were not written)."""

from __future__ import annotations

from tokenplan.catalog import launch_info, model_names

# sgl-project/sglang python/sglang/srt/parser/reasoning_parser.py, ReasoningParser.DetectorMap keys
# (the ones the catalog uses among them)
SGLANG_DETECTORS = {"deepseek-r1", "qwen3", "kimi_k2", "minimax", "nemotron_3", "gpt-oss", "glm45"}
# NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/reasoning_parser.py, @register_reasoning_parser names
TRTLLM_PARSERS = {"deepseek-r1", "qwen3", "qwen3_5", "minimax_m2", "nano-v3"}


def test_every_sglang_and_trtllm_parser_the_catalog_names_is_registered():
    for name in model_names():
        _, parsers, _ = launch_info(name, name)
        if isinstance(parsers, dict):
            assert parsers.get("sglang") in SGLANG_DETECTORS | {None}, name
            assert parsers.get("trtllm") in TRTLLM_PARSERS | {None}, name


def test_nemotron_and_minimax_get_their_trtllm_parsers():
    assert launch_info("nemotron-3-nano-30b-a3b", "nemotron-3-nano-30b-a3b")[1]["trtllm"] == "nano-v3"
    assert launch_info("minimax-m2.5", "minimax-m2.5")[1]["trtllm"] == "minimax_m2"
