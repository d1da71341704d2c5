"""The default plan's recommended launch allocates (issue 10): read the SGLang flags it prints and
check, with the engine's own accounting, that the memory they ask for fits the GPU.

SGLang with ``--disable-radix-cache --max-running-requests R`` and speculative decoding
(``model_runner_kv_cache_mixin.handle_max_mamba_cache``, ``memory_pool.MambaPool``; engine-facts
S3, S18) takes, per DP replica of one GPU, ``R`` state slots and ``R × speculative_num_draft_tokens``
intermediate states out of ``mem_fraction_static × GPU − weights``; the KV cache gets the rest,
and each tensor has one padded row more.
"""

from __future__ import annotations

import re

import pytest

from tokenplan.api.plan import PlanRequest, plan

# Qwen3.6-27B state per request (catalog/models/qwen3.6-27b.json, fp32 SSM, bf16 conv):
# 48 GDN layers · (48·128·128·4 + (2·16·128 + 48·128)·3·2) = 48·3,207,168 = 153,944,064 B.
STATE_BYTES = 153_944_064
# KV per token at FP8: 16 full-attention layers · 4 KV heads · (256 + 256) · 1 B = 32,768 B.
KV_FP8_BYTES_PER_TOKEN = 32_768


@pytest.fixture(scope="module")
def default_plan() -> dict:
    return plan(PlanRequest()).to_json()


def _flag(command: str, name: str, default: float | None = None) -> float:
    match = re.search(rf"--{name} (\S+)", command)
    if match is None and default is not None:
        return default
    assert match, f"--{name} missing from the launch command"
    return float(match.group(1))


def test_default_plan_launch_flags_allocate_on_every_option(default_plan):
    launched = [o for o in default_plan["options"] if "launch" in o]
    assert launched
    for option in launched:
        cmd = option["launch"]["sglang"]
        assert "--disable-radix-cache" in cmd  # one state slot per running request
        running = _flag(cmd, "max-running-requests")
        draft = _flag(cmd, "speculative-num-draft-tokens", default=0)  # no speculative decoding: 0
        fraction = _flag(cmd, "mem-fraction-static")
        budget = option["gpu_bytes"] * fraction - option["weight_bytes_per_gpu"]
        state = running * (1 + draft) * STATE_BYTES
        kv = budget - state
        assert kv > 0, f"{option['option']}: the state of {running:.0f} requests needs {state / 2**30:.1f} GiB"
        # The KV left holds every running request's prompt (the default job's ISL mean 1,024):
        assert kv / KV_FP8_BYTES_PER_TOKEN >= running * 1024
        # Every term together (with the padded rows, 1 + draft states) stays below the GPU's memory.
        terms = option["memory_allocation"]
        assert sum(v for k, v in terms.items() if k != "reserve") < option["gpu_bytes"]
        assert terms.get("spec_state", 0) == pytest.approx((running + 1) * draft * STATE_BYTES, rel=1e-12)
        assert terms["reserve"] > 0


def test_a_413_request_b200_launch_would_not_allocate():
    # The launch the plan printed before issue 10 on B200 (mem-fraction-static 0.780, weights
    # 29,862,789,120 B, tests/unit/perf/test_memory.py): 413 · 5 · 153,944,064 = 317.9 GB of state
    # against 0.780 · 192,265,846,784 − 29,862,789,120 = 120.1 GB.
    budget = 0.780 * 192_265_846_784 - 29_862_789_120
    assert 413 * 5 * STATE_BYTES > budget


