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
