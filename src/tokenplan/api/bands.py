"""The shipped error-band table (``catalog/error_bands.json``) and :func:`figure_bands`, the
``bands`` callable ``planning.answer`` takes (the lookup: ``calibration.figure_bands``)."""

from __future__ import annotations

from collections.abc import Mapping

from tokenplan.calibration import figure_bands as lookup
from tokenplan.calibration.band_file import table_from_json
from tokenplan.calibration.bands import BandTable
from tokenplan.catalog import shipped_error_bands_json
from tokenplan.job.evaluate import Evaluation
from tokenplan.results import Bands


def error_bands() -> BandTable | None:
    """The shipped error-band table (``catalog/error_bands.json``), or None when none ships."""
    data = shipped_error_bands_json()
    return None if data is None else table_from_json(data)


def figure_bands(result: object, ev: Evaluation, figures: Mapping[str, tuple[str, bool]]) -> Bands | None:
    """The 80 % bands of ``result``'s ``figures`` from the shipped table; None without one."""
    table = error_bands()
    return None if table is None else lookup.figure_bands(table, result, ev, figures)


def pipeline_measured(engine: str) -> bool:
    """Whether some fit row runs ``engine`` (an engine name) with pipeline parallelism (the shipped
    table's ``pipeline_engines``; True where no table, or one that predates them, ships), so that
    the planner may recommend a PP layout on its figures (``planning.measured``)."""
    table = error_bands()
    return table is None or table.pipeline_engines is None or engine in table.pipeline_engines
