"""A configuration rejected because no request fits the KV cache names the tokens a running
request holds as the engine admits it, not the mean prompt + answer: TensorRT-LLM reserves the
prompt and the whole max_tokens, so "no sequence of 3,524 tokens fits the KV cache (18,858
tokens)" contradicted itself."""

from __future__ import annotations

import re

from tokenplan.api.predict import predict
from tokenplan.api.resolve import PredictRequest
from tokenplan.job.results import Rejected


def test_trtllm_rejection_names_prompt_plus_max_tokens():
    # Llama-3.3-70B in BF16 (~131 GiB) on one H200 leaves TRT-LLM a KV pool of under 20 K tokens;
    # fixed lengths, 1,024-token prompts, 2,500-token answers, max_tokens 32,768: GUARANTEED_NO_EVICT
    # reserves 1,024 + 32,768 = 33,792 tokens per request at admission.
    got = predict(
        PredictRequest(
            model="llama-3.3-70b", gpu="h200", engine="trtllm", weight_dtype="bf16", isl=1024, osl=2500, osl_cap=32768
        )
    )
    assert isinstance(got, Rejected)
    m = re.fullmatch(
        r"no sequence of ([\d,]+) tokens \(prompt \+ max_tokens, reserved at admission\) fits the KV cache "
        r"\(([\d,]+) tokens\)",
        got.rejected,
    )
    assert m is not None, got.rejected
    held, capacity = (float(g.replace(",", "")) for g in m.groups())
    assert held == 33_792
    assert held > capacity  # the message's own numbers agree with the rejection


def test_a_state_pool_without_a_slot_for_one_request_is_named_not_the_kv_cache():
    # Qwen3.6-27B (hybrid) in BF16 on one H100 per replica with SGLang and MTP k=1, the vision
    # encoder kept (vision_cut 1.0, as a plan sweep evaluates it): SGLang's state pool holds under
    # 4 slots and a speculating request takes 4 (catalog/engines.yaml slots_per_request_spec), so no
    # request runs; the KV cache holds more than one request's context, so the message said
    # "no sequence of 3,511 tokens fits the KV cache (5,143 tokens)" of a state-slot limit.
    from tokenplan.catalog import load_engine, load_gpu, load_model, shipped_efficiency
    from tokenplan.job.evaluate import Rejection, evaluate
    from tokenplan.job.workload import LengthDist
    from tokenplan.perf.speculative import parse_spec
    from tokenplan.planning.space import HardwareOption, candidates

    model, gpu, engine = load_model("qwen3.6-27b"), load_gpu("h100-sxm"), load_engine("sglang")
    eff = shipped_efficiency().resolve(engine.name, gpu.architecture)
    isl, osl = LengthDist(1024, 0.8, 16384), LengthDist(2500, 1.0, 32768)
    (config,) = [
        c
        for c in candidates(model, HardwareOption(gpu, 1, None), engine, [parse_spec("mtp:1")], None, None, 1.0)
        if (c.weight_dtype.value, c.kv_dtype.value) == ("bf16", "fp8") and not c.max_running.lifted
    ]
    got = evaluate(model, gpu, config, eff, isl, osl, None)
    assert isinstance(got, Rejection)
    assert "KV cache" not in got.reason
    m = re.fullmatch(
        r"no request fits the linear-attention state pool \(([\d.]+) slots; a running request takes 4\)", got.reason
    )
    assert m is not None, got.reason
    assert float(m[1]) < 4
