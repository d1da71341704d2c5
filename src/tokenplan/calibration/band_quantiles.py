"""The quantiles an error band is made of: split-conformal bounds (:func:`conformal_band`) and,
for residuals that cluster by configuration, configuration-weighted tails
(:func:`configuration_band`, tail levels :func:`configuration_tail`). ``calibration.bands`` pools
residuals by regime and calls these.

Layer: calibration (pure values)."""

from __future__ import annotations

import math
from dataclasses import dataclass

COVERAGE = 0.8
TTFT_METRICS = ("ttft", "ttft_mean")  # a run's median TTFT, its mean (calibration.bands.ttft_metric)


@dataclass(frozen=True, slots=True)
class Band:
    """Low and high bounds of ``log(pred/meas)`` that hold a share ``c`` of new residuals
    (:func:`conformal_band`), and how many points they rest on."""

    low_q: float
    high_q: float
    n: int


def conformal_band(values: list[float], coverage: float = COVERAGE) -> Band:
    """The band of ``n`` residuals: their ``(n + 1 − k)``-th and ``k``-th smallest, with
    ``k = ⌈(n + 1)·(1 + coverage)/2⌉`` (clamped to ``n``).

    These are split-conformal bounds (Lei et al. 2018, "Distribution-free predictive inference
    for regression", JASA 113:1094, §2.2), one per tail at ``(1 − coverage)/2``: a new residual
    exchangeable with the ``n`` lies above the ``k``-th smallest with probability at most
    ``(n + 1 − k)/(n + 1) ≤ (1 − coverage)/2``, and below the ``(n + 1 − k)``-th smallest with
    the same, so the band covers it with probability ≥ ``coverage``. With ``n = 20`` and 80 %:
    ``k = ⌈18.9⌉ = 19``, the 2nd and 19th smallest (linear-interpolated 10th/90th percentiles sit
    at ranks 2.9 and 18.1 and cover less). Below ``n = 9`` the high bound would be infinite and
    the clamp to the largest residual drops the guarantee. Empty: NaN bounds, ``n = 0``.
    """
    s = sorted(values)
    n = len(s)
    if not n:
        return Band(math.nan, math.nan, 0)
    k = min(math.ceil(round((n + 1) * (1 + coverage) / 2, 9)), n)  # round: a float 18.000…04 counts as 18
    return Band(s[n - k], s[k - 1], n)


# configuration_tail: nested grouped 5-fold coverage per file. Issue 28's kernel round (MLA layers' kernels, the
# serving rows' lengths and opening wave, means pooled apart from medians), rate (dev tok/s, TPOT | InferenceX tok/s,
# TPOT | serving TPOT): 0.93: 83.6, 68.8 | 79.6, 76.8 | 77.2; 0.94: 86.6, 75.0 | 80.1, 78.0 | 78.8. TTFT medians (dev
# | InferenceX): 0.91: 87.5, 74.7; 0.92: 87.5, 78.4; 0.93: 93.8, 81.5 (dev's 16 rows move 6 points a row). TTFT means
# (serving): 0.94: 74.7; 0.95: 76.6; 0.96: 79.8. After the gpustack rows' H100 PCIe, the finite-run queue and the
# rate's queue split (calibration.bands.queue_regime): rate 0.92: 82, 81 | 78, 78 | 81; 0.93: 82, 88 | 81, 81 | 83
# (without the split, 0.93: 90, 81 | 83, 83 | 81; 0.94: 94, 81 | 84, 84 | 83). TTFT medians 0.91: 94, 75; 0.92: 94, 79.
# With FP8's activation-quantization kernels (perf.layer_kernels): rate 0.91: 81, 88 | 77, 76 | 80; 0.92: 84, 88 |
# 81, 78 | 80 (dev's TPOT: 14 of 16 rows, its 2 outside far off). TTFT medians 0.91: 88, 77; 0.92: 88, 79.
RATE_TAIL, TTFT_TAIL, TTFT_MEAN_TAIL = 0.92, 0.92, 0.96


def configuration_tail(coverage: float = COVERAGE, metric: str = "rate") -> float:
    """The quantile level of each tail of :func:`configuration_band` for ``metric``:
    :data:`RATE_TAIL` for the decode rate (at another ``coverage``, its tail share scaled:
    ``1 − (1 − coverage)·(1 − RATE_TAIL)/(1 − COVERAGE)``), :data:`TTFT_TAIL` for a run's median TTFT
    and a plan's, :data:`TTFT_MEAN_TAIL` for a run's mean TTFT (:func:`ttft_metric`). Set by
    the nested cross-validation over folds of whole configurations on the three ground-truth
    files (figures at the constants); the finite-sample conformal level ``⌈(K + 1)·0.9⌉/K`` over
    K configurations reaches the extremes of a regime of few configurations (98 % of rate, 91 %
    of TTFT residuals in the 130-factor fit)."""
    if metric in TTFT_METRICS:
        return TTFT_MEAN_TAIL if metric == "ttft_mean" else TTFT_TAIL
    if coverage == COVERAGE:
        return RATE_TAIL
    return 1.0 - (1.0 - coverage) * (1.0 - RATE_TAIL) / (1.0 - COVERAGE)


def configuration_band(
    values: list[float], configurations: list[str], coverage: float = COVERAGE, metric: str = "rate"
) -> Band:
    """The band of residuals that cluster by configuration: each configuration weighs 1 in all
    (each of its ``n_c`` residuals ``1/n_c``), and the bounds are the smallest residuals whose
    cumulative weight reaches ``(1 − t)·K`` and ``t·K`` of the ``K`` configurations, ``t`` =
    :func:`configuration_tail`. A new configuration's error is one draw of a configuration's
    bias plus its spread, so an InferenceX sweep of 40 concurrencies weighs as much as a
    dev.csv configuration of one row (unweighted, the sweeps' own spread set the bands, which
    then held 65 % of the residuals of held-out configurations). Empty: NaN bounds, ``n = 0``."""
    if not values:
        return Band(math.nan, math.nan, 0)
    count: dict[str, int] = {}
    for c in configurations:
        count[c] = count.get(c, 0) + 1
    pairs = sorted(zip(values, (1.0 / count[c] for c in configurations)))
    tail, total = configuration_tail(coverage, metric), float(len(count))

    def quantile(level: float) -> float:
        acc = 0.0
        for v, w in pairs:
            acc += w
            if acc >= level * total - 1e-9:
                return v
        return pairs[-1][0]

    return Band(quantile(1.0 - tail), quantile(tail), len(values))
