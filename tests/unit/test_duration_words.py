"""Deadlines are printed as a user says them (a trial found "the 0.0416667-day deadline" for 1h)."""

from __future__ import annotations

import pytest

from tokenplan.units import duration_words


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (86_400, "1 day"),
        (2 * 86_400, "2 days"),
        (1.5 * 86_400, "1.5 days"),  # a day and more: days
        (3_600, "1 h"),
        (6 * 3_600, "6 h"),
        (1_800, "30 min"),
        (100_000 * 86_400, "100,000 days"),  # from 1,000 days on, whole days (3 digits read 1e+05)
        (90, "1.5 min"),  # below a day: h, then min
        (20, "20 s"),
    ],
)
def test_a_duration_reads_in_the_largest_unit_it_fills(seconds, words):
    assert duration_words(seconds) == words


def test_days_words_keeps_two_decimals_from_a_tenth_of_a_day_and_words_below():
    from tokenplan.units import days_words

    assert days_words(0.4074 * 86_400) == "0.41 days"
    assert days_words(0.1 * 86_400) == "0.10 days"  # 8,640 s: the boundary stays in days
    assert days_words(786.0) == "13.1 min"  # 786 s = 13.1 min, which "0.01 days" would hide
    assert days_words(24.3) == "24.3 s"


def test_a_wall_time_band_takes_the_unit_of_its_point_figure():
    from tokenplan.units import days_band_words

    # 1.69 h (0.0704 days) with a band of 1.38–2.66 h: hours throughout, not "1.38 h–0.11 days"
    # (2.66 h = 0.111 days, a tenth of a day, read in days_words' own unit)
    assert days_band_words(1.69 * 3600, 1.38 * 3600, 2.66 * 3600) == "1.38–2.66 h"
    # 0.41 days with 0.33–0.64 days: days, two decimals as the point figure
    assert days_band_words(0.41 * 86_400, 0.33 * 86_400, 0.64 * 86_400) == "0.33–0.64 days"
    # 57.4 min with 46.7 min–1.5 h: minutes (1.5 h = 90 min), both ends with the decimals three
    # significant digits give the larger (90.0: one decimal)
    assert days_band_words(57.4 * 60, 46.7 * 60, 90 * 60) == "46.7–90.0 min"
    assert days_band_words(30.0, 20.0, 45.0) == "20.0–45.0 s"
    # 1.47 min with 58.9 s–2.1 min: "0.98–2.10 min", not "0.982–2.1 min"
    assert days_band_words(88.2, 58.9, 126.0) == "0.98–2.10 min"


def test_usd_text_shows_cents_below_a_hundred_dollars():
    from tokenplan.units import usd_text

    # a 100-sample job on one H100 costs cents: 3.26 min × $2.99/GPU-h ≈ $0.16, not "$0"
    assert usd_text(3.26 / 60 * 2.99) == "$0.16"
    assert usd_text(42.5) == "$42.50"
    assert usd_text(99.994) == "$99.99"
    assert usd_text(100.0) == "$100"  # from $100 up, whole dollars
    assert usd_text(12_840.4) == "$12,840"
    # one request on 8 H100s: 7.9 s × 8 GPUs × $2.99/GPU-h = $0.052; a thousandth of that is
    # under half a cent, which read "$0.00" beside "cheapest" (a new-user pass)
    assert usd_text(0.052) == "$0.05" and usd_text(0.000052) == "<$0.01" and usd_text(0.0) == "$0.00"
    # `plan --budget 1e300` titled its table with all 301 digits: from a trillion up, a power of ten
    assert usd_text(999_999_999_999.0) == "$999,999,999,999" and usd_text(1e12) == "$1.00e+12"
    assert usd_text(1e300) == "$1.00e+300"


def test_the_days_column_never_uses_an_exponent():
    from tokenplan.report.tables import days_format

    # two decimals from 0.1 day up; below, three significant digits written out:
    # log10(0.00913) = −2.04 → floor −3 → 5 decimals; log10(6.45e-05) = −4.19 → floor −5 → 7 decimals
    assert format(0.41, days_format(0.41)) == "0.41"
    assert format(0.00913, days_format(0.00913)) == "0.00913"
    assert format(6.45e-05, days_format(6.45e-05)) == "0.0000645"


def test_the_wall_time_column_takes_the_unit_of_its_longest_job():
    from tokenplan.report.tables import wall_text, wall_unit

    # 16.5 days and 0.41 days: days; 0.41 days alone: days too, as the sentences say it (a tenth
    # of a day up); 0.05 days: 0.05 × 24 = 1.2 hours; a 4.33-second job: 4.33 / 86,400 = 5.01e-05
    # days, under a minute, so seconds (it read "0.0000501" days)
    assert wall_unit([16.5, 0.41]) == ("days", 1.0)
    assert wall_unit([0.41]) == ("days", 1.0)
    assert wall_unit([0.05]) == ("hours", 24.0)
    assert wall_unit([600 / 86_400]) == ("min", 1440.0)
    assert wall_unit([4.33 / 86_400]) == ("s", 86_400.0)
    assert wall_unit([]) == ("days", 1.0)  # nothing runs: its rows show "—" under the usual unit
    assert wall_text(0.41, None, 24.0) == "9.84"
    assert wall_text(4.33 / 86_400, None, 86_400.0) == "4.33"


def test_counts_take_the_noun_in_their_number():
    from tokenplan.units import count_text

    assert (count_text(1, "sample"), count_text(21, "sample"), count_text(1000, "row")) == (
        "1 sample",
        "21 samples",
        "1,000 rows",
    )
