"""Achievable GEMM FLOP/s at a number of rows (tokens per GEMM), per GPU and format.

Where the GPU has measured GEMM curves (``Gpu.gemm_curves``, from aiconfigurator's per-op
silicon tables: ``catalog/gemm_curves.json`` names the repository, commit and tables, and
``tools/gemm_curves.py`` regenerates it), the rate is

    datasheet dense FLOP/s × measured fraction(M) × ``gemm_kernel_factor`` (fitted per engine
    and engine × architecture),

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

from tokenplan.hardware import GemmCurve
from tokenplan.perf.efficiency import Efficiency
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


def gemm_fraction_at(curve: GemmCurve | None, eff: Efficiency, rows: float, lowprec: bool,
                     ridge_rows: float = 1.0, weight_elements: float | None = None) -> float:
    """Achieved / datasheet dense FLOP/s at ``rows`` rows per GEMM (dimensionless).

    Measured curve × ``gemm_kernel_factor`` where there is a curve, read at
    ``max(rows, ridge_rows)`` and at the GEMM's weight size ``weight_elements`` (N·K per GPU;
    None or 0 reads the all-shapes median; see the module docstring); else the fitted
    saturating form ``gemm_fraction · rows / (rows + gemm_half_tokens)`` (× ``lowprec_fraction``
    for an FP8/FP4 kernel), which has no size axis. ``rows`` below 1 count as 1."""
    rows = max(rows, 1.0)
    if curve is not None:
        return curve.at(max(rows, ridge_rows), weight_elements or None) * eff.gemm_kernel_factor
    fraction = eff.gemm_fraction * rows / (rows + eff.gemm_half_tokens)
    return fraction * (eff.lowprec_fraction if lowprec else 1.0)