def test_memory_lists_every_term_at_an_explicit_launch():
    # tokenplan memory --model qwen3.6-27b --gpu b200 --weight-dtype fp8 --kv-dtype fp8 --spec mtp:3
    #   --max-running 128 --disable-radix-cache: the terms tests/unit/perf/test_memory.py derives by
    # hand (KV 19,520,121,970.24 B, state 129·153,944,064 B, speculative state 4·129·153,944,064 B).
    from tokenplan.api.memory import memory
    from tokenplan.api.resolve import PredictRequest

    req = PredictRequest(
        model="qwen3.6-27b",
        gpu="b200",
        weight_dtype="fp8",
        kv_dtype="fp8",
        spec="mtp:3",
        max_running=128,
        disable_radix_cache=True,
    )
    m = memory(req).to_json()
    assert m["running_requests"] == 128
    # The explicit cap binds (the state pool is sized for it), and SGLang counts a running
    # request at ISL + half its output: 1,024 + 1,024/2 = 1,536 tokens (the defaults).
    assert m["running_limited_by"] == "running cap"  # the launch's cap, not the engine's default
    assert m["running_context_tokens"] == 1536
    assert set(m["allocation"]) == {"weights", "kv_cache", "draft_kv", "state", "spec_state", "reserve"}
    assert m["allocation"]["kv_cache"] == pytest.approx(19_520_121_970.24, abs=0.01)
    assert m["allocation"]["state"] == 129 * STATE_BYTES
    assert m["allocation"]["spec_state"] == 4 * 129 * STATE_BYTES
    assert sum(m["allocation"].values()) == pytest.approx(m["gpu_bytes"], rel=1e-12)


def test_an_explicit_launch_that_cannot_allocate_is_refused_with_its_terms():
    # 413 requests × 5 states × 153,944,064 B = 317.9 GB against a 118.1 GB pool budget.
    from dataclasses import replace

    from tokenplan.api.memory import memory
    from tokenplan.api.resolve import PredictRequest

    req = PredictRequest(
        model="qwen3.6-27b",
        gpu="b200",
        weight_dtype="fp8",
        kv_dtype="fp8",
        spec="mtp:3",
        max_running=128,
        disable_radix_cache=True,
    )
    rejected = memory(replace(req, max_running=413)).to_json()["rejected"]
    assert rejected.startswith("cannot allocate 413 running requests")
    assert "speculative state per GPU" in rejected and "overrun the GPU by" in rejected
    assert not re.search(r"-\d", rejected)  # no negative figure
    assert rejected.endswith("(the running cap 413 is fixed: try a lower --max-running)")


def test_the_batch_limit_names_the_state_where_one_pool_holds_it():
    # Qwen3.6-27B on one B200, the radix cache off and the running cap raised: one pool holds each
    # request's KV and its Gated DeltaNet state (153.9 MB, more than its KV), so the limit says
    # both. Llama-3.1-8B has no recurrent state: the KV cache alone.
    hybrid = plan(PlanRequest(gpus=("1xb200",), specs=("none",))).to_json()["options"][0]
    assert hybrid["batch_limit_reason"] == "kv cache and state"
    dense = plan(PlanRequest(model="llama-3.1-8b", gpus=("1xb200",), specs=("none",))).to_json()["options"][0]
    assert dense["batch_limit_reason"] in ("kv cache", "engine cap", "launch cap for the p90 context")
    assert "state" not in dense["batch_limit_reason"]


def test_the_radix_cache_line_compares_the_same_speculative_setting():
    # The default plan's 8× B200 leader decodes without MTP. The line on --disable-radix-cache
    # sets it against the best cache-on configuration *without MTP* too: there SGLang's running
    # cap is not the 48 it defaults to with speculative decoding (engine-facts), so the state
    # slots (4–5 per request with the cache on) bind, not the engine cap.
    answer = plan(PlanRequest(gpus=("8xb200",))).to_json()["answer"]
    line = next(a for a in answer if a.startswith("--disable-radix-cache on 8× b200"))
    assert "capped by state slots" in line and "capped by engine cap" not in line
    # the cache-on configuration is named: its layout is not the leader's TP1×DP8
    assert "with the prefix cache on (TP2×DP4, fp8 weights, fp8 KV: batch 162/replica" in line
