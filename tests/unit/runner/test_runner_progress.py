"""Progress: windowed tok/s, ETA from the tokens still expected."""

import pytest

from tokenplan.runner.progress import Progress


def test_eta_divides_the_tokens_left_by_the_windowed_rate() -> None:
    p = Progress(started_s=0.0, units_total=100, expected_tokens_per_unit=500.0, window_s=10.0)
    p.add_tokens(5.0, 1_000)
    p.add_tokens(9.0, 1_000)
    p.stored = 10
    s = p.snapshot(10.0, {"http://a/v1": 3}, 1)
    # 2,000 tokens in the 10 s window → 200 tok/s; 200 tokens per stored unit; 90 left → 18,000 tokens → 90 s.
    assert s.output_tok_s_window == pytest.approx(200.0)
    assert s.eta_s == pytest.approx(90.0)
    assert s.finished == 10 and s.in_flight == {"http://a/v1": 3}


def test_old_tokens_leave_the_window_and_before_any_finish_max_tokens_is_assumed() -> None:
    p = Progress(started_s=0.0, units_total=10, expected_tokens_per_unit=100.0, window_s=10.0, done_before=5)
    p.add_tokens(1.0, 1_000)
    p.add_tokens(15.0, 50)
    s = p.snapshot(20.0, {}, 1)
    # Window [10, 20]: 50 tokens / 10 s = 5 tok/s; nothing stored yet → 100 tokens/unit × 5 left = 500 → 100 s.
    assert s.output_tok_s_window == pytest.approx(5.0)
    assert s.output_tok_s_mean == pytest.approx(1_050 / 20)
    assert s.eta_s == pytest.approx(100.0)
