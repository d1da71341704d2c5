"""Which rows each fit of ``calibrate --refit`` sees (calibration/refit.py), counted by hand."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplan.calibration.refit import (
    CV_LATENCY_STRIDE,
    CV_SERVING_STRIDE,
    SERVING_FIT_STRIDE,
    THIN_ABOVE,
    CaseFile,
    fit_rows,
    subsample,
)
from tokenplan.errors import InputError


def _file(path: str, rows: int, serving: bool, has_tpot: bool) -> CaseFile:
    cases: Any = [f"{path}:{i}" for i in range(rows)]  # subsample keeps rows by place, never reads them
    return CaseFile.of(path, serving, has_tpot, cases)


def test_a_file_of_at_most_thin_above_rows_is_never_thinned() -> None:
    small = _file("s.csv", THIN_ABOVE, serving=True, has_tpot=True)
    assert subsample([small], SERVING_FIT_STRIDE) == small.cases  # 500 rows: all 500


def test_serving_rows_latency_rows_and_throughput_rows_thin_at_their_own_strides() -> None:
    serving = _file("serving.csv", 2_535, serving=True, has_tpot=True)
    both = _file("inferencex.csv", 862, serving=False, has_tpot=True)  # throughput and latencies
    rate = _file("dev.csv", 600, serving=False, has_tpot=False)  # throughput only: never thinned
    assert (serving.kind, both.kind, rate.kind) == ("serving", "both", "throughput")
    # the fit: every 5th serving row, ceil(2,535 / 5) = 507; the others whole: 862 + 600
    fit = subsample([serving, both, rate], SERVING_FIT_STRIDE)
    assert len(fit) == 507 + 862 + 600 and fit[:2] == ["serving.csv:0", "serving.csv:5"]
    # the cross-validation: every 30th serving row, ceil(2,535 / 30) = 85; every 6th InferenceX
    # row, ceil(862 / 6) = 144; dev.csv whole
    cv = subsample([serving, both, rate], CV_SERVING_STRIDE, CV_LATENCY_STRIDE)
    assert len(cv) == 85 + 144 + 600 and cv[85:87] == ["inferencex.csv:0", "inferencex.csv:6"]


def test_files_with_no_predictable_row_are_refused_naming_them() -> None:
    with pytest.raises(InputError, match=r"^measurement files 'a\.csv, b\.csv' is not allowed"):
        fit_rows([_file("a.csv", 0, True, True), _file("b.csv", 0, False, False)], ["a.csv", "b.csv"], 5)
