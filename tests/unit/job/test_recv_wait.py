"""SGLang's ``--scheduler-recv-interval`` R in TTFT: a request waits for the next receive of new
requests, R/2 decode steps on average instead of the half step of R = 1.

Source: sgl-project/sglang ``python/sglang/srt/managers/scheduler_recv_skipper.py`` @ 70310f05:
``SchedulerRecvSkipper.handle`` adds 1 per DECODE / TARGET_VERIFY iteration (1,000 per other) and
receives when the counter reaches R, so between two prefills new requests are received every R
decode iterations; a request arriving at a uniform time waits R·step/2. InferenceX's DeepSeek-R1
and Qwen3.5 B200 scripts pass R = 30 at concurrency ≥ 16 (``benchmarks/single_node/dsr1_fp8_b200.sh``).
"""

from __future__ import annotations

import pytest

from tokenplan.api.resolve import PredictRequest, resolve

BASE = {
    "model": "deepseek-r1",
    "gpu": "b200",
    "num_gpus": 8,
    "tp": 8,
    "weight_dtype": "fp8",
    "concurrency": 64,
    "isl": 1024,
    "osl": 1024,
}


@pytest.mark.parametrize("interval", [10, 30])
def test_the_wait_for_the_next_receive_is_r_half_decode_steps(interval):
    one = resolve(PredictRequest(**BASE)).evaluate()
    r = resolve(PredictRequest(**BASE, scheduler_recv_interval=interval)).evaluate()
    step = one.steady.decode_step.total_s
    # only the wait moves: (R − 1)/2 more decode steps (R = 30: 14.5 steps), nothing else
    assert r.steady.ttft_s - one.steady.ttft_s == pytest.approx((interval - 1) / 2 * step, rel=1e-9)
    assert r.steady.decode_step == one.steady.decode_step
    assert (r.steady.tpot_s, r.steady.output_tok_s) == (one.steady.tpot_s, one.steady.output_tok_s)
