"""Measured rows resolved to the cases ``validate`` and ``calibrate`` predict.

Names in the measurement rows are resolved through the same ``build_config`` as
``tokenplan predict``; rows that cannot be predicted are kept with their reason.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tokenplan.api._common import PredictRequest, build_config
from tokenplan.calibration.bands import model_family
from tokenplan.calibration.validate import Case
from tokenplan.catalog.length_sets import LengthShape, length_set
from tokenplan.errors import TokenplanError
from tokenplan.files.measurements import MeasurementFile
from tokenplan.job.workload import LengthDist, lognormal_with_mean
from tokenplan.measurement import Measurement, SkippedRow


def measurement_request(m: Measurement, calibration: str | None = None) -> PredictRequest:
    """The ``tokenplan predict`` request of a measured row (lengths must be known)."""
    return PredictRequest(
        model=m.model,
        gpu=m.gpu,
        num_gpus=m.num_gpus,
        tp=m.tp,
        pp=m.pp,
        ep=m.ep,
        attention_dp=m.attention_dp,
        weight_dtype=m.weight_dtype,
        kv_dtype=m.kv_dtype,
        isl=m.isl_tokens or 1.0,
        osl=m.osl_tokens or 1.0,
        concurrency=m.concurrency,
        spec=m.spec,
        engine=m.engine,
        calibration=calibration,
        max_running=m.max_running,
        memory_fraction=m.memory_fraction,
    )


def resolve_case(m: Measurement) -> Case | SkippedRow:
    """A measurement resolved to a Case, or the reason it cannot be predicted."""
    missing = [name for name, v in (("isl", m.isl_tokens), ("osl", m.osl_tokens)) if v is None]
    if missing:
        return SkippedRow(m.line, m.row_id, f"missing lengths ({', '.join(missing)})")
    assert m.isl_tokens is not None and m.osl_tokens is not None  # missing is empty
    req = measurement_request(m)
    try:
        config, model, gpu = build_config(req)
    except TokenplanError as exc:
        return SkippedRow(m.line, m.row_id, str(exc))
    per_replica = None if m.concurrency is None else m.concurrency / config.layout.dp
    shapes = length_set(m.length_set) if m.length_set else None
    if shapes is not None:
        isl, osl = set_lengths(m.isl_tokens, shapes.input), set_lengths(m.osl_tokens, shapes.output)
    else:
        low = m.length_low_fraction
        isl, osl = stated_lengths(m.isl_tokens, low), stated_lengths(m.osl_tokens, low)
    # The run served its requests, so its server was launched for at least the longest of them
    # (vLLM refuses to start for a max_model_len its KV cache cannot hold: the model's whole
    # context is only the default).
    config = replace(config, max_model_len=math.ceil(isl.max + osl.max))
    return Case(m, model, gpu, config, m.engine, gpu.architecture, model_family(m.model), isl, osl, per_replica)


def set_lengths(mean_tokens: float, shape: LengthShape) -> LengthDist:
    """The lengths of a named prompt set (``catalog/length_sets.yaml``) around a row's stated
    mean: a lognormal of the set's σ, capped at the set's cap, whose *capped* mean is the row's
    mean (the run's own mean stays the mean; the set gives only the spread). A mean at or above
    the cap cannot spread below it and stays fixed."""
    if shape.sigma == 0 or (shape.cap_tokens is not None and mean_tokens >= shape.cap_tokens):
        return LengthDist(mean_tokens)
    return lognormal_with_mean(mean_tokens, shape.sigma, shape.cap_tokens)


def stated_lengths(mean_tokens: float, low_fraction: float | None) -> LengthDist:
    """The length distribution a row states: fixed at its mean, or uniform on ``[f·L, L]`` with
    mean ``(1 + f)·L/2`` (InferenceX, ``f`` = 0.8) as a lognormal of the same mean and
    coefficient of variation ``(1 − f) / ((1 + f)·√3)`` (the uniform's sd ``(1 − f)·L/√12``
    over its mean; σ = √ln(1 + CV²)), capped at ``L``. For f = 0.8: CV 0.064, σ 0.064, and
    the running mean E[L²]/E[L] is 1.004 × the mean, as for the uniform itself."""
    if low_fraction is None or not 0 < low_fraction < 1:
        return LengthDist(mean_tokens)
    cv = (1 - low_fraction) / ((1 + low_fraction) * math.sqrt(3))
    top = 2 * mean_tokens / (1 + low_fraction)
    return LengthDist(mean_tokens, math.sqrt(math.log1p(cv * cv)), top)


def resolve_file(data: MeasurementFile) -> tuple[list[Case], list[SkippedRow]]:
    """Cases and skipped rows (malformed first, then unpredictable) of a read file."""
    cases: list[Case] = []
    skipped = list(data.skipped)
    for m in data.rows:
        r = resolve_case(m)
        if isinstance(r, SkippedRow):
            skipped.append(r)
        else:
            cases.append(r)
    return cases, skipped
