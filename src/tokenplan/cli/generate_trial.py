"""``generate`` without a live display: ``--dry-run``'s report, and progress lines when stderr is
not a terminal (Slurm, nohup)."""

from __future__ import annotations

import json
import sys
import time

from rich.console import Console

from tokenplan.api.generate import GenerateRequest, Snapshot, dry_run_counts, progress_line
from tokenplan.report.generate import dry_run_record, dry_run_text


def console_is_terminal() -> bool:
    """Whether the live display can be drawn (stderr is a terminal)."""
    return Console(stderr=True).is_terminal


def log_every(every_s: float, console: Console):  # noqa: ANN202 - a progress callback
    """A progress callback that prints one line every ``every_s`` seconds (Slurm, nohup logs)."""
    last = [time.monotonic()]

    def log(snapshot: Snapshot) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            console.print(progress_line(snapshot), markup=False, highlight=False, soft_wrap=True)

    return log


def print_dry_run(request: GenerateRequest, json_out: bool) -> None:
    """``--dry-run``: the counts, the sampling the run would use, and the plan command for them."""
    counts, sampling, notes, warnings = dry_run_counts(request)
    record = dry_run_record(counts, sampling, request.server.model)
    for warning in warnings:  # as the run itself would say them first (its --json keeps stdout JSON)
        print(f"warning: {warning}", file=sys.stderr)
    if json_out:
        print(json.dumps(record.to_json(), indent=2))
        return
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(dry_run_text(record, request.job.n))
