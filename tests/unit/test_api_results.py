"""The api commands return frozen, typed results whose ``to_json()`` is the printed JSON.

The JSON keys are the dataclass field names in field order; ``OMIT_NONE`` and ``INLINE`` fields
shape optional keys. The expected dicts below are written out by hand from those rules.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
from dataclasses import dataclass, field

import pytest

from tokenplan.results import INLINE, OMIT_NONE, JsonResult, inline

# Every module of the api package, found on disk so that a new one is checked too; bench and
# generate return their own outcome types (BenchOutcome, GenerateResult).
TYPED_MODULES = sorted(
    f"tokenplan.api.{m.name}" for m in pkgutil.iter_modules(importlib.import_module("tokenplan.api").__path__)
)


@dataclass(frozen=True)
class _Inner(JsonResult):
    a: int
    b: str | None


@dataclass(frozen=True)
class _Outer(JsonResult):
    first: int
    gone: int | None = field(metadata=OMIT_NONE)
    kept: int | None
    merged: _Inner | None = field(metadata=INLINE)
    prefixed: _Inner | None = field(metadata=inline("p_"))
    items: tuple[_Inner, ...] = ()


def test_to_json_follows_field_order_and_the_markers() -> None:
    out = _Outer(
        first=1, gone=None, kept=None, merged=_Inner(2, "x"), prefixed=_Inner(3, None), items=(_Inner(4, "y"),)
    )
    # first; gone is None and OMIT_NONE: no key; kept None stays; merged's a, b in place;
    # prefixed's a, b as p_a, p_b; items as a list of their dicts.
    assert out.to_json() == {
        "first": 1,
        "kept": None,
        "a": 2,
        "b": "x",
        "p_a": 3,
        "p_b": None,
        "items": [{"a": 4, "b": "y"}],
    }
    assert list(out.to_json()) == ["first", "kept", "a", "b", "p_a", "p_b", "items"]


def test_an_inline_field_that_is_none_adds_no_key() -> None:
    out = _Outer(first=1, gone=5, kept=6, merged=None, prefixed=None)
    assert out.to_json() == {"first": 1, "gone": 5, "kept": 6, "items": []}


@pytest.mark.parametrize("module", TYPED_MODULES)
def test_no_public_api_function_returns_a_bare_dict(module: str) -> None:
    mod = importlib.import_module(module)
    for name, fn in inspect.getmembers(mod, inspect.isfunction):
        if name.startswith("_") or fn.__module__ != module:
            continue
        returns = str(inspect.signature(fn).return_annotation)
        assert not returns.startswith(("dict", "list[dict")), f"{module}.{name} returns {returns}"


def test_predict_and_memory_results_are_frozen_and_print_their_json() -> None:
    from tokenplan.api.memory import memory
    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest

    req = PredictRequest(model="qwen3.6-27b", gpu="b200", weight_dtype="fp8")
    p, m = predict(req), memory(req)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.output_tok_s_total = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.gpu_bytes = 0.0  # type: ignore[misc]
    d = p.to_json()
    assert d["output_tok_s_total"] == p.output_tok_s_total and d["warnings"] == list(p.warnings)
    assert json.loads(json.dumps(d)) == d  # plain JSON values only
    assert m.to_json()["allocation"] == dict(m.allocation)


def test_a_configuration_that_cannot_run_is_rejected_with_its_reason() -> None:
    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest
    from tokenplan.job.results import Rejected

    # DeepSeek-R1 in FP8 is ~671 B parameters ≈ 671 GB of weights: far above one H200's 141 GB.
    r = predict(PredictRequest(model="deepseek-r1", gpu="h200", weight_dtype="fp8"))
    assert isinstance(r, Rejected) and "does not fit" in r.rejected
    assert r.to_json() == {"schema_version": 1, "rejected": r.rejected}
