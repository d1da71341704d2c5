"""The bench and run fits: a ``tokenplan bench`` sweep's levels, or a generate run's totals, become
measurements and then one fitted calibration profile (:func:`~tokenplan.calibration.run_profile.fit_profile`).

What a fit needs from above is taken as values and callables, so this module imports neither the
catalog nor the files: ``resolve`` turns a :class:`~tokenplan.measurement.Measurement` into a
:class:`~tokenplan.calibration.validate.Case` (``api.bench`` resolves the names with the same
configuration builder as ``tokenplan predict``), ``shipped`` gives the shipped efficiency factors of
an engine × architecture (the prior the fit updates).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenplan.bench_schema import FitSourceFile, open_loop_in_flight
from tokenplan.calibration.run_profile import FitOutcome, FitSource, fit_profile
from tokenplan.calibration.validate import Case
from tokenplan.errors import ConfigError, InputError, MissingOptionError
from tokenplan.measurement import Measurement
from tokenplan.perf.efficiency import Efficiency


@dataclass(frozen=True)
class Served:
    """What the measured server ran, by the names a :class:`Measurement` takes.

    Attributes:
        engine, model, gpu: the engine, the model (catalog name or config path) and the GPU key.
        num_gpus: every GPU behind the endpoints; tp, pp, ep: the layout per replica.
        attention_dp: attention data-parallel across the TP ranks.
        weight_dtype, kv_dtype: the served formats.
        max_running: the running-request cap per replica (None: the engine's).
    """

    engine: str
    model: str
    gpu: str
    num_gpus: int
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: bool = False
    weight_dtype: str = "bf16"
    kv_dtype: str = "auto"
    max_running: int | None = None

    def measurement(self, line: int, row_id: str, **figures: Any) -> Measurement:
        """A measurement of this server: ``figures`` are Measurement's measured fields."""
        return Measurement(
            line=line,
            row_id=row_id,
            engine=self.engine,
            model=self.model,
            gpu=self.gpu,
            num_gpus=self.num_gpus,
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            attention_dp=self.attention_dp,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            **figures,
        )


def bench_measurements(levels: Sequence[Mapping[str, Any]], served: Served) -> list[Measurement]:
    """One Measurement per bench level with answers: mean lengths from ``usage`` (tokens), mean
    TPOT and TTFT (seconds), output tok/s per GPU over ``served.num_gpus``. A level without
    answers or without token counts is left out."""
    out = []
    for i, lv in enumerate(levels):
        if not lv["requests"] or not lv.get("mean_output_tokens") or lv.get("mean_input_tokens") is None:
            continue
        out.append(
            served.measurement(
                i + 1,
                f"c{lv['concurrency']}",
                isl_tokens=lv["mean_input_tokens"],
                osl_tokens=lv["mean_output_tokens"],
                concurrency=_in_flight(lv),
                num_requests=float(lv["requests"]),
                output_tok_s_per_gpu=lv["output_tok_s"] / served.num_gpus,
                ttft_s=_mean(lv, "ttft_s"),
                tpot_s=_mean(lv, "tpot_s"),
                closed_loop=_closed_loop(lv),
            )
        )
    return out


def _mean(level: Mapping[str, Any], latency: str) -> float | None:
    """A level's mean ``latency`` (seconds), None where the file has none: the key absent, null
    or without a ``mean`` (a bench run without streaming, or a file edited by hand)."""
    stats = level.get(latency)
    return stats.get("mean") if isinstance(stats, Mapping) else None


def _in_flight(level: Mapping[str, Any]) -> float:
    """The requests a level held in flight: its ``concurrency`` for a closed loop; for tokenplan's
    own open-loop level (a finite ``request_rate``, whose ``concurrency`` is only the requests it
    sent), :func:`~tokenplan.bench_schema.open_loop_in_flight` (achieved, else the limit), as the
    bench chart places it. At least 1: a level whose arrivals left the server idle between
    requests (Little's law below 1) ran one at a time."""
    if _closed_loop(level) or "closed_loop" in level:  # a reader's level states its concurrency so
        return max(1.0, float(level["concurrency"]))
    held = open_loop_in_flight(level["concurrency"], level.get("achieved_concurrency"), level.get("max_concurrency"))
    return max(1.0, held)


def _closed_loop(level: Mapping[str, Any]) -> bool:
    """Whether a bench level kept its concurrency in flight from the start: the result files'
    readers say so (``closed_loop``); tokenplan's own levels name their ``request_rate`` (``inf``:
    closed loop)."""
    if "closed_loop" in level:
        return bool(level["closed_loop"])
    return str(level.get("request_rate", "inf")).lower() == "inf"


def sweep_cap(stated: int | None, cap: Mapping[str, Any] | None) -> int | None:
    """The running-request cap a sweep is fitted with: the one ``stated``, else the one the sweep
    observed (the bench JSON's ``cap.max_running_requests``), else None (the engine's)."""
    observed = (cap or {}).get("max_running_requests")
    return stated if stated is not None or not observed else int(observed)


def step_points(levels: Sequence[Mapping[str, Any]], max_running: int | None) -> list[tuple[float, float]]:
    """(running batch, mean TPOT in seconds) per level with answers: the batch is the server's mean
    running requests where ``/metrics`` gave it, else the achieved concurrency (where the file
    has none, the requests the level held in flight: :func:`_in_flight`) capped at ``max_running``."""
    points = []
    for lv in levels:
        tpot = _mean(lv, "tpot_s")
        if not lv["requests"] or tpot is None:
            continue
        running = (lv.get("server") or {}).get("running_mean")
        achieved = lv.get("achieved_concurrency")
        held = _in_flight(lv) if achieved is None else achieved
        batch = running if running else min(held, max_running or math.inf)
        points.append((float(batch), float(tpot)))
    return points


@dataclass(frozen=True)
class RunTotals:
    """A finished generate run's totals (``summary.json``), as read, before any check.

    Attributes:
        name: the run directory's name and the model it served (for the row id).
        where: the summary file's path (for messages).
        requests, output_tokens: answered requests and their completion tokens.
        output_tok_s: output tokens per second over the run.
        ttft_mean_ms: mean time to first token (milliseconds; None unless streamed).
        prompt_tokens: the records' mean ``usage.prompt_tokens`` (None: not stated).
    """

    name: str
    where: str
    requests: Any
    output_tokens: Any
    output_tok_s: Any
    ttft_mean_ms: float | None
    prompt_tokens: float | None


def run_measurement(run: RunTotals, served: Served, concurrency: float | None, isl: float | None) -> Measurement:
    """The one measured point of a generate run: output tok/s per GPU, mean output length (output
    tokens / requests), mean prompt length (``isl`` if > 0, else the records'), mean TTFT where
    streamed (seconds), at ``concurrency`` requests in flight in all.

    Raises:
        InputError: no concurrency, or no prompt length.
        ConfigError: totals that are not positive numbers (a run that finished no request).
    """
    if concurrency is None:
        raise MissingOptionError(
            ["--concurrency"],
            "the run's total requests in flight, as --concurrency N: its summary.json states none "
            "(a run of an earlier release, or one resumed at another concurrency)",
        )
    figures = (run.requests, run.output_tokens, run.output_tok_s)
    if not all(isinstance(v, (int, float)) and v > 0 for v in figures):
        raise ConfigError(
            run.where, "requests/output_tokens/output_tok_s", "positive numbers (a run that finished requests)"
        )
    prompt = isl if isl and isl > 0 else run.prompt_tokens
    if prompt is None:
        raise InputError("isl", None, "the mean prompt length (--isl), since the records carry no usage")
    return served.measurement(
        1,
        f"run:{run.name}",
        isl_tokens=float(prompt),
        osl_tokens=run.output_tokens / run.requests,
        concurrency=float(concurrency),
        num_requests=float(run.requests),
        output_tok_s_per_gpu=run.output_tok_s / served.num_gpus,
        ttft_s=None if run.ttft_mean_ms is None else run.ttft_mean_ms / 1e3,
    )


def fit_served(
    measurements: list[Measurement],
    served: Served,
    resolve: Callable[[Measurement], Case],
    shipped: Callable[[str, str], Efficiency],
    origin: tuple[str, str, tuple[FitSourceFile, ...] | None],
    points: list[tuple[float, float]],
) -> FitOutcome:
    """Fit the efficiency factors of ``served`` to ``measurements`` (an update of the shipped
    factors of its engine × architecture; see :mod:`tokenplan.calibration.from_runs`).

    Args:
        resolve: a measurement → its case (model spec, GPU, configuration).
        shipped: (engine, architecture) → the shipped factors, the fit's prior.
        origin: (source, the command that fits, one entry per file fitted or None).
        points: measured (batch, TPOT s) pairs for the step-time law (:func:`step_points`).

    Raises:
        InputError: no measurement to fit; what ``resolve`` raises.
    """
    if not measurements:
        raise InputError("levels", 0, "at least one level with answers to fit")
    cases = [resolve(m) for m in measurements]
    identity = {
        "num_gpus": served.num_gpus,
        "tp": served.tp,
        "pp": served.pp,
        "ep": served.ep,
        "weight_dtype": served.weight_dtype,
        "kv_dtype": served.kv_dtype,
        "max_running": served.max_running,
    }
    source, command, sources = origin
    where = FitSource(source, command, f"{served.model} on {served.num_gpus}× {served.gpu}", identity, sources)
    return fit_profile(cases, where, points, shipped(cases[0].engine, cases[0].architecture))


def fit_sweep(
    levels: Sequence[Mapping[str, Any]],
    served: Served,
    resolve: Callable[[Measurement], Case],
    shipped: Callable[[str, str], Efficiency],
    origin: tuple[str, str, tuple[FitSourceFile, ...] | None],
) -> FitOutcome:
    """Fit ``served`` to a bench sweep's levels: :func:`bench_measurements`, fitted by
    :func:`fit_served` with the step-time law's points (:func:`step_points` at ``served.max_running``)."""
    points = step_points(levels, served.max_running)
    return fit_served(bench_measurements(levels, served), served, resolve, shipped, origin, points)
