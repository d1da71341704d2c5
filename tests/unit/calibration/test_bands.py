"""Error bands: quantiles, regime pooling, interval arithmetic, the out-of-regime widening and
nested coverage, each against hand arithmetic."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenplan.calibration.band_file import table_from_json, table_to_json
from tokenplan.calibration.bands import (
    Band,
    BandTable,
    Residual,
    batch_band,
    conformal_band,
    interval,
    lookup_keys,
    model_family,
    quantile_bands,
    queue_regime,
    spec_regime,
)
from tokenplan.calibration.heldout import FoldResidual, nested_coverage
from tokenplan.perf.speculative import parse_spec


def _r(
    log_error: float, family: str = "llama-3.1", batch: float = 4.0, metric: str = "rate", gpu: str = "h100-sxm"
) -> Residual:
    return Residual("sglang", "hopper", family, gpu, batch, metric, log_error)


def test_conformal_band_takes_the_order_statistics_that_cover_80_percent():
    # n = 20 (0, 1, …, 19): k = ⌈21·0.9⌉ = ⌈18.9⌉ = 19 → the 19th smallest (18) and the 20 + 1 − 19 = 2nd (1)
    assert conformal_band([float(i) for i in range(20)]) == Band(1.0, 18.0, 20)
    # n = 19: (19 + 1)·0.9 = 18 exactly → k = 18: the 18th smallest (17) and the 2nd (1)
    assert conformal_band([float(i) for i in range(19)]) == Band(1.0, 17.0, 19)
    # n = 11: k = ⌈10.8⌉ = 11 → the whole range; n = 3: k = ⌈3.6⌉ = 4 clamped to 3, the extremes
    assert conformal_band([float(i) for i in range(11)]) == Band(0.0, 10.0, 11)
    assert conformal_band([5.0, -1.0, 2.0]) == Band(-1.0, 5.0, 3)
    empty = conformal_band([])
    assert math.isnan(empty.low_q) and math.isnan(empty.high_q) and empty.n == 0


def test_batch_bands_and_families():
    assert [batch_band(b) for b in (1, 8, 9, 64, 65, 256, 257)] == [
        "1-8",
        "1-8",
        "9-64",
        "9-64",
        "65-256",
        "65-256",
        ">256",
    ]
    assert model_family("llama-3.1-8b") == "llama-3.1" and model_family("deepseek-r1") == "deepseek-r1"


def test_a_regime_with_enough_points_gets_its_own_band_and_a_sparse_one_pools_up():
    # (every residual here runs without a queue: keys end in /queue=none, calibration.bands.queue_regime)
    # 21 llama residuals −0.10, −0.09, …, +0.10 (step 0.01): k = ⌈22·0.9⌉ = ⌈19.8⌉ = 20 → the 20th
    # smallest, +0.09, and the 21 + 1 − 20 = 2nd, −0.09.
    llama = [_r(round(-0.10 + 0.01 * i, 2)) for i in range(21)]
    qwen = [_r(0.5, family="qwen3")] * 3  # 3 points: below MIN_POINTS (20), no band of their own
    bands = quantile_bands(llama + qwen)["rate"]
    assert bands["sglang/hopper/llama-3.1/1-8/spec=none/queue=none"].low_q == pytest.approx(-0.09)
    assert bands["sglang/hopper/llama-3.1/1-8/spec=none/queue=none"].high_q == pytest.approx(0.09)
    assert "sglang/hopper/qwen3/1-8/spec=none/queue=none" not in bands
    # the pooled level holds all 24; the qwen3 configuration falls back to it
    assert bands["sglang/hopper/1-8/spec=none/queue=none"].n == 24
    table = BandTable(0.8, {"rate": bands}, max_batch={"sglang/hopper": 64.0}, gpus=("h100-sxm",))
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "qwen3", "h100-sxm", 4.0, queue="none")
    assert iv.regime == "sglang/hopper/1-8/spec=none/queue=none" and iv.outside is None


def test_interval_arithmetic_and_inverse_figures():
    table = BandTable(
        0.8, {"rate": {"all": Band(-0.1, 0.2, 50)}}, max_batch={"sglang/hopper": 64.0}, gpus=("h100-sxm",)
    )
    # r = log(pred/meas) ∈ [−0.1, 0.2] ⇒ meas = pred·e^(−r) ∈ [100·e^−0.2, 100·e^0.1] = [81.873, 110.517]
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "x", "h100-sxm", 4.0)
    assert (iv.low, iv.high) == pytest.approx((81.873, 110.517), abs=1e-3)
    # TPOT ∝ 1/rate: TPOT_meas = TPOT_pred·e^(r) ∈ [100·e^−0.1, 100·e^0.2] = [90.484, 122.140]
    iv = interval(table, 100.0, "rate", True, "sglang", "hopper", "x", "h100-sxm", 4.0)
    assert (iv.low, iv.high) == pytest.approx((90.484, 122.140), abs=1e-3)
    assert iv.as_dict()["coverage"] == 0.8
    assert interval(table, 100.0, "ttft", False, "sglang", "hopper", "x", "h100-sxm", 4.0) is None


def test_outside_the_measured_regime_says_so_and_widens():
    table = BandTable(
        0.8,
        {"rate": {"all": Band(-0.1, 0.2, 50)}},
        extrapolation={"rate": Band(-0.3, 0.15, 40)},
        max_batch={"sglang/hopper": 64.0},
        gpus=("h100-sxm",),
    )
    # unseen GPU: the wider of each side, [−0.3, 0.2] → [100·e^−0.2, 100·e^0.3] = [81.873, 134.986]
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "x", "h200", 4.0)
    assert "h200" in iv.outside and (iv.low, iv.high) == pytest.approx((81.873, 134.986), abs=1e-3)
    # a batch of 300 against a measured top of 64
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "x", "h100-sxm", 300.0)
    assert "above the largest measured" in iv.outside and iv.as_dict()["outside_measured_regime"] == iv.outside
    # 64 × 1.05 = 67.2: a batch of 66 is still inside
    assert interval(table, 100.0, "rate", False, "sglang", "hopper", "x", "h100-sxm", 66.0).outside is None


def test_nested_coverage_uses_the_other_folds_only():
    # Fold 0: 20 residuals at 0.0; fold 1: 20 at 0.0 and fold 2: 20 at 1.0. For fold 2 the band from
    # folds 0–1 is [0, 0]: none of its points lie inside. For folds 0 and 1 the other folds hold 20
    # zeros and 20 ones: k = ⌈41·0.9⌉ = 37, the 37th smallest is 1 and the 4th is 0 → all inside.
    held = [FoldResidual(0, _r(0.0))] * 20 + [FoldResidual(1, _r(0.0))] * 20 + [FoldResidual(2, _r(1.0))] * 20
    assert nested_coverage(held) == {"rate": pytest.approx(40 / 60)}


def test_json_round_trip():
    table = BandTable(
        0.8,
        {"rate": {"all": Band(-0.1, 0.2, 50)}, "ttft": {"all": Band(-0.5, 0.4, 30)}},
        {"rate": Band(-0.3, 0.3, 40)},
        {"sglang/hopper": 64.0},
        ("h100-sxm",),
        {"rate": 0.79},
        "test",
    )
    assert table_from_json(table_to_json(table)) == table


def test_a_one_sided_regime_band_reaches_from_the_figure():
    # Every held-out residual over-predicted: r = log(pred/meas) ∈ [0.10, 0.54]
    # ⇒ meas = pred·e^(−r) ∈ [100·e^−0.54, 100·e^−0.10] = [58.275, 90.484], all below the figure;
    # the interval then reaches from 58.275 up to the figure itself, 100.
    table = BandTable(
        0.8, {"rate": {"all": Band(0.10, 0.54, 31)}}, max_batch={"sglang/blackwell": 512.0}, gpus=("b200",)
    )
    iv = interval(table, 100.0, "rate", False, "sglang", "blackwell", "x", "b200", 413.0)
    assert (iv.low, iv.high) == pytest.approx((58.275, 100.0), abs=1e-3)
    # Days ∝ 1/rate: days_meas = days_pred·e^(r) ∈ [100·e^0.10, 100·e^0.54] = [110.517, 171.600] → [100, 171.600].
    iv = interval(table, 100.0, "rate", True, "sglang", "blackwell", "x", "b200", 413.0)
    assert (iv.low, iv.high) == pytest.approx((100.0, 171.600), abs=1e-3)


def _spec_table(residuals: list[Residual]) -> BandTable:
    return BandTable(0.8, quantile_bands(residuals), max_batch={"sglang/hopper": 64.0}, gpus=("h100-sxm",))


def test_speculative_decoding_at_a_prior_acceptance_is_a_regime_of_its_own():
    # 21 residuals with no speculative decoding, −0.10 … +0.10 (band [−0.09, +0.09] as above), and
    # 21 MTP rows at the prior τ, all too fast: +0.20 … +0.40 (step 0.01): the 2nd and 20th smallest,
    # 0.21 and 0.39.
    none = [_r(round(-0.10 + 0.01 * i, 2)) for i in range(21)]
    prior = [replace(_r(round(0.20 + 0.01 * i, 2)), spec="prior") for i in range(21)]
    table = _spec_table(none + prior)
    rate = table.bands["rate"]
    assert (rate["spec=none/queue=none"].n, rate["spec=prior/queue=none"].n, rate["all"].n) == (21, 21, 42)
    assert (
        rate["sglang/hopper/llama-3.1/1-8/spec=prior/queue=none"].low_q,
        rate["sglang/hopper/llama-3.1/1-8/spec=prior/queue=none"].high_q,
    ) == pytest.approx((0.21, 0.39))
    # none: [100·e^−0.09, 100·e^0.09] = [91.393, 109.417], two-sided
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "llama-3.1", "h100-sxm", 4.0, "none", queue="none")
    assert iv.regime == "sglang/hopper/llama-3.1/1-8/spec=none/queue=none"
    assert (iv.low, iv.high) == pytest.approx((91.393, 109.417), abs=1e-3)
    # prior: meas = pred·e^(−r) ∈ [100·e^−0.39, 100·e^−0.21] = [67.706, 81.058] → up to the figure: [67.706, 100]
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "llama-3.1", "h100-sxm", 4.0, "prior", queue="none")
    assert iv.regime == "sglang/hopper/llama-3.1/1-8/spec=prior/queue=none"
    assert (iv.low, iv.high) == pytest.approx((67.706, 100.0), abs=1e-3)
    # a stated τ: no residual of its own, so the none band
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "llama-3.1", "h100-sxm", 4.0, "stated", queue="none")
    assert iv.regime == "sglang/hopper/llama-3.1/1-8/spec=none/queue=none" and iv.low == pytest.approx(91.393, abs=1e-3)
    # a sparse family pools up within its own spec regime: qwen3 at the prior τ takes the 21 prior points
    iv = interval(table, 100.0, "rate", False, "sglang", "hopper", "qwen3", "h100-sxm", 4.0, "prior", queue="none")
    assert iv.regime == "sglang/hopper/1-8/spec=prior/queue=none" and iv.low == pytest.approx(67.706, abs=1e-3)


def test_without_the_split_prior_rows_skew_the_band_of_plans_without_speculative_decoding():
    # The same 42 residuals, all counted as "none" (what the table did before the split): sorted they are
    # −0.10 … +0.10 then +0.20 … +0.40. k = ⌈43·0.9⌉ = ⌈38.7⌉ = 39: the 39th smallest is the 18th prior
    # one, 0.20 + 0.01·17 = 0.37, and the 42 + 1 − 39 = 4th smallest is −0.07.
    pooled = [_r(round(-0.10 + 0.01 * i, 2)) for i in range(21)] + [_r(round(0.20 + 0.01 * i, 2)) for i in range(21)]
    band = _spec_table(pooled).bands["rate"]["sglang/hopper/llama-3.1/1-8/spec=none/queue=none"]
    assert (band.low_q, band.high_q, band.n) == pytest.approx((-0.07, 0.37, 42))


def test_lookup_order_and_tables_written_before_the_split():
    assert lookup_keys("sglang", "hopper", "qwen3", 100.0, "stated") == (
        "sglang/hopper/qwen3/65-256/spec=stated",
        "sglang/hopper/65-256/spec=stated",
        "sglang/hopper/spec=stated",
        "sglang/spec=stated",
        "spec=stated",
        "sglang/hopper/qwen3/65-256/spec=none",
        "sglang/hopper/65-256/spec=none",
        "sglang/hopper/spec=none",
        "sglang/spec=none",
        "spec=none",
        "sglang/hopper/qwen3/65-256",
        "sglang/hopper/65-256",
        "sglang/hopper",
        "sglang",
        "all",
    )
    # an old table (keys without /spec=): every spec setting finds the old regime
    old = BandTable(
        0.8,
        {"rate": {"sglang/hopper/1-8": Band(-0.1, 0.2, 50), "all": Band(-0.5, 0.5, 100)}},
        max_batch={"sglang/hopper": 64.0},
        gpus=("h100-sxm",),
    )
    for spec in ("none", "prior", "stated"):
        iv = interval(old, 100.0, "rate", False, "sglang", "hopper", "qwen3", "h100-sxm", 4.0, spec)
        # [100·e^−0.2, 100·e^0.1] = [81.873, 110.517]
        assert iv.regime == "sglang/hopper/1-8" and (iv.low, iv.high) == pytest.approx((81.873, 110.517), abs=1e-3)


def test_spec_regime_of_a_setting():
    assert [spec_regime(parse_spec(s)) for s in ("none", "mtp:3", "mtp:3:2.5", "eagle3:7")] == [
        "none",
        "prior",
        "stated",
        "prior",
    ]


def test_nested_coverage_checks_each_residual_against_its_own_spec_regime():
    # Two folds, each: 30 residuals with no speculative decoding at 0.0 and 2 prior-τ ones at 1.0
    # (min_points = 2, so 2 points make a regime). Split: the other fold's none band is [0, 0] and its
    # prior band [1, 1] (n = 2: k = ⌈2.7⌉ = 3, clamped to 2): 64 of 64 inside. Pooled (all "none"): the
    # other fold's 32 points, k = ⌈33·0.9⌉ = ⌈29.7⌉ = 30, the 30th smallest is 0 → band [0, 0]: the 4
    # prior points miss, 60/64.
    def fold(k: int, spec: str) -> list[FoldResidual]:
        return [FoldResidual(k, _r(0.0))] * 30 + [FoldResidual(k, replace(_r(1.0), spec=spec))] * 2

    assert nested_coverage(fold(0, "prior") + fold(1, "prior"), min_points=2) == {"rate": 1.0}
    assert nested_coverage(fold(0, "none") + fold(1, "none"), min_points=2) == {"rate": pytest.approx(60 / 64)}


def test_the_ttft_band_uses_its_own_configuration_tail():
    from tokenplan.calibration.bands import RATE_TAIL, TTFT_MEAN_TAIL, TTFT_TAIL, configuration_band, ttft_metric

    # 100 configurations, one residual each, 0.01 … 1.00: a tail at level t takes the first value
    # whose cumulative weight reaches (1 − t)·100 and t·100 configurations.
    values = [i / 100 for i in range(1, 101)]
    configurations = [f"c{i}" for i in range(100)]
    assert (RATE_TAIL, TTFT_TAIL, TTFT_MEAN_TAIL) == (0.92, 0.92, 0.96)
    # rate: t = 0.92 → weights 8 and 92: the 8th and 92nd values
    assert configuration_band(values, configurations, 0.8, "rate") == Band(0.08, 0.92, 100)
    # a run's median TTFT (and a plan's): t = 0.92 → the 8th and 92nd values
    assert ttft_metric("median") == "ttft"
    assert configuration_band(values, configurations, 0.8, "ttft") == Band(0.08, 0.92, 100)
    # a run's mean TTFT: t = 0.96 → the 4th and 96th values
    assert ttft_metric("mean") == "ttft_mean"
    assert configuration_band(values, configurations, 0.8, "ttft_mean") == Band(0.04, 0.96, 100)
    # another coverage scales the rate's tail share: 90 % → t = 1 − 0.1 × 0.08/0.2 = 0.96 →
    # 4 and 96: the 4th and 96th values
    assert configuration_band(values, configurations, 0.9, "rate") == Band(0.04, 0.96, 100)


def test_each_file_that_measured_a_configuration_weighs_as_one():
    from tokenplan.calibration.bands import quantile_bands

    # Configuration "x" measured by two files: 9 residuals at 0.0 from a.csv (a sweep) and one at
    # 1.0 from b.csv; four more configurations, one residual each at 0.1 … 0.4 (all from a.csv).
    # Units: x@a.csv, x@b.csv and the four: K = 6, x@b's single residual weighs 1 (with one
    # weight for x it would weigh 0.1). Rate tail 0.92: the high bound is the first value whose
    # cumulative weight reaches 0.92 × 6 = 5.52: 0.0 (weight 1), 0.1 … 0.4 (5), 1.0 (6) → 1.0.
    # One weight per configuration (K = 5, x's ten residuals 0.1 each) would reach 0.92 × 5 =
    # 4.6 at 0.4 (0.9 + 4 = 4.9) and leave b.csv's 1.0 outside.
    def r(value: float, conf: str, source: str) -> Residual:
        return replace(_r(value), configuration=conf, source=source)

    rs = [r(0.0, "x", "a.csv")] * 9 + [r(1.0, "x", "b.csv")]
    rs += [r(v, f"c{v}", "a.csv") for v in (0.1, 0.2, 0.3, 0.4)]
    band = quantile_bands(rs, min_points=2)["rate"]["all"]
    assert band.high_q == 1.0 and band.low_q == 0.0 and band.n == 14


def test_queue_regime_of_a_row():
    # offline (no concurrency) and 300 in flight on a replica that runs 256 queue; 64 of a 256 limit does not
    assert [queue_regime(c, b) for c, b in ((None, 256.0), (300.0, 256.0), (256.0, 256.0), (64.0, 64.0))] == [
        "queue",
        "queue",
        "none",
        "none",
    ]


def test_ttft_and_rate_bands_split_by_whether_requests_queue():
    # 21 residuals without a queue, −0.10 … +0.10 (band [−0.09, +0.09] as above) and 21 with one,
    # +0.30 … +0.50 (predicted too long, or too fast): the 2nd and 20th smallest, 0.31 and 0.49.
    free = [_r(round(-0.10 + 0.01 * i, 2), metric="ttft") for i in range(21)]
    queued = [replace(_r(round(0.30 + 0.01 * i, 2), metric="ttft"), queue="queue") for i in range(21)]
    rate = [replace(r, metric="rate") for r in free + queued]
    table = _spec_table(free + queued + rate)
    for metric in ("ttft", "rate"):
        bands = table.bands[metric]
        assert bands["sglang/hopper/llama-3.1/1-8/spec=none/queue=queue"].n == 21
        assert (bands["spec=none/queue=none"].low_q, bands["spec=none/queue=none"].high_q) == pytest.approx(
            (-0.09, 0.09)
        )
        # queue: meas = pred·e^(−r) ∈ [100·e^−0.49, 100·e^−0.31] = [61.263, 73.345] → up to the figure
        iv = interval(table, 100.0, metric, False, "sglang", "hopper", "llama-3.1", "h100-sxm", 4.0, queue="queue")
        assert iv.regime == "sglang/hopper/llama-3.1/1-8/spec=none/queue=queue"
        assert (iv.low, iv.high) == pytest.approx((61.263, 100.0), abs=1e-3)
        iv = interval(table, 100.0, metric, False, "sglang", "hopper", "llama-3.1", "h100-sxm", 4.0, queue="none")
        assert (iv.low, iv.high) == pytest.approx((91.393, 109.417), abs=1e-3)  # [100·e^−0.09, 100·e^0.09]


def test_a_table_written_before_the_queue_split_still_gives_ttft_bands():
    assert lookup_keys("sglang", "hopper", "qwen3", 4.0, "none", "queue")[:8] == (
        "sglang/hopper/qwen3/1-8/spec=none/queue=queue",
        "sglang/hopper/1-8/spec=none/queue=queue",
        "sglang/hopper/spec=none/queue=queue",
        "sglang/spec=none/queue=queue",
        "spec=none/queue=queue",
        "queue=queue",  # queued rows of every speculative-decoding regime
        "sglang/hopper/qwen3/1-8/spec=none",
        "sglang/hopper/1-8/spec=none",
    )
    old = BandTable(0.8, {"ttft": {"sglang/hopper/1-8/spec=none": Band(-0.1, 0.2, 50)}}, gpus=("h100-sxm",))
    old = replace(old, max_batch={"sglang/hopper": 64.0})
    iv = interval(old, 100.0, "ttft", False, "sglang", "hopper", "qwen3", "h100-sxm", 4.0, queue="queue")
    # [100·e^−0.2, 100·e^0.1] = [81.873, 110.517]
    assert iv.regime == "sglang/hopper/1-8/spec=none" and (iv.low, iv.high) == pytest.approx(
        (81.873, 110.517), abs=1e-3
    )


def test_pipeline_parallelism_on_an_engine_no_fit_row_ran_with_it_is_outside_the_measured_regime():
    # the shipped fit's only PP rows are TensorRT-LLM's: vLLM with PP2 has no measured micro-batch
    # schedule (its scheduler puts every request not in flight into the next step, vllm#41682), so
    # its band is widened to the leave-one-GPU-out one, [−0.3, 0.3] here, and it says why
    table = BandTable(
        0.8,
        {"rate": {"all": Band(-0.1, 0.2, 50)}},
        {"rate": Band(-0.3, 0.3, 40)},
        {"vllm/blackwell": 512.0, "trtllm/blackwell": 512.0},
        ("b200",),
        pipeline_engines=("trtllm",),
    )
    iv = interval(table, 100.0, "rate", False, "vllm", "blackwell", "x", "b200", 100.0, pp=2)
    assert iv.outside == "no fit row runs vllm with pipeline parallelism (PP2)"
    assert (iv.low, iv.high) == pytest.approx((100 * math.exp(-0.3), 100 * math.exp(0.3)))
    assert interval(table, 100.0, "rate", False, "trtllm", "blackwell", "x", "b200", 100.0, pp=2).outside is None
    assert interval(table, 100.0, "rate", False, "vllm", "blackwell", "x", "b200", 100.0, pp=1).outside is None
    assert table_from_json(table_to_json(table)) == table
