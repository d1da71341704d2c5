"""TTFT, TPOT, ITL and E2E from request timings, with hand-computed values."""

import pytest

from tokenplan.client.metrics import distribution, itl_s, summarize, tpot_s
from tokenplan.client.openai import Completion, Timings, Usage


def _streamed(sent_s: float, chunks: tuple[float, ...], done_s: float, tokens: int) -> Completion:
    return Completion("x", None, "stop", Usage(10, tokens, None), Timings(sent_s, done_s, chunks), "m")


def test_ttft_tpot_and_itl_of_one_streamed_answer() -> None:
    c = _streamed(10.0, (10.5, 10.6, 10.8), 11.0, tokens=3)
    # TTFT = 10.5 − 10.0 = 0.5; E2E = 1.0; TPOT = (1.0 − 0.5) / (3 − 1) = 0.25; ITL = 0.1, 0.2.
    assert c.timings.ttft_s == pytest.approx(0.5)
    assert tpot_s(c) == pytest.approx(0.25)
    assert itl_s(c) == pytest.approx([0.1, 0.2])


def test_non_streamed_answers_have_only_e2e() -> None:
    c = Completion("x", None, "stop", Usage(1, 5, None), Timings(1.0, 3.0), "m")
    summary = summarize([c])
    assert summary.e2e.mean_s == pytest.approx(2.0)
    assert (summary.ttft, summary.tpot, summary.itl) == (None, None, None)


def test_percentiles_interpolate_between_order_statistics() -> None:
    d = distribution([1.0, 2.0, 3.0, 4.0, 5.0])
    # p50 = 3; p90 at rank 0.9·4 = 3.6 → 4 + 0.6·(5 − 4) = 4.6; p99 at 3.96 → 4.96.
    assert (d.count, d.mean_s, d.p50_s) == (5, 3.0, 3.0)
    assert d.p90_s == pytest.approx(4.6) and d.p99_s == pytest.approx(4.96)
    assert d.to_dict_ms()["p90_ms"] == pytest.approx(4600.0)
    assert distribution([]) is None
