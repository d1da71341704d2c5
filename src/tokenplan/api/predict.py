"""``predict``: evaluate one configuration — the Python API behind ``tokenplan predict``."""

from __future__ import annotations

import dataclasses

from tokenplan.api.bands import figure_bands
from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.api.results import EvaluationFigures, Prediction, Rejected
from tokenplan.job.evaluate import Evaluation, Rejection, kv_and_state
from tokenplan.planning.answer import PREDICT_FIGURES
from tokenplan.units import MS_PER_S

__all__ = ["Prediction", "PredictRequest", "Rejected", "predict"]


def predict(req: PredictRequest) -> Prediction | Rejected:
    """Predict one configuration (see ``tokenplan predict``).

    Returns a :class:`Prediction`: ``output_tok_s_total``, ``output_tok_s_per_gpu`` (tokens/s),
    ``max_concurrency`` (sequences, whole deployment), ``kv_bytes_per_token`` (whole model),
    ``state_bytes_per_sequence``, ``weight_bytes_per_gpu`` (bytes), ``step_time_ms``,
    ``tpot_ms``, ``ttft_ms``, ``bottleneck``, ``warnings``, the error bands and more; or, for a
    configuration that cannot run, :class:`Rejected` with the reason.

    Raises:
        InputError, CatalogError, ConfigError: bad names or sizes.
    """
    scenario = resolve(req)
    result = scenario.evaluate()
    if isinstance(result, Rejection):
        return Rejected(result.reason)
    figures = _figures(result)
    bands = figure_bands(figures, result, PREDICT_FIGURES)
    warnings = list(figures.warnings)
    outside = bands.error_band.outside_measured_regime if bands is not None and bands.error_band else None
    if outside:
        warnings.append(
            f"outside the measured regime ({outside}): the error band is widened to the leave-one-GPU-out one"
        )
    warnings += scenario.profile.range_warnings(
        {
            "engine": scenario.config.engine.name,
            "gpu": scenario.gpu.key,
            "model": scenario.model.name,
            "concurrency": scenario.concurrency,
            "isl_tokens": req.isl,
            "osl_tokens": req.osl,
        }
    )
    values = {f.name: getattr(figures, f.name) for f in dataclasses.fields(figures)}
    return Prediction(**{**values, "warnings": tuple(warnings)}, bands=bands)


def _figures(ev: Evaluation) -> EvaluationFigures:
    """The figures of an evaluation (units in the field names)."""
    s, m, lay = ev.steady, ev.memory, ev.config.layout
    kv_tok, state_seq = kv_and_state(ev.deployment.spec, ev.config.kv_dtype)
    return EvaluationFigures(
        layout=lay.describe(),
        tp=lay.tp,
        pp=lay.pp,
        ep=lay.ep,
        dp=lay.dp,
        attention_dp=lay.attention_dp,
        num_gpus=lay.num_gpus,
        weight_dtype=ev.config.weight_dtype.value,
        kv_dtype=ev.config.kv_dtype.value,
        engine=ev.config.engine.name,
        spec=ev.config.spec.describe() if ev.config.spec else "none",
        output_tok_s_total=ev.output_tok_s_total,
        output_tok_s_per_gpu=ev.output_tok_s_per_gpu,
        roofline_output_tok_s_total=s.roofline_output_tok_s * lay.dp,
        batch_per_replica=s.batch,
        max_concurrency=s.limits.limit * lay.dp,
        batch_limit_reason=s.batch_reason,
        kv_bytes_per_token=kv_tok,
        state_bytes_per_sequence=state_seq,
        weight_bytes_per_gpu=m.weight_bytes_per_gpu,
        kv_capacity_tokens=m.kv_capacity_tokens * lay.dp,
        state_slots=None if m.state_slots is None else m.state_slots * lay.dp,
        memory_fraction=ev.settings.memory_fraction,
        chunk_tokens=ev.settings.chunk_tokens,
        step_time_ms=s.decode_step.total_s * MS_PER_S,
        tpot_ms=s.tpot_s * MS_PER_S,
        ttft_ms=s.ttft_s * MS_PER_S,
        prefill_share=s.prefill_share,
        bottleneck=s.decode_step.bottleneck,
        warnings=tuple(ev.warnings),
    )
