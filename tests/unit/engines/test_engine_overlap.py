"""Which engine × version × speculative decoding overlaps the CPU of a step with the previous
step's kernels (``tokenplan.engines.overlap``), against the engines' own sources as the module
docstring cites them."""

from __future__ import annotations

import pytest

from tokenplan.engines.overlap import cpu_hidden_behind_draft_only, cpu_overlapped, hidden_cpu_s, parse_version


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("lmsysorg/sglang:v0.5.12-cu130", (0, 5, 12)),
        ("rocm/7.0:rocm7.0_ubuntu_22.04_sgl-dev-v0.5.2-rocm7.0-mi30x-20250915", (0, 5, 2)),
        ("nvcr.io#nvidia/tensorrt-llm/release:1.1.0rc2.post2", (1, 1, 0)),
        ("vllm/vllm-openai-rocm:v0.21.0", (0, 21, 0)),
        ("sglang 0.5.16", (0, 5, 16)),
        ("0.11.2", (0, 11, 2)),
        # the engine's version, not the ROCm version an image name starts with (vllm 0.10.1, not 6.4.1)
        ("rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909", (0, 10, 1)),
        # a missing patch reads as 0: 0.13 and v0.13.0 are one release
        ("0.13", (0, 13, 0)),
        ("v0.13.0", (0, 13, 0)),
        ("glm5-hopper", None),
        ("nightly-dev-20260216-d3bae71e", None),
        ("", None),
        (None, None),
    ],
)
def test_versions_are_read_from_the_image_names_the_rows_state(text, version):
    assert parse_version(text) == version


@pytest.mark.parametrize(
    ("engine", "version", "speculative", "overlapped"),
    [
        # SGLang: the overlap scheduler is on by default; EAGLE/MTP ran spec v1 (synchronous)
        # until spec v2 became the default in v0.5.13.
        ("sglang", "lmsysorg/sglang:v0.5.5-cu129-amd64", False, True),
        ("sglang", "lmsysorg/sglang:v0.5.8-cu130-amd64", True, False),
        ("sglang", "lmsysorg/sglang:v0.5.12-cu130", True, False),
        ("sglang", "sglang 0.5.15", True, True),
        ("sglang", "lmsysorg/sglang-rocm:v0.5.19-rocm720-mi35x-20260913", True, True),
        ("sglang", None, True, True),  # the current release
        # vLLM: async scheduling by default from 0.14.0, speculative or not.
        ("vllm", "0.12.0", False, False),
        ("vllm", "vllm 0.11.0", False, False),
        ("vllm", "0.15.1", False, True),
        ("vllm", "vllm/vllm-openai-rocm:v0.21.0", True, True),
        ("vllm", None, False, True),
        ("vllm", None, True, True),
        # vLLM 0.14–0.18 with speculative decoding: the CPU hides only behind the draft (the
        # accepted-token count was read back first, vllm PR #29957 / #32951 in v0.19.0), so the
        # verify step itself does not overlap.
        ("vllm", "vllm 0.18.0", True, False),
        ("vllm", "vllm 0.18.0", False, True),
        ("vllm", "0.19.0", True, True),
        # TensorRT-LLM: overlap scheduler on by default, MTP keeps it.
        ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2", True, True),
        ("trtllm", None, False, True),
        # An engine outside the three keeps the synchronous step.
        ("atom", "rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.1", False, False),
    ],
)
def test_the_rule_per_engine_version_and_speculative_decoding(engine, version, speculative, overlapped):
    assert cpu_overlapped(engine, version, speculative) is overlapped


@pytest.mark.parametrize(
    ("engine", "version", "speculative", "draft_only"),
    [
        ("vllm", "vllm 0.18.0", True, True),  # the Google Cloud B200 run's release
        ("vllm", "0.14.0", True, True),  # async scheduling with spec decoding on by default
        ("vllm", "0.13.0", True, False),  # synchronous: nothing hides
        ("vllm", "0.19.0", True, False),  # zero-bubble: the whole step hides
        ("vllm", None, True, False),  # the current release
        ("vllm", "vllm 0.18.0", False, False),  # no draft
        ("sglang", "sglang 0.5.9", True, False),
        ("trtllm", None, True, False),
    ],
)
def test_vllm_before_zero_bubble_hides_a_speculative_steps_cpu_behind_the_draft_only(
    engine, version, speculative, draft_only
):
    assert cpu_hidden_behind_draft_only(engine, version, speculative) is draft_only


def test_sglang_pipeline_parallelism_runs_synchronously():
    # ServerArgs._handle_pipeline_parallelism: pp_size > 1 turns the overlap scheduler off.
    assert cpu_overlapped("sglang", "sglang 0.5.16", False, pp=1) is True
    assert cpu_overlapped("sglang", "sglang 0.5.16", False, pp=2) is False


def test_the_hidden_cpu_time_is_the_shorter_of_cpu_and_gpu():
    # 0.7 ms of scheduling beside 20 ms of kernels hides whole; 5 ms beside 3 ms hides 3 ms
    # (the step then takes 3 + 5 − 3 = 5 ms = max).
    assert hidden_cpu_s(0.7e-3, 20e-3) == 0.7e-3
    assert hidden_cpu_s(5e-3, 3e-3) == 3e-3
