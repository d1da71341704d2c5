"""The parts of a saved bench JSON that ``tokenplan bench --from-json`` prints, as pydantic
models: each figure a finite number (NaN and ±Infinity, which Python's json reads, are refused),
each text a string, each table the shape the terminal walks. Other keys are left as they are.
(A plan file reads back into the plan's own types: :func:`tokenplan.files.reports.load_plan`.)

:func:`check_bench_shape` raises one
:class:`~tokenplan.errors.ConfigError` naming the key (``options[0].usd_interval.low``), the value
and what is allowed.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from tokenplan.errors import ConfigError, allowed_from_validation
from tokenplan.units import MS_PER_S

_Number = FiniteFloat | None  # a figure, or null where the plan has none
# a latency (s), or null where not measured: ≥ 0, and finite once printed in milliseconds
_Seconds = Annotated[FiniteFloat, Field(ge=0, le=sys.float_info.max / MS_PER_S)] | None


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class _Dist(_Shape):
    """A latency distribution in seconds (null or absent: not measured, e.g. TTFT without streaming)."""

    mean: _Seconds = None
    p50: _Seconds = None
    p90: _Seconds = None
    p99: _Seconds = None


class _Server(_Shape):
    """The server's own counters over a level (``/metrics``)."""

    output_tok_s: _Number = None
    running_mean: _Number = None
    waiting_mean: _Number = None
    kv_usage_max: _Number = None


class _BenchLevel(_Shape):
    """One concurrency level (tokenplan.bench.levels.level_dict writes every key; a figure left
    out or null prints as "–")."""

    concurrency: FiniteFloat
    achieved_concurrency: _Number = None
    requests: StrictInt
    errors: StrictInt
    request_throughput_per_s: _Number = None
    output_tok_s: _Number = None
    total_tok_s: _Number = None
    ttft_s: _Dist | None = None
    tpot_s: _Dist | None = None
    itl_s: _Dist | None = None
    e2e_s: _Dist | None = None
    server: _Server | None = None


class _Cap(_Shape):
    """Where the sweep saw the server's capacity (tokenplan.bench.server_info.concurrency_cap)."""

    source: StrictStr | None = None
    flattens_at_concurrency: _Number = None
    queue_grows_at_concurrency: _Number = None
    max_running_requests: _Number = None


class _Bench(_Shape):
    model: StrictStr
    endpoints: list[StrictStr] = []
    levels: list[_BenchLevel]
    cap: _Cap | None = None
    server: dict[str, Any] | None = None
    notes: list[StrictStr] | None = None


def _key(loc: tuple) -> str:
    """``("options", 0, "usd")`` → ``options[0].usd``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def _check(model: type[BaseModel], value: object, source: str, where: tuple = ()) -> None:
    try:
        model.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = where + tuple(err["loc"])
        if err["type"] == "missing":
            raise ConfigError(source, _key(loc), "missing") from None
        raise ConfigError(
            source, _key(loc), f"{err.get('input')!r} is not allowed (allowed: {allowed_from_validation(err)})"
        ) from None


def check_bench_shape(data: dict, source: str) -> None:
    """Check a saved bench JSON object ``data`` has every figure the terminal table prints, as
    ``tokenplan bench --save`` writes it; ``source`` names the file.

    Raises:
        ConfigError: a missing key, a figure that is not a finite number (or null where allowed).
    """
    _check(_Bench, data, source)
