"""What ``generate`` returns (:class:`GenerateResult`) and the error of a failed ``--export``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenplan.errors import TokenplanError


class ExportError(TokenplanError):
    """``--export`` failed after the run; every record is still in the run directory."""


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """The outcome of one ``generate`` call.

    Counts are units (rows × samples); ``stored``/``skipped``/``errors`` are totals in the run
    directory after this run, ``already_done`` what earlier runs had finished.
    """

    run_dir: Path
    units_total: int
    stored: int
    skipped: int
    errors: int
    rejected_rows: int
    already_done: int
    duplicate_records: int
    interrupted: bool
    accounting_ok: bool
    summary: dict[str, Any]
    export_rows: int | None
    notes: list[str] = field(default_factory=list)
    export_error: str | None = None  # why --export failed at the end (the run itself is kept)
    blank_lines: int = 0  # blank or whitespace-only JSONL lines: not rows, counted here
    not_yet_sent: int = 0  # units of the input not settled when the run stopped (0 when it finished)

    def to_json(self) -> dict[str, Any]:
        """``generate --json``: the run's ``summary.json`` object (like every api result's ``to_json``)."""
        return self.summary
