"""Achievable GEMM FLOP/s at a number of rows (tokens per GEMM), per GPU and format.

Where the GPU has measured GEMM curves (``Gpu.gemm_curves``, from aiconfigurator's per-op
silicon tables: ``catalog/gemm_curves.json`` names the repository, commit and tables, and
``tools/gemm_curves.py`` regenerates it), the rate is

    datasheet dense FLOP/s × measured fraction(M) × the engine's kernel factor of the format
    (``gemm_kernel_factor`` for BF16, ``fp8_kernel_factor``, ``fp4_kernel_factor``; fitted per
    engine, each within 0.7–1.3),

the fraction interpolated in log M. The measured fraction already holds the format's kernel
maturity (FP8 and FP4 GEMMs reach a smaller share of their peak than BF16 ones), so the fitted
``lowprec_fraction`` does not apply on top.

The measured fraction also depends on the weight's size: the tables are reduced per N·K band
as well (``by_size``), and each matmul family is read at its mean weight size per GPU
(``perf.deployment.gemm_sizes``). On B200 at M = 8,192 an FP8 block-scaled GEMM of ~2 M
elements reaches 0.40 of peak and one of ~128 M elements 0.67 (the all-shapes median is
0.60), so a big model at low TP prefills faster per FLOP than a small model or a wide TP.

The curve is read no lower than its ridge, ``M* = F·b / (2·B)`` rows (datasheet FLOP/s F,
weight bytes b, datasheet bandwidth B of the GPU measured; ~200–320 rows on H100–B200; stored
with the curve, so a GPU whose bandwidth is varied keeps it). Below it a GEMM
is bound by its weight read, and the measured fraction there is that read at ~90 % of HBM
(the tables' fixed kernel latency is taken off in the reduction; ``layer_latency_s`` holds it).
The step roofline already has the read as its bandwidth term (``hbm_fraction``), so reading the
curve below M* would count the same bytes twice, at two efficiencies.

Elsewhere (AMD MI300X/MI325X/MI355X, H20, H100 PCIe/NVL, RTX 5090: no published table) the
fitted saturating form stands in: ``gemm_fraction · M / (M + gemm_half_tokens)``, times
``lowprec_fraction`` for FP8/FP4 kernels.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import NamedTuple

from tokenplan.hardware import GemmCurve
from tokenplan.perf.efficiency import Efficiency, kernel_factor
from tokenplan.units import Dtype

# Which measured curve a weight format's GEMM runs. FP8 checkpoints of the catalog's models
# (DeepSeek-V3/R1, Qwen3/3.5/3.6, MiniMax, Kimi, GLM) are 128×128 block-scaled, the kernels
# DeepGEMM / CUTLASS block-scale run; MXFP4 runs on the same FP4 tensor-core path as NVFP4.
CURVE_OF_FLOPS_CLASS = {"bf16": "bf16", "fp8": "fp8_block", "fp4": "fp4"}


def curve_for(gpu_curves: tuple[GemmCurve, ...], weight_dtype: Dtype, weight_only: bool) -> GemmCurve | None:
    """The measured curve a GEMM with ``weight_dtype`` weights runs on, or None.

    A weight-only format (dequantized to BF16 in the kernel) runs on the BF16 curve."""
    fmt = "bf16" if weight_only else CURVE_OF_FLOPS_CLASS[weight_dtype.flops_class]
    return next((c for c in gpu_curves if c.fmt == fmt), None)


def gemm_fraction_at(
    curve: GemmCurve | None,
    eff: Efficiency,
    rows: float,
    lowprec: bool,
    ridge_rows: float = 1.0,
    weight_elements: float | None = None,
) -> float:
    """Achieved / datasheet dense FLOP/s at ``rows`` rows per GEMM (dimensionless).

    Measured curve × the kernel factor of its format (``perf.efficiency.kernel_factor``) where there is a curve, read at
    ``max(rows, ridge_rows)`` and at the GEMM's weight size ``weight_elements`` (N·K per GPU;
    None or 0 reads the all-shapes median; see the module docstring); else the fitted
    saturating form ``gemm_fraction · rows / (rows + gemm_half_tokens)`` (× ``lowprec_fraction``
    for an FP8/FP4 kernel), which has no size axis. ``rows`` below 1 count as 1."""
    rows = max(rows, 1.0)
    if curve is not None:
        return curve.at(max(rows, ridge_rows), weight_elements or None) * kernel_factor(eff, curve.fmt)
    fraction = eff.gemm_fraction * rows / (rows + eff.gemm_half_tokens)
    return fraction * (eff.lowprec_fraction if lowprec else 1.0)


# Reading a curve in two halves. A step reads the same curve at one row count for up to four
# GEMM sizes, and a deployment reads it at the same four sizes in every step, so the size axis
# is located once per deployment (:func:`size_read`) and the row axis once per step
# (:func:`row_point`); :func:`fraction_at_point` then combines them with exactly the arithmetic
# of ``GemmCurve.at`` (same operands, same order), so the figures are bit-for-bit those of
# ``curve.at(rows, weight_elements)``.


class SizeRead(NamedTuple):
    """Where one GEMM weight size sits on a curve's size axis.

    Attributes:
        lo: the fractions (one per measured M) of the band at or below the size, or the
            all-shapes curve when the size is unknown or the curve has no bands.
        hi: the band above, or None where the size is outside the bands (held at the end band)
            or there are no bands.
        w: the weight of ``hi``, linear in log N·K between the two bands (0 without ``hi``).
    """

    lo: tuple[float, ...]
    hi: tuple[float, ...] | None
    w: float


def size_read(curve: GemmCurve, weight_elements: float | None) -> SizeRead:
    """Locate ``weight_elements`` (N·K per GPU; None or 0 = the all-shapes median) on the size
    axis of ``curve``, as ``GemmCurve.at`` does."""
    xs = curve.log_sizes
    if not weight_elements or not xs:
        return SizeRead(curve.fraction, None, 0.0)
    s = math.log(max(weight_elements, 1.0))
    j = bisect_right(xs, s)
    if j == 0:
        return SizeRead(curve.fraction_by_size[0], None, 0.0)
    if j == len(xs):
        return SizeRead(curve.fraction_by_size[-1], None, 0.0)
    return SizeRead(curve.fraction_by_size[j - 1], curve.fraction_by_size[j], (s - xs[j - 1]) / (xs[j] - xs[j - 1]))


def row_point(curve: GemmCurve, rows: float) -> tuple[int, float]:
    """Locate ``rows`` (tokens per GEMM; below 1 counts as 1) on the M axis of ``curve``:
    (index of the first measured M above it, weight of that point; 0 outside the points)."""
    x = math.log(1.0 if 1.0 > rows else rows)  # max(rows, 1.0)
    xs = curve.log_rows
    i = bisect_right(xs, x)
    if 0 < i < len(xs):
        return i, (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return i, 0.0


def _at_point(ys: tuple[float, ...], i: int, w: float) -> float:
    """One curve's fraction at a located M (held at the end points)."""
    if i == 0:
        return ys[0]
    if i == len(ys):
        return ys[-1]
    return ys[i - 1] + w * (ys[i] - ys[i - 1])


