"""``predict``: evaluate one configuration — the Python API behind ``tokenplan predict``."""

from __future__ import annotations

from tokenplan.api._common import (PREDICT_FIGURES, PredictRequest, attach_intervals, calibration_warnings,
                                   evaluate_request, evaluation_dict)
from tokenplan.catalog import load_gpu, load_model
from tokenplan.job.evaluate import Rejection

__all__ = ["PredictRequest", "predict"]


def predict(req: PredictRequest) -> dict:
    """Predict one configuration (see ``tokenplan predict``).

    Returns a dict with ``output_tok_s_total``, ``output_tok_s_per_gpu`` (tokens/s),
    ``max_concurrency`` (sequences, whole deployment), ``kv_bytes_per_token`` (whole model),
    ``state_bytes_per_sequence``, ``weight_bytes_per_gpu`` (bytes), ``step_time_ms``,
    ``tpot_ms``, ``ttft_ms``, ``bottleneck``, ``warnings`` and more; or, for a configuration
    that cannot run, ``{"rejected": reason}``.

    Raises:
        InputError, CatalogError, ConfigError: bad names or sizes.
    """
    result = evaluate_request(req)
    if isinstance(result, Rejection):
        return {"rejected": result.reason}
    out = attach_intervals(evaluation_dict(result), result, PREDICT_FIGURES)
    if out.get("error_band", {}).get("outside_measured_regime"):
        out["warnings"].append(f"outside the measured regime ({out['error_band']['outside_measured_regime']}): "
                               "the error band is widened to the leave-one-GPU-out one")
    out["warnings"] += calibration_warnings(req.calibration, {
        "engine": req.engine, "gpu": load_gpu(req.gpu).key, "model": load_model(req.model).name,
        "concurrency": None if req.concurrency is None else req.concurrency / result.config.layout.dp,
        "isl_tokens": req.isl, "osl_tokens": req.osl})
    return out
