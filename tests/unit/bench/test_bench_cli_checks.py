"""bench's option parsing, its cap line, and the fit's residual check, by hand."""

from __future__ import annotations

import math

import pytest

from tokenplan.bench_schema import BenchResult
from tokenplan.calibration.from_runs import LevelFit, median_abs_error
from tokenplan.calibration.run_profile import POOR_FIT, poor_fit_warning
from tokenplan.cli.bench import _concurrencies
from tokenplan.errors import InputError
from tokenplan.report.bench import cap_text


def test_concurrency_levels_parse_and_an_empty_entry_is_refused() -> None:
    assert _concurrencies("1,4, 16 ,64") == (1, 4, 16, 64)
    for text in ("1,,2", "1,2,", ",1", "", "1,x", "0,4"):
        with pytest.raises(InputError) as excinfo:
            _concurrencies(text)
        assert str(excinfo.value) == (
            f"concurrency {text!r} is not allowed (allowed: comma-separated integers ≥ 1 "
            "with no empty entry, e.g. 1,4,16,64)"
        )


def _data(flat, queue, running, source, metrics=True):
    return BenchResult.from_json(
        {
            "model": "m",
            "num_gpus": None,
            "levels": [],
            "cap": {
                "flattens_at_concurrency": flat,
                "queue_grows_at_concurrency": queue,
                "max_running_requests": running,
                "source": source,
            },
            "server": {"metrics": metrics},
        }
    )


def test_cap_line_says_not_reached_instead_of_none() -> None:
    assert cap_text(_data(32, 64, 32, "metrics")) == (
        "cap: throughput flattens at concurrency 32, queue grows at 64, server runs at most 32 (from metrics)"
    )
    assert cap_text(_data(16, None, None, "throughput")) == (
        "cap: throughput flattens at concurrency 16, queue growth not reached in this sweep, running-request "
        "limit not reached in this sweep (from throughput)"
    )
    assert cap_text(_data(16, None, None, "throughput", metrics=False)) == (
        "cap: throughput flattens at concurrency 16, queue growth not measured (no /metrics), running-request "
        "limit not measured (no /metrics) (from throughput)"
    )
    assert cap_text(_data(None, 64, 48, "metrics")) == (
        "cap: throughput flattening not reached in this sweep, queue grows at 64, server runs at most 48 (from metrics)"
    )
    assert cap_text(_data(None, None, None, None)) is None
    assert "None" not in (cap_text(_data(16, None, None, "throughput")) or "")


def _lv(pred: float, meas: float | None) -> LevelFit:
    return LevelFit(1.0, 1.0, (0.01, 0.01), (0.1, 0.1), (pred, meas))


def test_median_abs_error_of_throughput_per_gpu() -> None:
    # |2624 / 32.6 − 1| = 79.49…: the tester's 80× case
    assert median_abs_error([_lv(2624.0, 32.6)]) == pytest.approx(2624 / 32.6 - 1)
    # errors 0.1, 0.3, 2.0 (and two levels without a measurement or with a rejected prediction): median 0.3
    levels = [_lv(110, 100), _lv(70, 100), _lv(300, 100), _lv(50, None), _lv(math.nan, 100)]
    assert median_abs_error(levels) == pytest.approx(0.3)
    assert median_abs_error([_lv(1, None)]) is None


def test_poor_fit_warns_above_half_with_the_figure() -> None:
    assert POOR_FIT == 0.5
    assert poor_fit_warning(None, 3) is None and poor_fit_warning(0.5, 3) is None
    warning = poor_fit_warning(2624 / 32.6 - 1, 4)
    assert warning is not None
    assert "median |predicted/measured − 1| = 7,949 % over 4 levels (output tok/s per GPU)" in warning
    assert "profile is written anyway" in warning
