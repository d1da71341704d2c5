"""Every typed result reads back exactly what it writes: ``T.from_json(json.loads(json.dumps(r.to_json())))
== r`` for results built by hypothesis from the types' own annotations (texts, integers, finite
numbers, optional values, lists, mappings, nested results, the ``INLINE`` groups of a chosen
configuration and its 80 % bands). And what cannot be read is one line naming the key."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplan.bench_schema import BenchFit
from tokenplan.calibration.summary import CalibrationSummary
from tokenplan.calibration.update import CalibrationUpdate
from tokenplan.calibration.validation import ValidationResult
from tokenplan.catalog.listing import CatalogGpu, CatalogModel
from tokenplan.errors import ConfigError
from tokenplan.job.results import MemoryResult, Prediction, Rejected
from tokenplan.planning.results import PlanReportData, PlanResult
from tokenplan.results import Bands, ErrorBand, Interval, JsonResult

ROUNDTRIP = settings(max_examples=25, deadline=None)
TEXT = st.text(max_size=12)
KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
NUMBER = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**53), 2**53))


def _bands() -> st.SearchStrategy[Bands]:
    """Bands with at least one interval or an error band: an empty group writes no key, so it reads
    back as no group (None), as the commands never build one."""
    intervals = st.dictionaries(KEY, of(Interval), max_size=3)
    band = st.one_of(st.none(), of(ErrorBand))
    return st.builds(Bands, intervals, band).filter(lambda b: bool(b.intervals) or b.error_band is not None)


def of(tp: Any) -> st.SearchStrategy[Any]:
    """Values of the annotation ``tp`` that JSON carries (finite numbers; str keys)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else of(a) for a in args))
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(2**53), 2**53)
    if tp is float:
        return NUMBER
    if tp is str:
        return TEXT
    if tp is Any:  # a JSON value a result carries unread (e.g. an update profile's fitted_on)
        return st.one_of(st.none(), NUMBER, TEXT)
    if tp is Bands:
        return _bands()
    if origin is tuple:
        return st.lists(of(args[0]), max_size=2).map(tuple)
    if origin in (Mapping, dict):
        return st.dictionaries(KEY, of(args[1]), max_size=3)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{f.name: _field(hints[f.name], f.metadata) for f in dataclasses.fields(tp)})
    raise TypeError(tp)


def _field(tp: Any, meta: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """A field's values: within its ``bounded(gt, le)`` metadata where it has one, finite (a bound
    without ``le`` leaves infinity to hypothesis, which every figure's reader refuses)."""
    if "gt" not in meta and "le" not in meta:
        return of(tp)
    if tp is int:  # a count: whole numbers above the bound
        return st.integers(min_value=int(meta["gt"]) + 1 if "gt" in meta else None, max_value=meta.get("le"))
    inside = st.floats(
        min_value=meta.get("gt"),
        max_value=meta.get("le"),
        exclude_min="gt" in meta,
        allow_nan=False,
        allow_infinity=False,
    )
    return st.one_of(st.none(), inside) if type(None) in typing.get_args(tp) else inside


def _json_trip(result: JsonResult) -> Any:
    return json.loads(json.dumps(result.to_json()))


@pytest.mark.parametrize(
    "kind",
    [
        PlanResult,
        PlanReportData,
        Prediction,
        MemoryResult,
        Rejected,
        CalibrationSummary,
        CalibrationUpdate,
        BenchFit,
        CatalogGpu,
        CatalogModel,
        ValidationResult,
    ],
)
def test_a_result_reads_back_what_it_writes(kind: type[JsonResult]) -> None:
    @ROUNDTRIP
    @given(of(kind))
    def roundtrip(result: JsonResult) -> None:
        written = _json_trip(result)
        back = kind.from_json(written)
        assert back == result
        assert back.to_json() == written

    roundtrip()


def test_a_command_result_starts_with_its_schema_version() -> None:
    # the JSON a command prints opens with the version a reader checks
    assert list(Rejected("does not fit").to_json()) == ["schema_version", "rejected"]
    assert Rejected.from_json({"rejected": "x"}) == Rejected("x")  # written before the field: version 1


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"schema_version": 2, "rejected": "x"}, "f.json: schema_version: 2 is not allowed (allowed: 1, "),
        ({"schema_version": "1", "rejected": "x"}, "f.json: schema_version: '1' is not allowed (allowed: 1, "),
        ({"schema_version": 1}, "f.json: rejected: missing"),
        ({"schema_version": 1, "rejected": 3}, "f.json: rejected: 3 is not allowed (allowed: text)"),
        ([], "f.json: top level: [] is not allowed (allowed: a JSON object"),
    ],
    ids=["unknown_version", "version_as_text", "missing", "wrong_type", "not_an_object"],
)
def test_what_cannot_be_read_is_one_line_naming_the_key(obj: object, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Rejected.from_json(obj, "f.json")
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_an_interval_writes_its_outside_reason_under_the_json_key() -> None:
    band = Interval(1.0, 2.0, 0.8, "sglang/dense", outside="GPU x is in no fit row")
    assert band.to_json() == {
        "low": 1.0,
        "high": 2.0,
        "coverage": 0.8,
        "regime": "sglang/dense",
        "outside_measured_regime": "GPU x is in no fit row",
    }
    assert "outside_measured_regime" not in Interval(1.0, 2.0, 0.8, "r").to_json()
    assert Interval.from_json(band.to_json()) == band


def test_a_nan_figure_is_refused_with_its_path() -> None:
    written = {"low": 1.0, "high": float("nan"), "coverage": 0.8, "regime": "r"}
    with pytest.raises(ConfigError, match=r"^f: high: nan is not allowed \(allowed: a finite number\)$"):
        Interval.from_json(written, "f")
