"""The measured GEMM curve: interpolation in log rows, the ridge, the format it runs on, and
the fallback saturating form — each against hand arithmetic."""

from __future__ import annotations

import math

import pytest

from tokenplan.hardware import GemmCurve
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.gemm import curve_for, gemm_fraction_at
from tokenplan.units import Dtype

CURVE = GemmCurve("bf16", rows=(1.0, 16.0, 256.0), fraction=(0.01, 0.2, 0.6), bytes_per_weight=2.0)


def test_the_curve_is_linear_in_log_rows_between_points():
    # 4 rows: log 4 / log 16 = 0.5 of the way from 1 to 16 → 0.01 + 0.5 × 0.19 = 0.105.
    assert CURVE.at(4.0) == pytest.approx(0.105)
    # 64 rows: log(64/16) / log(256/16) = 2/4 = 0.5 → 0.2 + 0.5 × 0.4 = 0.4.
    assert CURVE.at(64.0) == pytest.approx(0.4)
    # 32 rows: log 2 / log 16 = 0.25 → 0.2 + 0.25 × 0.4 = 0.3.
    assert CURVE.at(32.0) == pytest.approx(0.3)
    assert CURVE.at(16.0) == pytest.approx(0.2)  # on a measured point


def test_the_curve_is_held_at_its_end_points():
    assert CURVE.at(0.25) == pytest.approx(0.01)  # fewer than one row counts as one
    assert CURVE.at(1e6) == pytest.approx(0.6)


# Two weight-size bands at 2^20 and 2^24 elements; the all-shapes curve is CURVE's.
SIZED = GemmCurve(
    "fp8_block",
    rows=(1.0, 16.0, 256.0),
    fraction=(0.01, 0.2, 0.6),
    bytes_per_weight=1.0,
    weight_elements=(2.0**20, 2.0**24),
    fraction_by_size=((0.01, 0.1, 0.3), (0.01, 0.3, 0.7)),
)


def test_a_sized_curve_is_bilinear_in_log_rows_and_log_weight_size():
    # 64 rows: half-way (in log M) from 16 to 256 → small band 0.1 + 0.5 × 0.2 = 0.2,
    # large band 0.3 + 0.5 × 0.4 = 0.5.
    assert SIZED.at(64.0, 2.0**20) == pytest.approx(0.2)
    assert SIZED.at(64.0, 2.0**24) == pytest.approx(0.5)
    # 2^22 elements: log(2^22/2^20) / log(2^24/2^20) = 2/4 = 0.5 → 0.2 + 0.5 × 0.3 = 0.35.
    assert SIZED.at(64.0, 2.0**22) == pytest.approx(0.35)
    # 2^21: 1/4 of the way → 0.2 + 0.25 × 0.3 = 0.275.
    assert SIZED.at(64.0, 2.0**21) == pytest.approx(0.275)
    # Outside the bands the end bands hold: 2^10 → 0.2, 2^30 → 0.5.
    assert SIZED.at(64.0, 2.0**10) == pytest.approx(0.2)
    assert SIZED.at(64.0, 2.0**30) == pytest.approx(0.5)
    # No size: the all-shapes curve (0.4 at 64 rows, as above).
    assert SIZED.at(64.0) == pytest.approx(0.4)


def test_the_fraction_reads_the_weight_size_and_zero_means_unknown():
    # SIZED is an FP8 block-scaled curve, CURVE a BF16 one: each takes its own format's factor
    eff = Efficiency(gemm_kernel_factor=0.5, fp8_kernel_factor=0.5)
    # 64 rows at 2^22 elements: 0.35 × 0.5 = 0.175.
    assert gemm_fraction_at(SIZED, eff, 64.0, lowprec=True, weight_elements=2.0**22) == pytest.approx(0.175)
    # weight_elements 0 (a family the model lacks) reads the all-shapes curve: 0.4 × 0.5.
    assert gemm_fraction_at(SIZED, eff, 64.0, lowprec=True, weight_elements=0.0) == pytest.approx(0.2)
    # A curve without size bands ignores the size: CURVE at 64 rows 0.4 × 0.5.
    assert gemm_fraction_at(CURVE, eff, 64.0, lowprec=False, weight_elements=2.0**22) == pytest.approx(0.2)


def test_the_shipped_fp8_curve_on_b200_rises_with_weight_size():
    """The reduction of aiconfigurator's tables (catalog/gemm_curves.json): on B200 at M = 8,192
    an FP8 block-scaled GEMM of a few M elements runs well below one of ~100 M (module
    docstring of tools/gemm_curves.py: ~0.4 against ~0.65), and the all-shapes median lies
    between the smallest and the largest band."""
    from tokenplan.catalog import load_gpu

    curve = load_gpu("b200").gemm_curve("fp8_block")
    small, large = curve.at(8192.0, 2.0**21), curve.at(8192.0, 2.0**27)
    assert small < 0.5 < 0.6 < large
    assert small < curve.at(8192.0) < large


