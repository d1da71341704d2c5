"""``predict``: evaluate one configuration — the Python API behind ``tokenplan predict``."""

from __future__ import annotations

import dataclasses

from tokenplan.api._common import (
    PREDICT_FIGURES,
    PredictRequest,
    calibration_warnings,
    evaluate_request,
    evaluation_figures,
    figure_bands,
)
from tokenplan.api.results import EvaluationFigures, Prediction, Rejected
from tokenplan.catalog import load_gpu, load_model
from tokenplan.job.evaluate import Rejection
from tokenplan.results import Bands

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
    result = evaluate_request(req)
    if isinstance(result, Rejection):
        return Rejected(result.reason)
    figures = evaluation_figures(result)
    bands = figure_bands(figures, result, PREDICT_FIGURES)
    warnings = list(figures.warnings)
    outside = bands.error_band.outside_measured_regime if bands is not None and bands.error_band else None
    if outside:
        warnings.append(
            f"outside the measured regime ({outside}): the error band is widened to the leave-one-GPU-out one"
        )
    warnings += calibration_warnings(
        req.calibration,
        {
            "engine": req.engine,
            "gpu": load_gpu(req.gpu).key,
            "model": load_model(req.model).name,
            "concurrency": None if req.concurrency is None else req.concurrency / result.config.layout.dp,
            "isl_tokens": req.isl,
            "osl_tokens": req.osl,
        },
    )
    return _prediction(figures, bands, warnings)


def _prediction(figures: EvaluationFigures, bands: Bands | None, warnings: list[str]) -> Prediction:
    """The figures, with the final warnings and the bands, as a :class:`Prediction`."""
    values = {f.name: getattr(figures, f.name) for f in dataclasses.fields(figures)}
    return Prediction(**{**values, "warnings": tuple(warnings)}, bands=bands)
