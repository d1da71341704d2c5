"""Whether an engine overlaps the CPU work of step n+1 with the GPU kernels of step n.

All three engines can run a step's CPU side (scheduling, batch bookkeeping, input preparation,
result processing) while the GPU runs the previous step's kernels; a step then takes the longer
of the two instead of their sum (``perf.step.step_time``). Whether they do depends on the engine,
its version and speculative decoding; the rule below is read from each engine's source:

- **SGLang** — the overlap scheduler is on by default (``--disable-overlap-schedule`` turns it
  off). With EAGLE/MTP speculative decoding, ``server_args`` turned it off unless
  ``SGLANG_ENABLE_SPEC_V2`` was set ("Overlap scheduler is disabled because of using eagle3 or
  standalone speculative decoding"; spec v2 = the overlapped EAGLE worker, sgl-project/sglang
  PR #11398, 2025-10, opt-in through the environment variable, default ``EnvBool(False)`` in
  ``srt/environ.py``). Spec v2 became the default in v0.5.13 (``SGLANG_ENABLE_SPEC_V2 =
  EnvBool(True)``; "Spec v2 is enabled by default for eagle/eagle3/standalone speculative
  decoding"; on main by 2026-05-08, sgl-project/sglang PR #24642; spec v1 retired in PR #27964,
  2026-06-11). Before it, speculative runs were synchronous unless the launch exported the
  variable: InferenceX's ``benchmarks/single_node/dsr1_fp8_b200_mtp.sh`` (@285b6628) assigns
  ``SGLANG_ENABLE_SPEC_V2=1`` without ``export``, so the server it starts does not see it.
  Pipeline parallelism turns it off ("Pipeline parallelism is incompatible with overlap
  schedule", ``ServerArgs._handle_pipeline_parallelism``).
- **vLLM** — async scheduling (``--async-scheduling``, vllm-project/vllm PR #19970, 2025-06) is on
  by default from v0.14.0 (PR #27614 in the async-scheduling plan, issue #27679; v0.14.0 released
  2026-01-17), also with EAGLE/MTP speculative decoding (PR #31998, "Enable async scheduling by
  default with spec decoding", in v0.14.0); before 0.14 a default launch runs synchronously.
  Until v0.19.0 a speculative step still read the count of accepted tokens back to the CPU
  (``_get_valid_sampled_token_count`` in ``_update_states``) before preparing the next step, so
  "the prepare CPU work for the current step could only overlap with the draft model's GPU
  execution from the previous step" (vllm-project/vllm PR #29957, refactored as PR #32951
  "Zero-bubble async scheduling + spec decoding", listed in the v0.19.0 release notes): from
  0.14 to 0.18 a speculative step's CPU work hides behind the draft's kernels only
  (:func:`cpu_hidden_behind_draft_only`; ``job.batching.draft_s``).
- **TensorRT-LLM** (PyTorch backend) — ``disable_overlap_scheduler`` defaults to False, and MTP
  keeps the overlap (``SpeculativeDecodingMode.support_overlap_scheduler`` returns True for
  one-model MTP and EAGLE-3, ``tensorrt_llm/_torch/speculative/interface.py`` @b35ac1b6).

A row's ``engine_version`` picks the rule; without one (the planner, a row that does not say)
the current release's default applies. Engines outside the three keep the synchronous step.
"""

from __future__ import annotations

import re

# First release whose default launch overlaps the CPU of speculative steps (SGLang: spec v2 by
# default) and of every step (vLLM: async scheduling by default), as (major, minor, patch).
SGLANG_SPEC_OVERLAP_SINCE = (0, 5, 13)
VLLM_ASYNC_SCHEDULING_SINCE = (0, 14, 0)
# First vLLM release whose speculative steps overlap the CPU with the whole previous step, not
# only its draft (zero-bubble async scheduling, PR #32951, v0.19.0 release notes).
VLLM_SPEC_ZERO_BUBBLE_SINCE = (0, 19, 0)

# A version written as the cell starts (``0.5.9``, ``v0.13``), after a ``v`` that begins a token
# (``lmsysorg/sglang:v0.5.12-cu130``, ``…sgl-dev-v0.5.2-rocm7.0…``), or after the engine's name or an
# image's ``release`` tag (``sglang 0.5.16``, ``rocm/vllm:rocm6.4.1_vllm_0.10.1_…``,
# ``nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2``); a missing patch reads as 0. A ROCm or
# CUDA version elsewhere in an image name (``rocm6.4.1``, ``cu130``) is not the engine's.
_VERSION_AT = (
    re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?"),
    re.compile(r"(?<![A-Za-z0-9])v(\d+)\.(\d+)(?:\.(\d+))?"),
    re.compile(r"(?:(?:vllm|sglang|tensorrt[-_]llm|trtllm)[ _:=-]|release:)v?(\d+)\.(\d+)(?:\.(\d+))?", re.IGNORECASE),
)


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """The engine's ``(major, minor, patch)`` in an engine version or image name, e.g. ``0.5.9`` →
    (0, 5, 9), ``v0.13`` → (0, 13, 0), ``lmsysorg/sglang:v0.5.12-cu130`` → (0, 5, 12),
    ``nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2`` → (1, 1, 0),
    ``rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909`` → (0, 10, 1) (not the ROCm version); None where
    none is written (``nightly-dev``, ``glm5-hopper``, an empty cell): such a build is taken as the
    current release."""
    if not text:
        return None
    for pattern in _VERSION_AT:
        m = pattern.search(text)
        if m is not None:
            return int(m[1]), int(m[2]), int(m[3] or 0)
    return None


def cpu_overlapped(engine: str, version: str | None, speculative: bool, pp: int = 1) -> bool:
    """True where ``engine`` at ``version`` (None = the current release) overlaps a step's CPU
    work with the previous step's GPU kernels, with or without speculative decoding, at ``pp``
    pipeline stages."""
    v = parse_version(version)
    if engine == "sglang":
        return pp == 1 and (not speculative or v is None or v >= SGLANG_SPEC_OVERLAP_SINCE)
    if engine == "vllm":
        return v is None or v >= (VLLM_SPEC_ZERO_BUBBLE_SINCE if speculative else VLLM_ASYNC_SCHEDULING_SINCE)
    return engine == "trtllm"


def cpu_hidden_behind_draft_only(engine: str, version: str | None, speculative: bool) -> bool:
    """True where ``engine`` at ``version`` (None = the current release) overlaps a speculative
    step's CPU work only with the previous step's draft kernels, not its verify step: vLLM from
    0.14 (async scheduling on with speculative decoding) until 0.19 (zero-bubble), see the module
    docstring. :func:`cpu_overlapped` is False there."""
    v = parse_version(version)
    return (
        engine == "vllm"
        and speculative
        and v is not None
        and VLLM_ASYNC_SCHEDULING_SINCE <= v < VLLM_SPEC_ZERO_BUBBLE_SINCE
    )


def hidden_cpu_s(cpu_s: float, gpu_s: float) -> float:
    """CPU seconds of a step that hide behind the previous step's GPU kernels when the engine
    overlaps them: ``min(cpu_s, gpu_s)``, so that the step takes ``max(gpu_s, cpu_s)`` instead of
    ``gpu_s + cpu_s``. E.g. 0.7 ms of scheduling beside 20 ms of kernels: all 0.7 ms hide; 5 ms
    beside 3 ms: 3 ms hide and the step takes 5 ms."""
    return cpu_s if cpu_s < gpu_s else gpu_s
