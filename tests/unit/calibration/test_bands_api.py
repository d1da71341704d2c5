"""predict carries an 80 % interval next to each figure, from the band table that ships."""

from __future__ import annotations

import math

import pytest

import tokenplan.api.bands as api
from tokenplan.api.predict import predict
from tokenplan.api.resolve import PredictRequest

BANDS = {
    "coverage": 0.8,
    "bands": {
        "rate": {"all": {"q_low": -0.1, "q_high": 0.2, "n": 50}},
        "ttft": {"all": {"q_low": -0.4, "q_high": 0.3, "n": 40}},
        "ttft_mean": {"all": {"q_low": -0.6, "q_high": 0.1, "n": 30}},
    },
    "extrapolation": {"rate": {"q_low": -0.5, "q_high": 0.5, "n": 30}},
    "max_batch_per_replica": {"sglang/hopper": 64.0},
    "gpus": ["h100-sxm"],
    "provenance": "test",
}


@pytest.fixture
def shipped_bands(monkeypatch):
    monkeypatch.setattr(api, "shipped_error_bands_json", lambda: BANDS)


def test_predict_bounds_every_figure(shipped_bands):
    p = predict(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", concurrency=8)).to_json()
    tok, tpot, ttft = p["output_tok_s_per_gpu"], p["tpot_ms"], p["ttft_ms"]
    # rate band r ∈ [−0.1, 0.2]: tok/s ∈ [tok·e^−0.2, tok·e^0.1]; TPOT ∈ [tpot·e^−0.1, tpot·e^0.2]
    assert p["output_tok_s_per_gpu_interval"]["low"] == pytest.approx(tok * math.exp(-0.2))
    assert p["output_tok_s_per_gpu_interval"]["high"] == pytest.approx(tok * math.exp(0.1))
    assert p["tpot_ms_interval"]["low"] == pytest.approx(tpot * math.exp(-0.1))
    assert p["tpot_ms_interval"]["high"] == pytest.approx(tpot * math.exp(0.2))
    # The median request's TTFT takes the medians' band (ttft), r ∈ [−0.4, 0.3]: [m·e^−0.3, m·e^0.4];
    # the mean over arrivals the means' (ttft_mean), r ∈ [−0.6, 0.1]: [ttft·e^−0.1, ttft·e^0.6]
    median = p["ttft_median_ms"]
    assert p["ttft_median_ms_interval"]["low"] == pytest.approx(median * math.exp(-0.3))
    assert p["ttft_median_ms_interval"]["high"] == pytest.approx(median * math.exp(0.4))
    assert p["ttft_ms_interval"]["low"] == pytest.approx(ttft * math.exp(-0.1))
    assert p["ttft_ms_interval"]["high"] == pytest.approx(ttft * math.exp(0.6))
    assert p["ttft_ms_interval"]["coverage"] == 0.8
    assert p["error_band"]["outside_measured_regime"] is None


def test_unseen_gpu_and_large_batch_say_so_and_widen(shipped_bands):
    p = predict(PredictRequest(model="llama-3.1-8b", gpu="h200", concurrency=8)).to_json()
    assert "GPU h200 is in no fit row" in p["error_band"]["outside_measured_regime"]
    tok = p["output_tok_s_per_gpu"]
    # wider of [−0.1, 0.2] and [−0.5, 0.5] on each side: [tok·e^−0.5, tok·e^0.5]
    assert p["output_tok_s_per_gpu_interval"]["high"] == pytest.approx(tok * math.exp(0.5))
    assert any("outside the measured regime" in w for w in p["warnings"])
    big = predict(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", concurrency=200)).to_json()
    assert "above the largest measured" in big["error_band"]["outside_measured_regime"]


def test_plan_options_bound_days_and_dollars(shipped_bands):
    from tokenplan.api.plan import PlanRequest, plan

    result = plan(
        PlanRequest(
            model="llama-3.1-8b",
            gpus=("1xh100-sxm",),
            samples=1000,
            specs=("none",),
            weight_dtypes=("bf16",),
            kv_dtypes=("bf16",),
        )
    ).to_json()
    (o,) = result["options"]
    # days ∝ 1/rate: [days·e^−0.1, days·e^0.2] (at most; wider where the regime is left)
    assert o["wall_days_interval"]["low"] <= o["wall_days"] * math.exp(-0.1) * (1 + 1e-9)
    assert o["wall_days_interval"]["high"] >= o["wall_days"] * math.exp(0.2) * (1 - 1e-9)
    assert o["usd_interval"]["low"] < o["usd"] < o["usd_interval"]["high"]
    assert o["output_tok_s_total_interval"]["low"] < o["output_tok_s_total"] < o["output_tok_s_total_interval"]["high"]


SPEC_BANDS = {
    **BANDS,
    "bands": {
        "rate": {
            "all": {"q_low": -0.3, "q_high": 0.6, "n": 90},
            "spec=none": {"q_low": -0.1, "q_high": 0.2, "n": 50},
            "spec=prior": {"q_low": 0.1, "q_high": 0.5, "n": 40},
        },
        "ttft": {"all": {"q_low": -0.4, "q_high": 0.3, "n": 40}},
    },
}


@pytest.mark.parametrize(
    ("spec", "regime"), [("none", "spec=none"), ("mtp:3", "spec=prior"), ("mtp:3:2.5", "spec=none")]
)
def test_predict_takes_the_band_of_its_own_speculative_decoding(monkeypatch, spec, regime):
    monkeypatch.setattr(api, "shipped_error_bands_json", lambda: SPEC_BANDS)
    p = predict(
        PredictRequest(model="qwen3.6-27b", gpu="h100-sxm", weight_dtype="fp8", concurrency=8, spec=spec)
    ).to_json()
    tok, iv = p["output_tok_s_per_gpu"], p["output_tok_s_per_gpu_interval"]
    assert iv["regime"] == p["error_band"]["regime"] == regime  # the headline throughput's band names it
    if regime == "spec=none":  # r ∈ [−0.1, 0.2]: [tok·e^−0.2, tok·e^0.1]
        assert (iv["low"], iv["high"]) == pytest.approx((tok * math.exp(-0.2), tok * math.exp(0.1)))
    else:  # r ∈ [0.1, 0.5], all too fast: [tok·e^−0.5, tok·e^−0.1] reaching up to the figure → [tok·e^−0.5, tok]
        assert (iv["low"], iv["high"]) == pytest.approx((tok * math.exp(-0.5), tok))


def test_a_plan_option_at_the_prior_acceptance_takes_the_prior_band(monkeypatch):
    from tokenplan.api.plan import PlanRequest, plan

    monkeypatch.setattr(api, "shipped_error_bands_json", lambda: SPEC_BANDS)
    result = plan(
        PlanRequest(
            model="qwen3.6-27b",
            gpus=("1xh100-sxm",),
            samples=1000,
            specs=("mtp:3",),
            weight_dtypes=("fp8",),
            kv_dtypes=("fp8",),
        )
    ).to_json()
    (o,) = result["options"]
    assert o["spec"].startswith("mtp k=3") and o["wall_days_interval"]["regime"] == "spec=prior"
    # days ∝ 1/rate: days·[e^0.1, e^0.5] reaching down to the figure → [days, days·e^0.5]
    assert (o["wall_days_interval"]["low"], o["wall_days_interval"]["high"]) == pytest.approx(
        (o["wall_days"], o["wall_days"] * math.exp(0.5))
    )


def test_offline_ttft_has_no_band_and_says_what_it_leaves_out(shipped_bands):
    # a break-it pass: --concurrency max printed TTFT 121 ms with the queued regime's band, the
    # same as 268 in flight (the batch), while 269 in flight gave 433 ms: offline, every request
    # waits for a slot for as long as the requests ahead of it take, which predict is not told
    p = predict(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm")).to_json()
    assert "ttft_ms_interval" not in p and "ttft_median_ms_interval" not in p
    assert "tpot_ms_interval" in p and "output_tok_s_per_gpu_interval" in p
    assert p["ttft_from_free_slot"] is True
    queued = predict(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", concurrency=1000)).to_json()
    assert queued["ttft_ms"] > p["ttft_ms"] and "ttft_ms_interval" in queued and not queued["ttft_from_free_slot"]
