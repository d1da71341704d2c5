"""A measured case's residuals under one efficiency table: what the held-out checks
(``calibration.heldout``) and the fold refits (``calibration.parallel``) collect, each tagged with
the regime and the configuration (model × GPU × engine) the error bands pool and fold by."""

from __future__ import annotations

import math

from tokenplan.calibration.bands import Residual, queue_regime, spec_regime, ttft_metric
from tokenplan.calibration.validate import Case, predict_case
from tokenplan.perf.efficiency import Efficiency


def case_residuals(case: Case, eff: Efficiency, source: str = "") -> list[Residual]:
    """The case's residuals: ``rate`` (log pred/meas of output tok/s, and −log pred/meas of
    TPOT) and ``ttft``, each with its measured ``quantity`` (``throughput``, ``tpot``, ``ttft``)
    and ``source`` (the file it came from, for the coverage per file); none where the
    configuration is rejected."""
    p = predict_case(case, eff)
    if p.rejected is not None:
        return []
    m = case.measurement
    triples = []
    if m.output_tok_s_per_gpu is not None:
        triples.append(("rate", "throughput", math.log(p.output_tok_s_per_gpu / m.output_tok_s_per_gpu)))
    if m.tpot_s is not None:
        triples.append(("rate", "tpot", -math.log(p.tpot_s / m.tpot_s)))
    if m.ttft_s is not None:
        triples.append((ttft_metric(m.latency_statistic), "ttft", math.log(p.ttft_s / m.ttft_s)))
    spec = spec_regime(case.config.spec)
    where, queue = "/".join(configuration(case)), queue_regime(case.concurrency_per_replica, p.batch)
    return [
        Residual(
            case.engine, case.architecture, case.family, m.gpu, p.batch, metric, r, spec, quantity, source, where, queue
        )
        for metric, quantity, r in triples
    ]


def configuration(case: Case) -> tuple[str, str, str]:
    """The configuration a row measures: (model, GPU, engine)."""
    m = case.measurement
    return m.model, m.gpu, case.engine
