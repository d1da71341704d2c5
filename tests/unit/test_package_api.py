"""The package's public names: pinned, importable, and loaded lazily."""

import subprocess
import sys

import tokenplan

PINNED = ["BenchRequest", "GenerateRequest", "PlanRequest", "PredictRequest", "TokenplanError", "__version__",
          "bench", "calibrate", "generate", "memory", "plan", "predict", "validate"]


def test_all_is_pinned():
    assert sorted(tokenplan.__all__) == sorted(PINNED)


def test_every_public_name_resolves():
    for name in tokenplan.__all__:
        assert getattr(tokenplan, name) is not None


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
