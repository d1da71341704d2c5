"""The error-band table's data file (``catalog/error_bands.json``): :func:`table_to_json` writes
a :class:`~tokenplan.calibration.bands.BandTable`, :func:`table_from_json` reads one back.

Layer: calibration (pure values; the file itself is read by ``tokenplan.api``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenplan.calibration.band_quantiles import RATE_TAIL, TTFT_MEAN_TAIL, TTFT_TAIL, Band
from tokenplan.calibration.bands import BandTable


def table_to_json(table: BandTable) -> dict[str, Any]:
    """The data file's JSON form."""

    def b(x: Band) -> dict[str, Any]:
        return {"q_low": x.low_q, "q_high": x.high_q, "n": x.n}

    return {
        "coverage": table.coverage,
        "about": (
            f"quantiles q_low/q_high ({1 - RATE_TAIL:.0%}/{RATE_TAIL:.0%} for rate, {1 - TTFT_TAIL:.0%}/{TTFT_TAIL:.0%} for ttft, "
            f"{1 - TTFT_MEAN_TAIL:.0%}/{TTFT_MEAN_TAIL:.0%} for ttft_mean: calibration.bands.configuration_tail; each "
            "configuration model × GPU × engine weighing as one) of log(predicted/measured) on residuals of "
            "configurations held out in cross-validation; metric 'rate' = output tok/s or 1/TPOT, 'ttft' = a run's "
            "median time to first token (and a plan's ttft_median_ms), 'ttft_mean' = a run's mean one (and a "
            "plan's ttft_ms); "
            "interval on a figure p = [p·exp(−q_high), p·exp(−q_low)] (TPOT, days, dollars: "
            "[p·exp(q_low), p·exp(q_high)]); regime keys engine/architecture/family/batch band/"
            "spec=S pooled up to spec=S and all, S = none, prior (acceptance length from the "
            "prior) or stated; rate and TTFT keys end in /queue=Q (Q = queue: requests wait in the server, offline "
            "or concurrency above the running batch, which is then the engine's limit; none) and pool up to "
            "queue=Q before all"
        ),
        "bands": {m: {k: b(v) for k, v in levels.items()} for m, levels in table.bands.items()},
        "extrapolation": {m: b(v) for m, v in table.extrapolation.items()},
        "max_batch_per_replica": dict(sorted(table.max_batch.items())),
        "gpus": list(table.gpus),
        "formats": list(table.formats),
        **({} if table.pipeline_engines is None else {"pipeline_engines": list(table.pipeline_engines)}),
        "checked_coverage": table.checked_coverage,
        "checked_coverage_by_file": table.coverage_by_file,
        "provenance": table.provenance,
    }


def table_from_json(data: Mapping[str, Any]) -> BandTable:
    """Parse the data file (raises KeyError/TypeError/ValueError on a malformed one)."""

    def b(x: Mapping[str, Any]) -> Band:
        return Band(float(x["q_low"]), float(x["q_high"]), int(x["n"]))

    return BandTable(
        coverage=float(data["coverage"]),
        bands={m: {k: b(v) for k, v in levels.items()} for m, levels in data["bands"].items()},
        extrapolation={m: b(v) for m, v in data.get("extrapolation", {}).items()},
        max_batch={k: float(v) for k, v in data.get("max_batch_per_replica", {}).items()},
        gpus=tuple(data.get("gpus", ())),
        formats=tuple(data.get("formats", ())),
        pipeline_engines=None if "pipeline_engines" not in data else tuple(data["pipeline_engines"]),
        checked_coverage={k: float(v) for k, v in data.get("checked_coverage", {}).items()},
        provenance=str(data.get("provenance", "")),
        coverage_by_file={
            f: {q: float(v) for q, v in by.items()} for f, by in data.get("checked_coverage_by_file", {}).items()
        },
    )
