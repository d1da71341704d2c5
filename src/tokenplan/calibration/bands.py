"""Error bands: 80 % intervals on every predicted figure, from cross-validated residuals.

A prediction's error depends on where it falls: the engine, the GPU architecture, the model
family and the batch per replica (small batches are latency-bound, large ones compute-bound).
``tokenplan calibrate`` collects held-out residuals (each row predicted by a fit that did not
see it: K-fold cross-validation whose folds hold out whole configurations, model × GPU ×
engine) and stores, per *regime*, a low and a high quantile of the log error ``r = log(predicted
/ measured)``. The residuals cluster by configuration (its bias is shared by all its rows), so the
quantiles weigh each configuration as one file measured it as one (:func:`configuration_band`, tails
at :func:`configuration_tail`, both in ``calibration.band_quantiles``) and a regime needs :data:`MIN_CONFIGURATIONS` configurations.
Residuals without a configuration use :func:`conformal_band`. A prediction ``p`` then carries the
interval ``[p·e^(−q_high), p·e^(−q_low)]``: the measured value of a configuration the fit did not see
lies inside it for ~80 % of held-out points.

Three metrics:

- ``rate``: the decode rate — output tok/s for throughput rows, and 1/TPOT for serving rows
  (at a fixed batch, output tok/s = batch / TPOT, so their log errors are the same quantity
  with opposite sign: a TPOT residual enters as ``−log(TPOT_pred / TPOT_meas)``). Bands on
  output tok/s, TPOT, job days and dollars all come from it (days and dollars scale as
  1 / rate);
- ``ttft``: time to first token, a run's median (InferenceX, dev.csv) and a plan's;
- ``ttft_mean``: a run's mean time to first token (serving-dev.csv, bench levels), which carries
  the run's opening wave (:func:`ttft_metric`).

A regime is also split by speculative decoding (:func:`spec_regime`): ``none``, ``prior`` (τ
from the acceptance prior of ``perf.speculative``, not measured: its error adds to the model's,
e.g. InferenceX's SGLang DeepSeek-R1 MTP rows on B200 are predicted 30–36 % too fast) and
``stated`` (τ given). Without the split, the residuals of prior-τ rows set the band of plans
with no speculative decoding.

TTFT and rate regimes are also split by :func:`queue_regime` (``/queue=queue``: requests wait in
the server, offline or above the running batch: the TTFT is then mostly the wait the planner
computes, and the rate runs at the batch the planner's engine limits set rather than at the
client's concurrency, so it carries the limits' error too; ``/queue=none``). Regimes are pooled
from the most specific level that holds at least ``MIN_POINTS`` residuals (and
``MIN_CONFIGURATIONS`` configurations; TTFT: ``TTFT_MIN_…``): ``engine/architecture/family/band/spec=S`` → ``engine/architecture/band/spec=S`` →
``engine/architecture/spec=S`` → ``engine/spec=S`` → ``spec=S`` (→ ``queue=Q``) → ``all``; a
stated τ, which no ground-truth row has, falls back to the ``none`` levels (:func:`lookup_keys`).
Older tables (keys without ``/spec=`` or ``/queue=``) are still read. A configuration outside
the measured regime (a GPU no fit row used, an engine × architecture × number format no fit row
ran, or a batch per replica above the largest of its engine and architecture in the fit data)
says so and takes the wider of its regime band and the ``extrapolation`` band, the quantiles
of leave-one-GPU-out residuals (each GPU predicted by a fit that never saw it).

Layer: calibration (pure values; the JSON file is read by ``tokenplan.catalog``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# The quantiles lived here before they had a module of their own; importers still take them from here.
from tokenplan.calibration.band_quantiles import (  # noqa: F401
    COVERAGE,
    RATE_TAIL,
    TTFT_MEAN_TAIL,
    TTFT_METRICS,
    TTFT_TAIL,
    Band,
    configuration_band,
    configuration_tail,
    conformal_band,
)
from tokenplan.job.steady import requests_queue
from tokenplan.results import Interval

if TYPE_CHECKING:
    from tokenplan.perf.speculative import SpecDecode

MIN_POINTS = 20  # residuals a regime needs before it gets its own band (of ≥ 20 points, the
#                  conformal bounds are the 2nd smallest and the 2nd largest or further in)
BATCH_BANDS: tuple[tuple[str, float], ...] = (("1-8", 8.0), ("9-64", 64.0), ("65-256", 256.0), (">256", math.inf))
METRICS = ("rate", "ttft", "ttft_mean")


def ttft_metric(statistic: str) -> str:
    """The band metric of a TTFT that summarises a run as ``statistic`` (``median`` or ``mean``,
    ``Measurement.latency_statistic``): ``ttft`` or ``ttft_mean``. A run's mean carries its
    opening wave (``job.timeline.run_mean_ttft_s``), a median does not, and their residuals
    center apart (serving-dev.csv's means −9 %, InferenceX's medians +4 % on one fit: pooled,
    the band held 66 % of InferenceX's). A plan's TTFT is the steady state's: band ``ttft``."""
    return "ttft_mean" if statistic == "mean" else "ttft"


_SIZE_SUFFIX = re.compile(r"-(\d+x)?\d+(\.\d+)?b(-.*)?$")


def model_family(model_key: str) -> str:
    """``llama-3.3-70b`` → ``llama-3.3``; ``qwen3-235b-a22b`` → ``qwen3``; ``deepseek-r1`` unchanged."""
    return _SIZE_SUFFIX.sub("", model_key)


def batch_band(batch: float) -> str:
    """The band of a batch per replica (sequences): ``1-8``, ``9-64``, ``65-256`` or ``>256``."""
    for name, top in BATCH_BANDS:
        if batch <= top:
            return name
    return BATCH_BANDS[-1][0]


SPEC_REGIMES = ("none", "prior", "stated")
QUEUE_REGIMES = ("none", "queue")


def queue_regime(concurrency: float | None, batch: float) -> str:
    """``queue`` where requests wait in the server for a slot of the running batch: offline
    (``concurrency`` None: every request submitted at once) or more requests in flight per
    replica than the ``batch`` it runs (``job.batching.steady_state``: the TTFT then adds the
    wait (concurrency − batch) / completion rate and every arrival is in a prefill wave);
    else ``none`` (TTFT is the request's own prefill, the decode step it joins and its share
    of the prefills ahead of it)."""
    return "queue" if requests_queue(concurrency, batch) else "none"


def spec_regime(spec: SpecDecode | None) -> str:
    """The speculative-decoding regime of a setting: ``none`` (no speculative decoding),
    ``prior`` (acceptance length τ from the prior, :data:`~tokenplan.perf.speculative.ACCEPTANCE_PRIOR_PER_TOKEN`)
    or ``stated`` (τ given: ``mtp:3:2.5``, or measured)."""
    if spec is None:
        return "none"
    return "prior" if spec.from_prior else "stated"


def _levels(engine: str, architecture: str, family: str, band: str, tail: str) -> tuple[str, ...]:
    """The pooling levels of one speculative-decoding regime (``tail``: ``/spec=…`` or ``""``)."""
    return (
        f"{engine}/{architecture}/{family}/{band}{tail}",
        f"{engine}/{architecture}/{band}{tail}",
        f"{engine}/{architecture}{tail}",
        f"{engine}{tail}",
    )


QUEUE_METRICS = (*TTFT_METRICS, "rate")  # metrics whose regimes split by queue_regime


def regime_keys(
    engine: str, architecture: str, family: str, batch: float, spec: str = "none", queue: str = ""
) -> tuple[str, ...]:
    """The pooling levels a residual of this configuration counts in, most specific first:
    ``sglang/blackwell/deepseek-r1/1-8/spec=prior`` … ``sglang/spec=prior``, ``spec=prior``,
    ``all``. ``spec`` is one of :data:`SPEC_REGIMES`; ``queue`` (:data:`QUEUE_METRICS`: one of
    :data:`QUEUE_REGIMES`, "" for none) adds ``/queue=Q`` to every level but ``all``
    (``sglang/blackwell/1-8/spec=none/queue=queue`` … ``spec=none/queue=queue``) and pools
    ``queue=Q`` over the speculative-decoding regimes before ``all``: a queued TTFT is mostly
    the wait the planner computes, and a queued rate runs at the planner's batch limit, whatever
    the decode."""
    tail = f"/spec={spec}" + (f"/queue={queue}" if queue else "")
    pooled = (f"queue={queue}",) if queue else ()
    return (*_levels(engine, architecture, family, batch_band(batch), tail), tail[1:], *pooled, "all")


def lookup_keys(
    engine: str, architecture: str, family: str, batch: float, spec: str = "none", queue: str = ""
) -> tuple[str, ...]:
    """Where a prediction looks for its band, most specific first: its own regime's levels
    (:func:`regime_keys`, without ``all``); for a ``stated`` τ, then the ``none`` levels (no row
    of the ground truth states τ: with τ given, what is left is the error of the step time,
    which the non-speculative rows measure; an error in the stated τ itself is not covered),
    then the queue regime pooled over speculative decoding (``queue=Q``); with a ``queue``
    regime, then the same without it (tables written before the queue split);
    then the levels without a speculative-decoding dimension that tables written before it have
    (absent from newer tables); then ``all``."""
    specs = (spec, "none") if spec == "stated" else (spec,)
    queues = (queue, "") if queue else ("",)
    own: list[str] = []
    for q in queues:  # a queue regime's pooled key (``queue=Q``) after its speculative-decoding levels
        pooled = (f"queue={q}",) if q else ()  # regime_keys' pooled level of this queue regime
        own += [
            k for s in specs for k in regime_keys(engine, architecture, family, batch, s, q)[:-1] if k not in pooled
        ]
        own += pooled
    return (*dict.fromkeys(own), *_levels(engine, architecture, family, batch_band(batch), ""), "all")


@dataclass(frozen=True, slots=True)
class Residual:
    """One held-out residual: where it falls and ``log(predicted / measured)`` of its metric
    (``rate``: output tok/s or 1/TPOT; ``ttft``); ``quantity``: what was measured
    (``throughput``, ``tpot``, ``ttft``), ``source``: the file, for coverage per file, and
    ``configuration``: ``model/gpu/engine``."""

    engine: str
    architecture: str
    family: str
    gpu: str
    batch: float
    metric: str
    log_error: float
    spec: str = "none"
    quantity: str = ""
    source: str = ""
    configuration: str = ""
    queue: str = "none"


TTFT_MIN_CONFIGURATIONS, TTFT_MIN_POINTS = 3, 10  # TTFT bias follows engine × GPU (queues, waves): with 5,
# InferenceX SGLang's −0.80 (B200) … +0.46 (MI355X) pooled
MIN_CONFIGURATIONS = 5  # configurations (model × GPU × engine) a regime needs for a band of its own


def quantile_bands(
    residuals: list[Residual], coverage: float = COVERAGE, min_points: int = MIN_POINTS
) -> dict[str, dict[str, Band]]:
    """metric → regime key → Band, for every pooling level that holds ``min_points`` residuals
    and, where the residuals name their configuration, :data:`MIN_CONFIGURATIONS`
    configurations (TTFT: at most :data:`TTFT_MIN_POINTS` residuals and
    :data:`TTFT_MIN_CONFIGURATIONS` configurations; its regimes also split by
    :func:`queue_regime`); then the band weighs each configuration as one file measured it alike
    (``configuration@source``: DeepSeek-R1/B200/TRT-LLM has 246 InferenceX rate residuals at p10–p90
    −0.19…+0.38 and 29 serving-dev ones at −0.93…+0.74; one weight per configuration gave the sweep
    89 % of it, and the bands held 99–100 % of InferenceX's and 50–68 % of serving-dev's rows).
    Residuals without a configuration (made before it was recorded) pool as split-conformal
    order statistics of the residuals (:func:`conformal_band`)."""
    minimum = {m: (min_points, MIN_CONFIGURATIONS) for m in METRICS}
    for m in TTFT_METRICS:
        minimum[m] = (min(min_points, TTFT_MIN_POINTS), TTFT_MIN_CONFIGURATIONS)
    groups: dict[tuple[str, str], list[Residual]] = {}
    for r in residuals:
        queue = r.queue if r.metric in QUEUE_METRICS else ""
        for key in regime_keys(r.engine, r.architecture, r.family, r.batch, r.spec, queue):
            groups.setdefault((r.metric, key), []).append(r)
    out: dict[str, dict[str, Band]] = {m: {} for m in METRICS}
    for (metric, key), rs in sorted(groups.items()):
        values, (points, needed) = [r.log_error for r in rs], minimum[metric]
        if all(r.configuration for r in rs):
            units = [f"{r.configuration}@{r.source}" for r in rs]  # each file's measurements of it weigh 1
            if (len(values) >= points and len({r.configuration for r in rs}) >= needed) or key == "all":
                out[metric][key] = configuration_band(values, units, coverage, metric)
        elif len(values) >= points or key == "all":
            out[metric][key] = conformal_band(values, coverage)
    return out


@dataclass(frozen=True)
class BandTable:
    """The shipped error bands (see the module docstring).

    Attributes:
        coverage: the nominal coverage (0.8).
        bands: metric → regime key → Band.
        extrapolation: metric → Band of leave-one-GPU-out residuals (outside the regime).
        max_batch: ``engine/architecture`` → the largest batch per replica in the fit data.
        gpus: the GPU keys of the fit data.
        checked_coverage: metric → share of held-out points inside their band in a nested
            cross-validation (bands from the other folds only).
        provenance: the command and data that made the table.
        coverage_by_file: file → measured quantity (``throughput``, ``tpot``, ``ttft``) → the
            same nested coverage, per file.
        formats: ``engine/architecture/format`` (the weights' GEMM class: ``bf16``, ``fp8``,
            ``fp4``) of the fit rows: the kernels the data measured.
        pipeline_engines: the engines some fit row runs with pipeline parallelism (None: a table
            written before the field, which checks no layout).
    """

    coverage: float
    bands: dict[str, dict[str, Band]]
    extrapolation: dict[str, Band] = field(default_factory=dict)
    max_batch: dict[str, float] = field(default_factory=dict)
    gpus: tuple[str, ...] = ()
    checked_coverage: dict[str, float] = field(default_factory=dict)
    provenance: str = ""
    coverage_by_file: dict[str, dict[str, float]] = field(default_factory=dict)
    formats: tuple[str, ...] = ()
    pipeline_engines: tuple[str, ...] | None = None


def outside_reason(
    table: BandTable,
    engine: str,
    architecture: str,
    gpu: str,
    batch: float,
    weight_format: str = "",
    pp: int = 1,
) -> str | None:
    """Why a configuration lies outside the measured regime, or None. ``weight_format``: the
    weights' GEMM class (``bf16``, ``fp8``, ``fp4``; "" when not known): an engine × format no
    fit row ran on the architecture has no measured kernel speed there (its kernel factor is
    the engine's or the default's, and the kernel itself may differ: FP4 on Hopper runs a
    weight-only Marlin kernel, on Blackwell the FP4 tensor cores). ``pp``: pipeline stages; an
    engine no fit row runs with PP > 1 (``pipeline_engines``; None in a table that predates it)
    has no measured micro-batch schedule (vLLM's scheduler puts every request not in flight into
    the next step, unbalanced, vllm#41682 and #57433; the model takes PP balanced micro-batches)."""
    reasons = []
    if pp > 1 and table.pipeline_engines is not None and engine not in table.pipeline_engines:
        reasons.append(f"no fit row runs {engine} with pipeline parallelism (PP{pp})")
    if table.gpus and gpu not in table.gpus:
        reasons.append(f"GPU {gpu} is in no fit row")
    if weight_format and table.formats and f"{engine}/{architecture}/{weight_format}" not in table.formats:
        reasons.append(f"no fit row runs {engine} on {architecture} with {weight_format} weights")
    top = table.max_batch.get(f"{engine}/{architecture}")
    if top is None:
        reasons.append(f"no fit row runs {engine} on {architecture}")
    elif batch > top * 1.05:
        reasons.append(
            f"batch per replica {batch:.0f} is above the largest measured for {engine} on {architecture} ({top:.0f})"
        )
    return "; ".join(reasons) or None


def band_for(
    table: BandTable,
    metric: str,
    engine: str,
    architecture: str,
    family: str,
    gpu: str,
    batch: float,
    spec: str = "none",
    weight_format: str = "",
    queue: str = "",
    pp: int = 1,
) -> tuple[Band, str, str | None]:
    """(band of ``log(pred/meas)``, its regime key, outside-regime reason or None); ``spec``:
    the speculative-decoding regime (:func:`spec_regime`), ``queue``: the queue regime
    (:func:`queue_regime`; used for :data:`QUEUE_METRICS` only), looked up as :func:`lookup_keys`
    says; ``pp``: pipeline stages (:func:`outside_reason`)."""
    levels = table.bands.get(metric, {})
    q = queue if metric in QUEUE_METRICS else ""
    key = next((k for k in lookup_keys(engine, architecture, family, batch, spec, q) if k in levels), "all")
    band = levels.get(key, Band(0.0, 0.0, 0))
    outside = outside_reason(table, engine, architecture, gpu, batch, weight_format, pp)
    wide = table.extrapolation.get(metric)
    if outside and wide is not None:
        band = Band(min(band.low_q, wide.low_q), max(band.high_q, wide.high_q), band.n)
    return band, key, outside


def interval(
    table: BandTable,
    value: float,
    metric: str,
    inverse: bool,
    engine: str,
    architecture: str,
    family: str,
    gpu: str,
    batch: float,
    spec: str = "none",
    weight_format: str = "",
    queue: str = "",
    pp: int = 1,
) -> Interval | None:
    """The interval on ``value`` (None where the table holds no residual of ``metric``).
    ``inverse``: the figure scales as 1 / the metric's quantity (TPOT, days and dollars
    against the decode rate), so the band flips. The interval always holds ``value``: where
    every held-out residual of the regime erred one way (both quantiles on one side of 0), it
    reaches from the figure to the far quantile, so it says how far off the figure may be, not
    a range the figure itself falls outside (this only widens it, so coverage does not drop).
    ``spec``: the speculative-decoding regime of the configuration (:func:`spec_regime`);
    ``weight_format``, ``pp``: as :func:`outside_reason`; ``queue``: as :func:`band_for`."""
    if not table.bands.get(metric):
        return None
    band, key, outside = band_for(
        table, metric, engine, architecture, family, gpu, batch, spec, weight_format, queue, pp
    )
    if inverse:
        low, high = value * math.exp(band.low_q), value * math.exp(band.high_q)
    else:
        low, high = value * math.exp(-band.high_q), value * math.exp(-band.low_q)
    return Interval(min(low, value), max(high, value), table.coverage, key, outside)


def covered(band: Band, log_error: float) -> bool:
    """Whether a residual lies inside its band."""
    return band.low_q <= log_error <= band.high_q
