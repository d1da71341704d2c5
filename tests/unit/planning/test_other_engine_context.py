"""Another engine's launch in a plan passes vLLM's start-up check (one request of
``max_model_len``, by default the model's whole context, must fit one rank's KV cache): a plan
made for SGLang wrote its vLLM command without ``--max-model-len`` where Llama-3.3-70B's
131,072-token context does not fit one RTX PRO 6000's KV cache, and wrote one where vLLM could
not start at all (a helper's check of every plan's vLLM command against ``predict --engine vllm``
with the command's own flags)."""

from __future__ import annotations

import re

from tokenplan import PredictRequest, predict
from tokenplan.api.plan import PlanRequest, plan

# Llama-3.3-70B's KV per token in FP8: 80 layers × 8 KV heads × 128 × (K + V) × 1 B = 163,840 B.
# The default job's longest request: the ISL cap 16,384 + the output cap 32,768 = 49,152 tokens.
LONGEST, WHOLE = 16_384 + 32_768, 131_072


def _option(gpus: str) -> dict:
    return plan(PlanRequest(model="llama-3.3-70b", gpus=(gpus,))).to_json()["options"][0]


def test_the_vllm_command_of_an_sglang_plan_sets_max_model_len_where_the_context_does_not_fit():
    option = _option("1xrtx-pro-6000")
    command = option["launch"]["vllm"]
    assert f"--max-model-len {LONGEST}" in command
    fraction = float(re.search(r"--gpu-memory-utilization (\S+)", command).group(1))
    seqs = int(re.search(r"--max-num-seqs (\d+)", command).group(1))
    # vLLM at the command's own flags: its KV cache holds the job's longest request, not the whole context
    vllm = predict(
        PredictRequest(
            model="llama-3.3-70b",
            gpu="rtx-pro-6000",
            engine="vllm",
            weight_dtype=option["weight_dtype"],
            kv_dtype=option["kv_dtype"],
            memory_fraction=fraction,
            max_running=seqs,
        )
    )
    assert LONGEST <= vllm.kv_capacity_tokens < WHOLE
    assert any(w.startswith("the vLLM launch (in --json) sets --max-model-len 49,152") for w in option["warnings"])


def test_a_vllm_command_that_would_not_start_is_not_written_and_the_plan_says_why():
    option = _option("1xh100-sxm")
    assert "vllm" not in option["launch"] and "sglang" in option["launch"]
    (said,) = [w for w in option["warnings"] if w.startswith("no vLLM command in --json: ")]
    assert "vLLM does not start" in said and f"{WHOLE:,}-token context" in said
