"""Kimi-K2.5 is released with INT4 routed experts (compressed-tensors, group size 32: ROCm/ATOM
recipes/Kimi-K2.5.md), served as w4a16; our copy of its config.json has no
quantization_config, and a break-it pass found it sized as BF16 (240.8 GiB of weights per B200 at
TP8: no layout fitted on 8× B200, where the release runs)."""

from __future__ import annotations

from tokenplan import PredictRequest, predict

GIB = 2**30


def test_kimi_k25_is_sized_in_its_released_int4_format():
    result = predict(PredictRequest(model="kimi-k2.5", gpu="b200", tp=8, num_gpus=8, weight_dtype="auto"))
    assert result.weight_dtype == "w4a16"
    # By hand from its parameter counts (arch.params): the decoder linears, 1,014.69 B routed + 6.17 B
    # attention + 0.40 B dense FFN + 2.81 B shared = 1,024.06 B at 0.5 + 2.5/128 B (w4a16, units.py),
    # and 1.17 B embedding + 1.17 B lm_head + 0.17 B router at 2 B: 537.06 GB over 8 GPUs = 62.5 GiB.
    hand = (
        (1_014_686_023_680 + 6_168_444_928 + 396_361_728 + 2_807_562_240) * (0.5 + 2.5 / 128)
        + (1_174_405_120 * 2 + 165_150_720) * 2
    ) / 8
    assert hand / GIB > 62.5
    assert hand <= result.weight_bytes_per_gpu < 1.02 * hand  # norms and MLA's small pieces besides
