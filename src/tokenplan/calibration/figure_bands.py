"""The 80 % error bands attached to predicted figures: a band table looked up at a configuration's
regime (:mod:`tokenplan.calibration.bands`). ``tokenplan.api.bands`` passes the shipped table."""

from __future__ import annotations

from collections.abc import Mapping

from tokenplan.calibration.bands import BandTable, interval, model_family, spec_regime
from tokenplan.job.evaluate import Evaluation
from tokenplan.results import Bands, ErrorBand


def figure_bands(table: BandTable, result: object, ev: Evaluation, figures: Mapping[str, tuple[str, bool]]) -> Bands:
    """The 80 % bands of the figures of ``result`` named in ``figures`` (attributes of
    ``result``, each with its band metric and whether the figure scales as 1 / the metric's
    quantity: ``planning.answer.PLAN_FIGURES``; see ``calibration.bands``), and the regime of the
    first figure's band, the headline throughput's (and why the configuration lies outside the
    measured one, if it does). The regime includes
    the evaluation's speculative decoding: none, τ from the prior, or τ stated. TTFT and rate bands
    also split by whether requests queue in the server (``SteadyState.queued``: offline, or more
    in flight than the replica runs, the batch then set by the engine's limit), the rule the
    fit's residuals are keyed by (``calibration.bands.queue_regime``)."""
    d = ev.deployment
    where = (
        ev.config.engine.name,
        d.gpu.architecture,
        model_family(d.spec.name),
        d.gpu.key,
        ev.steady.batch,
        spec_regime(ev.config.spec),
    )
    queue = "queue" if ev.steady.queued else "none"
    fmt, pp = ev.config.weight_dtype.flops_class, ev.config.layout.pp
    intervals, first = {}, None
    for key, (metric, inverse) in figures.items():
        value = getattr(result, key)  # a misspelt figure fails here, never silently unbanded
        band = (
            None
            if value is None
            else interval(table, value, metric, inverse, *where, weight_format=fmt, queue=queue, pp=pp)
        )
        if band is not None:
            intervals[key] = band
            first = first or band  # the headline's (the figures come throughput first) names the regime
    regime = None if first is None else ErrorBand(first.regime, table.coverage, first.outside)
    return Bands(intervals, regime)
