"""``predict``: evaluate one configuration — the Python API behind ``tokenplan predict``."""

from __future__ import annotations

from dataclasses import replace

from tokenplan.api.bands import figure_bands
from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.evaluate import Rejection
from tokenplan.job.results import Prediction, Rejected, evaluation_figures
from tokenplan.planning.answer import PREDICT_FIGURES

OFFLINE_UNBANDED = frozenset({"ttft_ms", "ttft_median_ms"})


def predict(req: PredictRequest) -> Prediction | Rejected:
    """Predict one configuration (see ``tokenplan predict``).

    Returns a :class:`~tokenplan.job.results.Prediction`: ``output_tok_s_total``,
    ``output_tok_s_per_gpu`` (tokens/s), ``max_concurrency`` (sequences, whole deployment),
    ``kv_bytes_per_token`` (whole model), ``state_bytes_per_sequence``, ``weight_bytes_per_gpu``
    (bytes), ``step_time_ms``, ``tpot_ms``, ``ttft_ms`` (the mean over arrivals),
    ``ttft_median_ms`` (the median request's: ``job.steady.SteadyState.median_ttft_s``; both from
    when a slot frees, without the wait for it, where ``ttft_from_free_slot``: ``--concurrency max``),
    ``bottleneck``, ``warnings``, the error bands and more; or, for a configuration that cannot run, ``Rejected`` with the reason.

    Raises:
        InputError, CatalogError, ConfigError: bad names or sizes.
    """
    s = resolve(req)
    result = s.evaluate()
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
    if s.concurrency is None and bands is not None:
        # offline: every request is sent at once and waits for a slot for as long as the requests
        # queued ahead of it take, which predict is not told; the TTFT figures leave that wait out
        # (job.batching.steady_state), so the queued regime's bands, made of client TTFTs with
        # the wait in them, do not apply (a break-it pass: max showed 121 ms, 268 in flight the
        # same, 269 in flight 433 ms)
        bands = replace(bands, intervals={k: v for k, v in bands.intervals.items() if k not in OFFLINE_UNBANDED})
    domain = s.gpu.max_gpus_per_scaleup
    if req.tp > domain:  # plan keeps TP inside one domain (planning.space.layouts); predict costs it
        warnings.append(
            f"TP{req.tp} spans {-(-req.tp // domain)} scale-up domains ({domain} GPUs on {s.gpu.scaleup.name}): "
            "its all-reduces cross the scale-out NIC, and plan does not search such layouts (PP or DP across domains)"
        )
    point: dict[str, object] = {"engine": s.config.engine.name, "gpu": s.gpu.key, "architecture": s.gpu.architecture}
    point |= {"model": s.model.name, "concurrency": s.concurrency}
    warnings += s.profile.range_warnings({**point, "isl_tokens": req.isl, "osl_tokens": req.osl})
    source = s.profile.table.provenance
    efficiency = source if s.profile.path is None else f"calibration {s.profile.path}: {source}"
    return Prediction(
        **{**vars(figures), "warnings": tuple(warnings)},
        bands=bands,
        efficiency=efficiency,
        ttft_from_free_slot=s.concurrency is None,
    )
