"""A job file's names checked where the file gives them, so that a bad one names the file.

``plan --job j.yaml`` reads the file (``tokenplan.files.job``: keys and value types), then its
names — GPU options, priced GPUs, the model, the engine and the ``--spec`` setting — are checked
here the way :func:`tokenplan.api.plan.plan` would check them, and a refusal becomes a
:class:`~tokenplan.errors.ConfigError` naming the file and the key (``j.yaml: engine: 'vlm' is not
in the catalog; did you mean vllm? …``). A key the command line overrides is not checked: the
option's value is the one planned, and ``plan`` judges it under the option's own name.
:func:`parse_gpu_option` (``8xb200``) lives here for both.

Layer: API edge, under the commands (resolves names once; the model is cached by name or path, so checking it here
does not load a config folder twice).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from tokenplan.catalog import gpu_key, load_engine, load_model
from tokenplan.errors import ConfigError, InputError
from tokenplan.files.bench_tau import resolve_spec
from tokenplan.perf.speculative import parse_spec
from tokenplan.units import MAX_GPUS

_GPU_OPTION = re.compile(r"^\s*(?:(\d+)\s*[x×]\s*)?([a-z0-9._\-]+)\s*$", re.IGNORECASE)
_BAD_COUNT = re.compile(r"^\s*[-+]?[\d.]+(?:e[-+]?\d+)?\s*[x×]", re.IGNORECASE)  # a count that is not a whole number


def check_job_names(path: str, fields: dict, overridden: Collection[str], isl_mean: float, osl_mean: float) -> None:
    """Check the names among ``fields`` (``JobFile.request_fields()`` of the file at ``path``)
    that the command line did not override (``overridden``: PlanRequest field names given as
    options). ``isl_mean``/``osl_mean`` (tokens): the planned job's, for a ``spec`` whose TAU
    names a bench file (read at the job's mean decode context).

    Raises:
        ConfigError: ``path``, the key as the file spells it (``gpus``, ``prices``, ``model``,
            ``engine``, ``spec``) and the refusal ``plan`` would print.
    """
    checks: list[tuple[str, Any, Callable[[Any], object]]] = []
    if "gpus" not in overridden:
        checks += [("gpus", g, lambda t: gpu_key(parse_gpu_option(t)[1])) for g in fields.get("gpus", ())]
    if "prices" not in overridden:
        # every name resolved (an unknown GPU refused as gpu_key says), two names of one GPU alike
        checks.append(("prices", fields.get("prices", {}), prices_by_key))
    if "model" in fields and "model" not in overridden:
        checks.append(("model", fields["model"], load_model))
    if "engine" in fields and "engine" not in overridden:
        checks.append(("engine", fields["engine"], load_engine))
    if "specs" in fields and "specs" not in overridden:
        checks += [("spec", s, lambda t: parse_spec(resolve_spec(t, isl_mean, osl_mean)[0])) for s in fields["specs"]]
    for key, value, check in checks:
        try:
            check(value)
        except InputError as exc:
            raise ConfigError(path, key, str(exc).removeprefix(f"{exc.field} ")) from None


def prices_by_key(prices: Mapping[str, float]) -> Mapping[str, float]:
    """``prices`` (GPU names as given → USD per GPU-hour) keyed by the catalog key each name
    means (:func:`tokenplan.catalog.gpu_key`: any case, an alias such as ``b200_sxm``).

    Raises:
        CatalogError: an unknown GPU name. InputError (field ``price``): two names of one GPU with
            different prices (``b200=5`` and ``b200_sxm=7``; the last one was taken silently).
    """
    out: dict[str, float] = {}
    named: dict[str, str] = {}
    for name, usd in prices.items():
        key = gpu_key(name)
        if key in out and out[key] != usd:
            raise InputError(
                "price",
                f"{name}={usd:g}",
                f"one price per GPU ({key} is already priced at {out[key]:g} as {named[key]})",
            )
        out[key], named[key] = usd, name
    return out


def parse_gpu_option(text: str) -> tuple[int | None, str]:
    """``8xb200`` → (8, "b200"); ``b200`` → (None, "b200"). Raises InputError."""
    m = _GPU_OPTION.match(text)
    bad_count = _BAD_COUNT.match(text) and (m is None or m.group(1) is None)  # -8xb200, 8.5xb200
    if not m or bad_count or (m.group(1) is not None and not 1 <= int(m.group(1)) <= MAX_GPUS):
        raise InputError(
            "gpu",
            text,
            f"COUNTxKEY with COUNT an integer from 1 to {MAX_GPUS:,} (e.g. 8xb200), or KEY alone (one node)",
        )
    return (int(m.group(1)) if m.group(1) else None), m.group(2).lower()
