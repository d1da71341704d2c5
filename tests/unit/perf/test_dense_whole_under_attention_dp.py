"""vLLM runs each attention-DP rank at TP 1, so every weight but the routed experts is whole on
each GPU (vllm docs/serving/data_parallel_deployment.md, expert_parallel_deployment.md;
``engines.sharding``); SGLang keeps the dense FFN, shared experts and embedding TP-sharded. A
helper's launch-flag review found the planner sharding them by TP for vLLM too (Llama-4 Maverick
on 8× H100: 49.6 GiB planned, ~60 GiB loaded)."""

from __future__ import annotations

import pytest

from tokenplan.catalog import load_model
from tokenplan.engines.sharding import dense_whole_under_attention_dp
from tokenplan.perf.layout import Layout
from tokenplan.perf.memory import weight_bytes_per_gpu
from tokenplan.units import Dtype


def test_vllm_holds_deepseek_r1s_dense_weights_whole_on_each_rank():
    # DeepSeek-R1 (config.json): 3 dense layers of 3 × 7,168 × 18,432 = 1,189,085,184 parameters,
    # 58 shared experts of 3 × 7,168 × 2,048 = 2,554,331,136, embedding and lm_head
    # 2 × 129,280 × 7,168 = 1,853,358,080 in BF16 (2 B). At TP8 with attention DP, SGLang holds an
    # eighth of them on each GPU and vLLM all of them: the difference is 7/8 of
    # (3,743,416,320 FP8 weights + 1,853,358,080 × 2 B) ≈ 6.07 GiB.
    spec = load_model("deepseek-r1")
    lay = Layout(tp=8, ep=8, attention_dp=True)
    sglang = weight_bytes_per_gpu(spec, lay, Dtype.FP8, dense_whole=False)
    vllm = weight_bytes_per_gpu(spec, lay, Dtype.FP8, dense_whole=True)
    by_hand = 7 / 8 * (3_743_416_320 * Dtype.FP8.bytes_per_element + 1_853_358_080 * 2)
    assert vllm - sglang == pytest.approx(by_hand, rel=1e-6)
    assert by_hand / 2**30 == pytest.approx(6.07, abs=0.01)


def test_without_attention_dp_the_flag_changes_nothing():
    spec = load_model("deepseek-r1")
    lay = Layout(tp=8, ep=8)
    assert weight_bytes_per_gpu(spec, lay, Dtype.FP8, dense_whole=True) == weight_bytes_per_gpu(spec, lay, Dtype.FP8)


def test_only_vllm_holds_them_whole():
    assert dense_whole_under_attention_dp("vllm")
    assert not dense_whole_under_attention_dp("sglang") and not dense_whole_under_attention_dp("trtllm")
