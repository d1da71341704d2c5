"""The step-law line, fitted-range warnings and the plot's Pareto helpers, by hand."""

from __future__ import annotations

import pytest

from tokenplan.bench_schema import BenchLevel, BenchResult
from tokenplan.calibration.fitted_range import fitted_on, range_warnings
from tokenplan.calibration.from_runs import linear_step_law
from tokenplan.report.bench_plot import pareto_front, per_user_tok_s, write_bench_plot


def test_linear_step_law_through_exact_points():
    # step = 10 ms + 0.15 ms·B at B = 1, 8, 32
    a, b = linear_step_law([(1, 0.01015), (8, 0.0112), (32, 0.0148)])
    assert a == pytest.approx(0.010) and b == pytest.approx(0.00015)
    assert linear_step_law([(4, 0.01), (4, 0.02)]) is None  # one batch size: no slope


def test_fitted_on_records_ranges_and_warnings_fire_only_far_outside():
    f = fitted_on(
        [
            {"concurrency": 1, "isl_tokens": 64, "osl_tokens": 32},
            {"concurrency": 64, "isl_tokens": 64, "osl_tokens": 32},
        ],
        {"engine": "vllm", "gpu": "h100-sxm", "model": "tiny"},
        "bench sweep",
    )
    assert (f["concurrency_min"], f["concurrency_max"], f["levels"]) == (1, 64, 2)
    inside = {
        "engine": "vllm",
        "gpu": "h100-sxm",
        "model": "tiny",
        "concurrency": 128,
        "isl_tokens": 33,
        "osl_tokens": 64,
    }
    assert range_warnings(f, inside) == []  # 128 = 2 × 64 and 33 > 64 / 2 are still inside
    far = {**inside, "gpu": "b200", "concurrency": 129, "osl_tokens": 15}
    w = range_warnings(f, far)
    assert len(w) == 3
    assert "gpu h100-sxm" in w[0] and "concurrency 129" in w[1] and "output length 15" in w[2]
    assert range_warnings(f, {"concurrency": None}) == []


def _lv(c, tok_s, tpot, achieved):
    return {
        "concurrency": c,
        "output_tok_s": tok_s,
        "requests": 4,
        "errors": 0,
        "duration_s": 1.0,
        "achieved_concurrency": achieved,
        "tpot_s": {"mean": tpot},
        "server": {"output_tok_s": tok_s},
    }


def _level(d):
    return BenchLevel.from_json(d)


def test_per_user_speed_and_pareto_front():
    assert per_user_tok_s(_level(_lv(1, 90, 0.0125, 1))) == pytest.approx(80.0)  # 1 / 12.5 ms
    no_tpot = {**_lv(4, 300, None, 4), "tpot_s": {"mean": None}}
    assert per_user_tok_s(_level(no_tpot)) == 75.0  # 300 tok/s / 4 in flight
    # neither TPOT nor output tok/s measured (tokens not countable): no per-user speed
    assert per_user_tok_s(_level({**no_tpot, "output_tok_s": None})) is None
    # (per GPU, per user): (300, 10) is beaten by (400, 20); the others trade off
    assert pareto_front([(100, 80), (400, 20), (300, 10), (800, 15)]) == [(100, 80), (400, 20), (800, 15)]


def test_plot_writes_a_png(tmp_path):
    data = {
        "model": "m",
        "endpoints": ["http://x/v1"],
        "num_gpus": 1,
        "cap": {"flattens_at_concurrency": 8},
        "levels": [_lv(1, 90, 0.011, 1), _lv(8, 600, 0.013, 8), _lv(32, 640, 0.05, 32)],
    }
    out = write_bench_plot(BenchResult.from_json(data), tmp_path / "b.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