def fraction_at_point(read: SizeRead, i: int, w: float) -> float:
    """Achieved / datasheet dense FLOP/s (dimensionless) at the M located by :func:`row_point`
    and the size located by :func:`size_read`; equal to ``curve.at(rows, weight_elements)``."""
    a = _at_point(read.lo, i, w)
    if read.hi is None:
        return a
    return a + read.w * (_at_point(read.hi, i, w) - a)


def fractions_at_point(reads: tuple[SizeRead, ...], i: int, w: float) -> list[float]:
    """:func:`fraction_at_point` of every read in ``reads`` (of one curve, so of one length) at
    one located M, with the same arithmetic: one call per step for the dense families instead of
    one per family and band."""
    if not reads:
        return []
    out = []
    if 0 < i < len(reads[0].lo):
        j = i - 1
        for lo, hi, rw in reads:
            a = lo[j] + w * (lo[i] - lo[j])
            if hi is not None:
                a = a + rw * (hi[j] + w * (hi[i] - hi[j]) - a)
            out.append(a)
        return out
    end = 0 if i == 0 else -1  # held at the end points
    for lo, hi, rw in reads:
        a = lo[end]
        if hi is not None:
            a = a + rw * (hi[end] - a)
        out.append(a)
    return out


def fractions_at_rows(curve: GemmCurve, reads: tuple[SizeRead, ...], rows: float) -> tuple[float, ...]:
    """:func:`fractions_at_point` of ``reads`` (``Deployment.gemm_reads``: attention, dense FFN,
    lm_head, routed expert) at ``rows`` on ``curve`` (:func:`row_point`), kept by the identity
    of the curve and reads and the value of ``rows``: the deployments of a search share their
    curve reads per weight format and layout, and their steps run at the same few batches, so a
    sweep reads ~26,000 points of which ~5,000 differ. The same arithmetic, so the same
    fractions."""
    key = (id(curve), id(reads), rows)
    hit = _AT_ROWS.get(key)
    if hit is not None:  # the entry holds its curve and reads: their ids are not reused while it lives
        return hit[2]
    got = tuple(fractions_at_point(reads, *row_point(curve, rows)))
    if len(_AT_ROWS) >= _AT_ROWS_KEPT:
        _AT_ROWS.clear()
    _AT_ROWS[key] = (curve, reads, got)
    return got


_AT_ROWS: dict[tuple[int, int, float], tuple[GemmCurve, tuple[SizeRead, ...], tuple[float, ...]]] = {}
_AT_ROWS_KEPT = 8192


def forget_reads() -> None:
    """Empty what :func:`fractions_at_rows` keeps (``perf.step_constants.forget_steps``)."""
    _AT_ROWS.clear()
