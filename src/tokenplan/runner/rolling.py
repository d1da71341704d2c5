"""Progress where nobody watches a terminal (Slurm, nohup): a rolling ``summary.json`` and log lines.

:func:`rolling_summary` wraps the progress callback so that, every ``every_s`` seconds, the run
directory's ``summary.json`` holds the counters so far (``"in_progress": true``), written beside
its name and renamed into place so a reader never sees half a file. :func:`progress_line` is the
one-line form the CLI logs at the same pace when stdout is not a terminal.
:func:`invocation_checkpoint` keeps the invocation's figures so far for the totals of a run whose
invocation is killed (:mod:`tokenplan.runner.store.invocations`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from tokenplan.results import RUN_SUMMARY_SCHEMA_VERSION
from tokenplan.runner.progress import Snapshot
from tokenplan.runner.store.invocations import CHECKPOINT_EVERY_S, write_checkpoint


def snapshot_record(s: Snapshot) -> dict:
    """The snapshot as the in-progress ``summary.json`` (counts in units, rates in tok/s)."""
    return {
        "schema_version": RUN_SUMMARY_SCHEMA_VERSION,
        "in_progress": True,
        "units_total": s.units_total,
        "done_before": s.done_before,
        "stored": s.stored,
        "skipped": s.skipped,
        "errors": s.errors,
        "rejected": s.rejected,
        "in_flight": sum(s.in_flight.values()),
        "output_tokens": s.output_tokens,
        "elapsed_s": round(s.elapsed_s, 3),
        "output_tok_s_window": round(s.output_tok_s_window, 3),
        "output_tok_s_mean": round(s.output_tok_s_mean, 3),
        "eta_s": None if s.eta_s is None else round(s.eta_s, 1),
    }


def rolling_summary(
    on_progress: Callable[[Snapshot], None] | None, run_dir: Path, every_s: float | None
) -> Callable[[Snapshot], None] | None:
    """``on_progress`` plus, when ``every_s`` is set, ``summary.json`` rewritten at most every
    ``every_s`` seconds (the first at the first snapshot)."""
    if every_s is None:
        return on_progress
    last = [float("-inf")]

    def callback(snapshot: Snapshot) -> None:
        if on_progress is not None:
            on_progress(snapshot)
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            _replace_summary(run_dir, snapshot_record(snapshot))

    return callback


def _replace_summary(run_dir: Path, record: dict) -> None:
    """Write ``record`` as ``summary.json``, beside its name first and renamed into place, so a
    reader never sees half a file."""
    tmp = run_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(record, indent=2))
    os.replace(tmp, run_dir / "summary.json")


def write_stopped_summary(run_dir: Path, snapshot: Snapshot, why: str) -> None:
    """``summary.json`` at a run's stop before its end (a server fault, a full disk): the counters
    at the stop, still ``"in_progress": true`` (not the run's figures: a rerun finishes it), and
    ``stopped`` saying why. Before, the file kept its last rolling snapshot, up to ``every_s`` old
    (``errors: 0`` beside eight rows in errors.jsonl, a break-it pass). A file that cannot be
    written is passed over: the stop's own message says why it stopped."""
    try:
        _replace_summary(run_dir, {**snapshot_record(snapshot), "stopped": why})
    except OSError:
        pass


def progress_line(s: Snapshot) -> str:
    """``done 249/400 (stored 249, skipped 0, errors 0) | 413 tok/s now, 410 mean | in flight 5 | ETA 0m01s``."""
    total = f"/{s.units_total:,}" if s.units_total is not None else ""
    eta = "—" if s.eta_s is None else f"{int(s.eta_s) // 60}m{int(s.eta_s) % 60:02d}s"
    # endpoints taken out after failing (EndpointPool: probed, and put back once they answer): a
    # new-user pass killed the only server and the log went on with "in flight 0" and no word
    down = len(s.in_flight) - s.healthy_endpoints
    failing = f" | {down:,} of {len(s.in_flight):,} endpoints failing, probed until they answer" if down > 0 else ""
    return (
        f"done {s.finished:,}{total} (stored {s.stored:,}, skipped {s.skipped:,}, errors {s.errors:,}, "
        f"rejected {s.rejected:,}) | {s.output_tok_s_window:,.0f} tok/s now, {s.output_tok_s_mean:,.0f} mean "
        f"| in flight {sum(s.in_flight.values()):,}{failing} | elapsed {s.elapsed_s:,.0f} s | ETA {eta}"
    )


def invocation_checkpoint(
    on_progress: Callable[[Snapshot], None] | None,
    run_dir: Path,
    invocation_id: str,
    every_s: float = CHECKPOINT_EVERY_S,
) -> Callable[[Snapshot], None]:
    """``on_progress`` plus, at most every ``every_s`` seconds once a request was answered, the
    invocation's figures so far (``invocation``, ``started_at``, ``elapsed_s``, ``requests``,
    ``output_tokens``, ``plan_output_tok_s``, ``requests_in_flight``) in its checkpoint (:func:`~tokenplan.runner.store.invocations.write_checkpoint`).
    A checkpoint that cannot be written is passed over: the records are what must not be lost,
    and their own writes stop the run on a full disk."""
    last = [float("-inf")]
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def callback(snapshot: Snapshot) -> None:
        if on_progress is not None:
            on_progress(snapshot)
        now = time.monotonic()
        if snapshot.requests and now - last[0] >= every_s:
            last[0] = now
            entry = {
                "invocation": invocation_id,
                "started_at": started_at,
                "elapsed_s": snapshot.elapsed_s,
                "requests": snapshot.requests,
                "output_tokens": snapshot.output_tokens,
                "plan_output_tok_s": snapshot.plan_output_tok_s,
                "requests_in_flight": snapshot.requests_in_flight,
            }
            try:
                write_checkpoint(run_dir, entry)
            except OSError:
                pass

    return callback
