"""A latency shown in the predict table: ms below 10 s, seconds from 10 s up (a queued TTFT of
minutes is not ``413,410 ms``), its 80 % interval scaled with it."""

from __future__ import annotations

from tokenplan.report.tables import ms_with_band
from tokenplan.results import Interval


def test_ms_below_ten_seconds_and_seconds_above_with_the_band_scaled():
    band = Interval(low=300_000.0, high=520_000.0, coverage=0.8, regime="spec=none/queue=queue")
    assert ms_with_band(147.0, None) == "147 ms"
    assert ms_with_band(9_999.0, None) == "9,999 ms"
    # 413,410 ms = 413.41 s → "413.4 s"; 300,000–520,000 ms → 300.0–520.0 s
    assert ms_with_band(413_410.0, band) == "413.4 s (300.0–520.0)"
