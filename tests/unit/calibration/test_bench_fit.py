"""The bench and run fits' measurement side (calibration/bench_fit.py), values derived by hand."""

from __future__ import annotations

import pytest

from tokenplan.calibration.bench_fit import (
    RunTotals,
    Served,
    bench_measurements,
    run_measurement,
    step_points,
    sweep_cap,
)
from tokenplan.errors import ConfigError, InputError

SERVED = Served(engine="sglang", model="qwen3-8b", gpu="h100-sxm", num_gpus=2, tp=2)


def _level(c: int, requests: int, running: float | None = None, **extra: object) -> dict:
    return {
        "concurrency": c,
        "achieved_concurrency": c - 0.5,
        "requests": requests,
        "mean_input_tokens": 1000.0,
        "mean_output_tokens": 250.0,
        "output_tok_s": 800.0,
        "ttft_s": {"mean": 0.2},
        "tpot_s": {"mean": 0.02},
        "server": {"running_mean": running} if running is not None else None,
        **extra,
    }


def test_a_level_becomes_a_measurement_per_gpu():
    (m,) = bench_measurements([_level(8, 32)], SERVED)
    # 800 output tok/s over 2 GPUs = 400 per GPU; the row id names the level's concurrency
    assert (m.row_id, m.output_tok_s_per_gpu, m.concurrency, m.num_requests) == ("c8", 400.0, 8.0, 32.0)
    assert (m.isl_tokens, m.osl_tokens, m.ttft_s, m.tpot_s, m.tp, m.num_gpus) == (1000.0, 250.0, 0.2, 0.02, 2, 2)


def test_an_open_loop_level_is_fitted_at_what_it_held_in_flight_not_at_the_requests_it_sent():
    # tokenplan's own open-loop level stores the requests it sent (20) as "concurrency"; it held
    # what Little's law measured (achieved: 7.2 under a limit of 8 that arrivals did not fill;
    # 20 − 0.5 = 19.5 without a limit; 0.2 → at least 1: the server then ran one request at a
    # time), else its --max-concurrency limit (8) in a file without an achieved figure
    limited = _level(20, 20, request_rate=4.0, max_concurrency=8, achieved_concurrency=7.2)
    free = _level(20, 20, request_rate=4.0, max_concurrency=None)
    idle = _level(20, 20, request_rate=0.5, max_concurrency=None, achieved_concurrency=0.2)
    closed = _level(20, 20, request_rate="inf", max_concurrency=20)
    older = _level(20, 20, request_rate=4.0, max_concurrency=8, achieved_concurrency=None)
    found = [m.concurrency for m in bench_measurements([limited, free, idle, closed, older], SERVED)]
    assert found == [7.2, 19.5, 1.0, 20.0, 8.0]


def test_levels_without_answers_or_token_counts_are_left_out():
    levels = [_level(1, 0), _level(4, 16, mean_output_tokens=None), _level(16, 64)]
    # only the third level counts; its line is its place in the sweep (1-based)
    assert [(m.line, m.row_id) for m in bench_measurements(levels, SERVED)] == [(3, "c16")]


def test_the_step_batch_is_the_servers_running_mean_else_the_achieved_concurrency_under_the_cap():
    levels = [_level(8, 32, running=6.0), _level(64, 128), _level(4, 16)]
    # level 1: /metrics said 6 running; level 2: achieved 63.5 capped at 48; level 3: achieved 3.5
    assert step_points(levels, 48) == [(6.0, 0.02), (48.0, 0.02), (3.5, 0.02)]
    assert step_points(levels, None)[1] == (63.5, 0.02)  # no cap: the achieved concurrency


def test_the_cap_fitted_with_is_the_one_stated_else_the_one_the_sweep_observed():
    assert sweep_cap(256, {"max_running_requests": 48}) == 256  # --max-running wins
    assert sweep_cap(None, {"max_running_requests": 48.0}) == 48  # observed (an integer count)
    assert sweep_cap(None, {"max_running_requests": None}) is None  # nothing observed: the engine's
    assert sweep_cap(None, None) is None  # a bench JSON without a cap (other tools' result files)


def _run(**figures: object) -> RunTotals:
    base = {"requests": 100, "output_tokens": 50_000, "output_tok_s": 1_000.0, "ttft_mean_ms": 250.0}
    values = base | figures
    return RunTotals("run1:qwen3-8b", "run1/summary.json", prompt_tokens=900.0, **values)  # type: ignore[arg-type]


def test_a_run_is_one_measurement():
    m = run_measurement(_run(), SERVED, concurrency=64, isl=None)
    # 50,000 tokens / 100 requests = 500 per answer; 1,000 tok/s / 2 GPUs = 500 per GPU; 250 ms = 0.25 s
    assert (m.osl_tokens, m.output_tok_s_per_gpu, m.ttft_s, m.isl_tokens) == (500.0, 500.0, 0.25, 900.0)
    assert (m.row_id, m.concurrency) == ("run:run1:qwen3-8b", 64.0)
    assert run_measurement(_run(), SERVED, 64, isl=2048.0).isl_tokens == 2048.0  # --isl wins over the records


def test_a_run_without_figures_or_concurrency_is_refused():
    with pytest.raises(InputError, match="concurrency"):
        run_measurement(_run(), SERVED, None, None)
    with pytest.raises(ConfigError, match="requests/output_tokens/output_tok_s"):
        run_measurement(_run(requests=0), SERVED, 64, None)


def test_a_level_without_latency_statistics_is_fitted_on_its_throughput_not_a_traceback():
    # A bench file edited by hand (or written without streaming): tpot_s absent, ttft_s null,
    # and a tpot_s object with no "mean". Each level still has 800 tok/s over 2 GPUs = 400 per
    # GPU to fit on; the latencies it lacks are None (not measured), not a KeyError/TypeError.
    levels = [
        {k: v for k, v in _level(1, 16).items() if k != "tpot_s"},
        _level(4, 16, ttft_s=None),
        _level(8, 32, tpot_s={}),
    ]
    found = [(m.output_tok_s_per_gpu, m.ttft_s, m.tpot_s) for m in bench_measurements(levels, SERVED)]
    assert found == [(400.0, 0.2, None), (400.0, None, 0.02), (400.0, 0.2, None)]
    # no TPOT mean: no step-time point; the one level with one (c=4) gives (achieved 3.5, 20 ms)
    assert step_points(levels, None) == [(3.5, 0.02)]


def test_a_level_without_an_achieved_concurrency_steps_at_what_it_held_in_flight():
    # achieved_concurrency null (a file edited by hand, or an older one) and no /metrics: the
    # batch is the closed-loop level's own concurrency, 16, capped at 12 where the cap is 12
    level = _level(16, 64, achieved_concurrency=None)
    assert step_points([level], None) == [(16.0, 0.02)]
    assert step_points([level], 12) == [(12.0, 0.02)]
