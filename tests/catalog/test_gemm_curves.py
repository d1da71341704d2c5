"""catalog/gemm_curves.json: which GPUs have measured GEMM curves, that the curves are sane,
and that their source is named (tools/gemm_curves.py regenerates the file)."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from tokenplan.catalog import load_gpu


def test_tabled_gpus_carry_their_curves_and_amd_falls_back():
    assert {c.fmt for c in load_gpu("b200").gemm_curves} == {"bf16", "fp8_block", "fp8_tensor", "fp4"}
    assert {c.fmt for c in load_gpu("h200_sxm").gemm_curves} == {"bf16", "fp8_block", "fp8_tensor"}  # no FP4 on Hopper
    for key in ("mi300x", "mi355x", "h20", "rtx-5090"):  # no aiconfigurator GEMM table
        assert load_gpu(key).gemm_curves == ()


@pytest.mark.parametrize(
    "key", ["h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "rtx-pro-6000", "a100-80gb", "l40s"]
)
def test_curves_are_increasing_in_rows_and_fractions_of_peak(key):
    for c in load_gpu(key).gemm_curves:
        assert all(a < b for a, b in zip(c.rows, c.rows[1:])), (key, c.fmt)
        assert all(0 < f <= 1 for f in c.fraction), (key, c.fmt)


def test_one_row_is_the_weight_read_at_ninety_percent_of_hbm():
    # The reduction takes the fixed latency off t(1), leaving the read at 0.9 × datasheet HBM:
    # 2·N·K FLOPs over N·K·2 B / (0.9 × 8e12 B/s) → 7.2e12 FLOP/s = 7.2e12 / 2.25e15 = 0.0032 of
    # B200's BF16 peak (the file keeps three decimals).
    b200 = load_gpu("b200").gemm_curve("bf16")
    assert b200 is not None and b200.rows[0] == 1
    assert b200.fraction[0] == pytest.approx(0.0032, abs=5e-4)


def test_the_file_names_its_source():
    data = json.loads((resources.files("tokenplan.catalog") / "gemm_curves.json").read_text(encoding="utf-8"))
    src = data["source"]
    assert src["repository"] == "https://github.com/ai-dynamo/aiconfigurator"
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["license"] == "Apache-2.0"
    assert all(p.endswith("/gemm_perf.parquet") for p in src["tables"]) and "tools/gemm_curves.py" in src["reduction"]


def test_each_curve_keeps_the_ridge_of_the_gpu_measured():
    # 2·M·N·K / F = N·K·b / B → M* = F·b / (2·B). B200 BF16: 2.25e15 × 2 / (2 × 8e12) = 281.25
    # rows; B200 NVFP4: 9e15 × 0.5625 / 1.6e13 = 316.41; H200 BF16: 9.894e14 × 2 / (2 × 4.8e12)
    # = 206.125 rows.
    assert load_gpu("b200").gemm_curve("bf16").ridge_rows == pytest.approx(281.25)
    assert load_gpu("b200").gemm_curve("fp4").ridge_rows == pytest.approx(316.40625)
    assert load_gpu("h200").gemm_curve("bf16").ridge_rows == pytest.approx(206.125)


@pytest.mark.parametrize(
    "key", ["h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "rtx-pro-6000", "a100-80gb", "l40s"]
)
def test_every_curve_has_four_size_bands_on_its_rows(key):
    # Band centres: geometric means of the edges 2^20, 2^22, 2^24, 2^26, 2^28 + 1 → 2^21 … 2^27.
    for c in load_gpu(key).gemm_curves:
        assert c.weight_elements == pytest.approx((2.0**21, 2.0**23, 2.0**25, 2.0**27), rel=1e-6), (key, c.fmt)
        assert len(c.fraction_by_size) == 4 and all(len(f) == len(c.rows) for f in c.fraction_by_size)
        assert all(0 < v <= 1 for f in c.fraction_by_size for v in f), (key, c.fmt)
