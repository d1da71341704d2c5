"""tokenplan: plan, check and run large LLM data-generation jobs.

The Python API mirrors the CLI — a request object in, a result out::

    from tokenplan import PlanRequest, plan
    result = plan(PlanRequest(model="qwen3.6-27b", gpus=("4xrtx-pro-6000", "8xb200")))

Names load lazily (PEP 562), so ``import tokenplan`` stays cheap and importing one submodule does
not pull in the others (the HTTP client, scipy, plotting).
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"

# public name → module that defines it
_EXPORTS: dict[str, str] = {
    "PlanRequest": "tokenplan.api.plan",
    "plan": "tokenplan.api.plan",
    "PredictRequest": "tokenplan.api.resolve",
    "predict": "tokenplan.api.predict",
    "memory": "tokenplan.api.memory",
    "validate": "tokenplan.api.validate",
    "calibrate": "tokenplan.api.calibrate",
    "GenerateRequest": "tokenplan.api.generate",
    "generate": "tokenplan.api.generate",
    "generate_async": "tokenplan.api.generate",
    "bench_async": "tokenplan.api.bench",
    # ``bench()`` stays at tokenplan.api.bench.bench: the name ``tokenplan.bench`` is the
    # subpackage, which the import system binds as the package attribute once it loads.
    # ``bench_async`` and ``generate_async`` are for a running event loop (Jupyter: ``await``).
    "BenchRequest": "tokenplan.api.bench",
    "TokenplanError": "tokenplan.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    """Load a public API name from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tokenplan' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
