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