def test_the_fraction_is_the_curve_times_the_engine_factor_no_lower_than_the_ridge():
    eff = Efficiency(gemm_kernel_factor=0.5, lowprec_fraction=0.2)
    # 64 rows, ridge 16: curve 0.4 × 0.5 = 0.2; lowprec_fraction does not apply to a curve.
    assert gemm_fraction_at(CURVE, eff, 64.0, lowprec=True, ridge_rows=16.0) == pytest.approx(0.2)
    # 4 rows, ridge 64: read at 64 rows → 0.4 × 0.5 = 0.2 (not 0.105 × 0.5).
    assert gemm_fraction_at(CURVE, eff, 4.0, lowprec=False, ridge_rows=64.0) == pytest.approx(0.2)


def test_without_a_curve_the_saturating_form_stands_in():
    eff = Efficiency(gemm_fraction=0.5, gemm_half_tokens=8.0, lowprec_fraction=0.8, gemm_kernel_factor=0.3)
    # 0.5 × 8 / (8 + 8) = 0.25; an FP8/FP4 kernel × 0.8 = 0.2; gemm_kernel_factor is not used.
    assert gemm_fraction_at(None, eff, 8.0, lowprec=False) == pytest.approx(0.25)
    assert gemm_fraction_at(None, eff, 8.0, lowprec=True) == pytest.approx(0.2)
    # 0.5 rows count as 1: 0.5 × 1/9.
    assert gemm_fraction_at(None, eff, 0.5, lowprec=False) == pytest.approx(0.5 / 9)


def test_each_weight_format_runs_its_own_curve():
    curves = tuple(GemmCurve(f, (1.0, 2.0), (0.1, 0.2), 1.0) for f in ("bf16", "fp8_block", "fp8_tensor", "fp4"))
    assert curve_for(curves, Dtype.BF16, weight_only=False).fmt == "bf16"
    assert curve_for(curves, Dtype.FP8, weight_only=False).fmt == "fp8_block"
    assert curve_for(curves, Dtype.NVFP4, weight_only=False).fmt == "fp4"
    assert curve_for(curves, Dtype.MXFP4, weight_only=False).fmt == "fp4"
    # Weight-only (MXFP4 on Hopper, W4A16): dequantized to BF16 in the kernel → the BF16 curve.
    assert curve_for(curves, Dtype.MXFP4, weight_only=True).fmt == "bf16"
    assert curve_for(curves[:1], Dtype.NVFP4, weight_only=False) is None  # no FP4 table
    assert curve_for((), Dtype.BF16, weight_only=False) is None


def test_interpolation_agrees_with_numpy_in_log_space():
    np = pytest.importorskip("numpy")
    for m in (1.5, 3.0, 10.0, 100.0, 200.0):
        expected = float(np.interp(math.log(m), [math.log(r) for r in CURVE.rows], CURVE.fraction))
        assert CURVE.at(m) == pytest.approx(expected)


def test_gemm_sizes_of_llama_and_deepseek_by_hand():
    """Mean N·K per GEMM of each matmul family (perf.deployment.gemm_sizes)."""
    from tokenplan.catalog import load_model
    from tokenplan.perf.deployment import gemm_sizes
    from tokenplan.perf.layout import Layout

    llama = load_model("llama-3.1-8b")  # hidden 4096, 32 q / 8 kv heads of 128, FFN 14336
    attn, mlp, expert = gemm_sizes(llama, Layout(tp=1))
    # Attention: fused QKV 4096 × (4096 + 2·1024) and O 4096 × 4096 → 41,943,040 over 2 GEMMs.
    assert attn == pytest.approx(4096 * (4096 + 2048 + 4096) / 2)
    # FFN: gate, up, down 3 × 4096 × 14336 over 2 GEMMs (fused gate-up, down).
    assert mlp == pytest.approx(3 * 4096 * 14336 / 2)
    assert expert == 0.0
    # TP8: q and o shard (2 × 4096 × 512), each rank keeps 1 of the 8 KV heads (2 × 4096 × 128).
    attn8, mlp8, _ = gemm_sizes(llama, Layout(tp=8))
    assert attn8 == pytest.approx((2 * 4096 * 512 + 2 * 4096 * 128) / 2)
    assert mlp8 == pytest.approx(3 * 4096 * 14336 / 8 / 2)
    deepseek = load_model("deepseek-r1")  # hidden 7168, routed experts of intermediate 2048
    # One routed expert: 3 × 7168 × 2048 over 2 GEMMs, whole on a GPU with EP8 …
    assert gemm_sizes(deepseek, Layout(tp=8, ep=8))[2] == pytest.approx(3 * 7168 * 2048 / 2)
    # … split 8 ways with TP8 and no EP.
    assert gemm_sizes(deepseek, Layout(tp=8))[2] == pytest.approx(3 * 7168 * 2048 / 2 / 8)
