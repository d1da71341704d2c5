"""The package's public names: pinned, importable, and loaded lazily."""

import subprocess
import sys

import pytest

import tokenplan

PINNED = [
    "BenchRequest",
    "GenerateRequest",
    "PlanRequest",
    "PredictRequest",
    "TokenplanError",
    "__version__",
    "bench_async",
    "calibrate",
    "generate",
    "generate_async",
    "memory",
    "plan",
    "predict",
    "validate",
]


def test_all_is_pinned():
    assert sorted(tokenplan.__all__) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(tokenplan._EXPORTS))
def test_every_public_name_resolves_to_its_module(name):
    for other in tokenplan._EXPORTS:  # resolve them all first, as a user's session would
        getattr(tokenplan, other)
    assert getattr(getattr(tokenplan, name), "__module__", None) == tokenplan._EXPORTS[name]


def test_bench_is_the_subpackage_and_its_api_lives_in_api_bench():
    # ``tokenplan.bench`` names the subpackage; exporting a function under the same name would be
    # shadowed as soon as the subpackage loads, so the sweep function is tokenplan.api.bench.bench.
    import tokenplan.api.bench

    assert tokenplan.bench.__name__ == "tokenplan.bench"
    assert callable(tokenplan.api.bench.bench)


def test_version_is_a_nonempty_string():
    assert isinstance(tokenplan.__version__, str) and tokenplan.__version__


def test_import_does_not_load_the_http_client_or_scipy():
    code = "import sys, tokenplan; print('tokenplan.client' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_unknown_name_is_an_attribute_error():
    try:
        tokenplan.nonexistent_name  # noqa: B018
    except AttributeError as exc:
        assert "nonexistent_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
