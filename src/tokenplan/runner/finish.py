"""The end of a ``generate`` run, whichever backend sent it: count what the run directory holds,
check it against the input, write ``summary.json`` and, when asked, the export.

The counts are read back from the files (:func:`count_outcomes`), independently of the run's own
counters; the throughput and latency figures are the run's over all its invocations
(:mod:`tokenplan.runner.store.invocations`), this invocation's alone under ``this_invocation``; a run
that was not stopped must account for every unit of its input, else
:class:`~tokenplan.errors.RunDirError`. A failed export does not raise: the records stay in the run
directory and :attr:`GenerateResult.export_error` says what to do.
"""

from __future__ import annotations

import json
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenplan.errors import RunDirError, TokenplanError
from tokenplan.results import RUN_SUMMARY_SCHEMA_VERSION
from tokenplan.runner.input.rows import count_units, read_rows
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.progress import Progress
from tokenplan.runner.requests import work_units
from tokenplan.runner.spec import ExportSpec, RunOutcome, RunSpec, RunTally
from tokenplan.runner.store.appendlog import shard_paths, write_whole
from tokenplan.runner.store.export import empty_export_error, export_run, partial_path, remove_export
from tokenplan.runner.store.idset import id_key
from tokenplan.runner.store.invocations import record_invocation, run_totals
from tokenplan.runner.store.record_ids import repeated_keys, repeated_lines, scan_keys


class ExportError(TokenplanError):
    """``--export`` failed after the run; every record is still in the run directory."""


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """The outcome of one ``generate`` call.

    Counts are units (rows × samples); ``stored``/``skipped``/``errors`` are totals in the run
    directory after this run (read back from its files), ``already_done`` what earlier runs had finished.
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
    outside_input: int = 0  # records kept for units this input does not hold (an earlier input's)
    left_out_by_limit: int = 0  # units of the input past --limit: a trial run, never sent

    def to_json(self) -> dict[str, Any]:
        """``generate --json``: the run's ``summary.json`` object (like every api result's ``to_json``)."""
        return self.summary


def finish_run(spec: RunSpec, outcome: RunOutcome, notes: list[str]) -> GenerateResult:
    """Count, check, summarize and export ``spec.export`` (see the module docstring);
    ``outcome.summary_extra`` goes into ``summary.json`` last; the result's notes are ``notes``
    and the outcome's.

    Raises:
        RunDirError: a finished run whose records do not account for every unit of its input.
    """
    tally, run_dir, export = outcome.tally, outcome.run_dir, spec.export
    counts = count_outcomes(run_dir, outcome.stored_outside_input)
    accounted = counts["stored"] + counts["skipped"] + counts["errors"]
    accounting_ok = not tally.stopped and accounted == tally.units_seen and counts["duplicates"] == 0
    units_total = count_units(spec.files, spec.n, spec.limit, spec.job.mode) if tally.stopped else tally.units_seen
    if not tally.stopped and not accounting_ok:
        raise RunDirError(
            f"{run_dir}: accounting mismatch: {counts['stored']} stored + {counts['skipped']} "
            f"skipped + {counts['errors']} errors = {accounted}, but the input has "
            f"{tally.units_seen} units ({counts['duplicates']} duplicate records)"
        )
    # a stopped run's input was not read to its end, so records of units it no longer holds are not
    # told apart (outside_input is 0) and may make the stored count exceed the input: never below 0
    not_yet_sent = max(0, units_total - accounted)
    # a --limit trial: the units of the input it leaves out, said in the summary and the export's
    # name (a new-user pass: "units 3 = 3 stored … [ok]" and exported to the job's own file name)
    left_out = 0
    if spec.limit is not None and not tally.stopped:
        left_out = unsent_past_limit(spec, outcome.stored_outside_input)
    summary = _summary(spec, outcome, units_total, counts, not_yet_sent)
    summary |= {"limit": spec.limit, "left_out_by_limit": left_out}
    write_whole(run_dir / "summary.json", json.dumps(summary, indent=2).encode())
    export_rows, export_error = None, None
    if export is not None and not tally.stopped:
        # units waiting in errors.jsonl: the file holds part of the job, so it never takes the
        # name a pipeline waits for (partial_path); the complete export removes it
        partial = bool(counts["errors"] or left_out)
        target = partial_path(export.path) if partial else export.path
        try:
            export_rows = _export(replace(export, path=target), run_dir, summary)
            summary["export"]["partial"] = partial
            if not partial:
                remove_export(partial_path(export.path))
            if export_rows == 0 and export.format != "openai-batch":
                remove_export(target)  # an empty training file would train on nothing, silently
                export_error = empty_export_error(export.path, summary["export"], counts["stored"], run_dir)
                export_rows, summary["export"]["path"] = None, None  # nothing written: no "exported" line
            (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        except OSError as problem:  # checked up front, so rare (disk full, removed directory): keep the run
            why = problem.strerror or (str(problem).splitlines() or [type(problem).__name__])[0]
            export_error = (
                f"--export {str(export.path)!r} failed ({why}); every "
                f"record is kept in {run_dir}: rerun the same command to export again"
            )
    if outcome.summary_extra:
        summary.update(outcome.summary_extra)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return GenerateResult(
        run_dir=run_dir,
        units_total=units_total,
        stored=counts["stored"],
        skipped=counts["skipped"],
        errors=counts["errors"],
        rejected_rows=tally.rejected_rows,
        already_done=tally.already_done,
        duplicate_records=counts["duplicates"],
        interrupted=tally.stopped,
        accounting_ok=accounting_ok,
        summary=summary,
        export_rows=export_rows,
        notes=notes + outcome.notes,
        export_error=export_error,
        blank_lines=outcome.blank_lines,
        not_yet_sent=not_yet_sent,
        outside_input=counts["outside_input"],
        left_out_by_limit=left_out,
    )


def unsent_past_limit(spec: RunSpec, done_outside: AbstractSet[int]) -> int:
    """Units of the input past ``--limit`` that no record in the run directory holds: a trial's
    work left undone. ``done_outside``: the keys of ids done but outside the limited input
    (:meth:`~tokenplan.runner.store.idset.IdSet.stored_outside_input`); a unit past the limit that
    an earlier run stored is there, not unsent (a break-it pass: a ``--limit 3`` rerun of a finished
    10-row run said 7 units were left unsent and exported the 10 to the ``.partial`` name)."""
    assert spec.limit is not None
    usable, unsent = 0, 0
    for item in read_rows(spec.files, mode=spec.job.mode):
        if not isinstance(item, Row):
            continue
        usable += 1
        if usable > spec.limit:
            unsent += sum(id_key(unit.id) not in done_outside for unit in work_units(item, spec.n))
    return unsent


def invocation_figures(tally: RunTally, progress: Progress) -> dict[str, Any]:
    """This invocation's figures as ``invocations.jsonl`` and ``summary.json``'s ``this_invocation``
    hold them: sending time (s), output tokens, rates, the requests it kept in flight over all
    endpoints (``requests_in_flight``: concurrency per endpoint × endpoints, what ``calibrate
    --from-run`` takes as the run's concurrency) and :func:`summary_record`."""
    snapshot = progress.snapshot(time.monotonic(), {}, 0)
    return {
        "elapsed_s": snapshot.elapsed_s,
        "output_tokens": snapshot.output_tokens,
        "output_tok_s": snapshot.output_tok_s_mean,
        "requests_per_s": len(tally.latency_s) / snapshot.elapsed_s,
        "plan_output_tok_s": progress.plan_output_tok_s,  # its share of the plan, for run_totals
        "requests_in_flight": progress.requests_in_flight,
        **summary_record(tally),
    }


def close_invocation(
    run_dir: Path,
    invocation_id: str,
    tally: RunTally,
    progress: Progress,
    served: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Any]:
    """Append this invocation's line to ``invocations.jsonl`` (and remove its checkpoint) while the
    backend still holds the run directory's lock, however the run ended (finished, stopped, or a
    fatal error): a later invocation then never takes a live one's checkpoint for a killed one's.
    An invocation that sent nothing adds no line. Returns the figures (:func:`invocation_figures`),
    with ``endpoints`` from ``served`` (``EndpointPool.served``: URL → requests answered, failed).
    A line that cannot be written is left to the checkpoint, which the next open recovers."""
    this = invocation_figures(tally, progress)
    if served:  # which server did how much: a slow or failing one among several is seen here
        this["endpoints"] = [
            {"endpoint": url, "requests_answered": int(answered), "requests_failed": int(failed)}
            for url, (answered, failed) in served.items()
        ]
    if this["requests"]:
        finished_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            record_invocation(run_dir, {"invocation": invocation_id, "finished_at": finished_at, **this})
        except (OSError, TokenplanError):
            pass
    return this


def _summary(
    spec: RunSpec, outcome: RunOutcome, units_total: int, counts: dict[str, int], not_yet_sent: int
) -> dict[str, Any]:
    tally, progress = outcome.tally, outcome.progress
    # the backend appended this invocation's line before it let go of the directory
    this = outcome.invocation if outcome.invocation is not None else invocation_figures(tally, progress)
    totals = run_totals(outcome.run_dir)
    return {
        "schema_version": RUN_SUMMARY_SCHEMA_VERSION,
        "model": spec.job.model,
        "units_total": units_total,
        **counts,
        "not_yet_sent": not_yet_sent,
        "rejected_rows": tally.rejected_rows,
        "blank_lines": outcome.blank_lines,
        "already_done": tally.already_done,
        "interrupted": tally.stopped,
        **totals.as_summary(),
        # over every invocation, weighted by its sending time (run_totals); this one's where none sent
        "plan_output_tok_s": totals.plan_output_tok_s or progress.plan_output_tok_s,
        "this_invocation": this,
    }


def _export(export: ExportSpec, run_dir: Path, summary: dict[str, Any]) -> int:
    """Write the export in its format; the counts go into ``summary`` (and summary.json) as ``export``."""
    summary["export"] = export_run(
        run_dir,
        export.path,
        export.format,
        drop_length=export.drop_length,
        require_think_close=export.require_think_close,
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary["export"]["written"]


def count_outcomes(run_dir: Path, outside: AbstractSet[int] = frozenset()) -> dict[str, int]:
    """Distinct ids stored, skipped and failed in ``run_dir``, and records whose id was seen before.

    Read back from the files, independently of the run's own counters: each record's id from the
    start of its line, held as a 64-bit key (8 bytes per record, :mod:`tokenplan.runner.store.record_ids`);
    a repeated key counts as a duplicate only when the exact ids match. Distinct ids whose key is in
    ``outside`` (stored for units the run's input does not hold,
    :meth:`~tokenplan.runner.store.idset.IdSet.stored_outside_input`) are counted apart, as
    ``outside_input``, and left out of ``stored`` and ``skipped``.
    """
    files = [("stored", p) for p in shard_paths(run_dir / "shards")]
    files += [
        (kind, path)
        for kind, path in (("skipped", run_dir / "skipped.jsonl"), ("errors", run_dir / "errors.jsonl"))
        if path.exists()
    ]
    paths = [path for _, path in files]
    keys, per_file = scan_keys(paths)
    outside_per_file = [0] * len(paths)
    if outside:  # each distinct outside id once, in the first file that holds it (as the repeats count)
        start, counted = 0, set[int]()
        for i, records in enumerate(per_file):
            here = {k for k in keys[start : start + records] if k in outside} - counted
            outside_per_file[i], start = len(here), start + records
            counted |= here
    _, suspects = repeated_keys(keys)
    del keys
    repeats = repeated_lines(paths, suspects) if suspects else [set() for _ in paths]
    counts = {"stored": 0, "skipped": 0, "errors": 0, "duplicates": 0, "outside_input": 0}
    for (kind, _), records, lines, apart in zip(files, per_file, repeats, outside_per_file):
        counts[kind] += records - len(lines) - apart
        counts["duplicates"] += len(lines)
        counts["outside_input"] += apart
    return counts


def summary_record(tally: RunTally) -> dict[str, Any]:
    """Latency percentiles (ms) and completion-length histogram of this run's requests."""
    from tokenplan.client.metrics import distribution

    e2e, ttft = distribution(tally.latency_s), distribution(tally.ttft_s)
    edges = [0, 16, 64, 256, 1024, 4096, 16384, 65536, 2**62]
    counts = [0] * (len(edges) - 1)
    for tokens in tally.completion_tokens:  # bin i holds edges[i] <= tokens < edges[i + 1]
        counts[min(max(bisect_right(edges, tokens) - 1, 0), len(counts) - 1)] += 1
    return {
        "requests": len(tally.latency_s),
        "latency_e2e": e2e.to_dict_ms() if e2e else None,
        "latency_ttft": ttft.to_dict_ms() if ttft else None,
        "completion_tokens_histogram": [
            {"from_tokens": lo, "below_tokens": hi if hi < 2**62 else None, "requests": int(c)}
            for lo, hi, c in zip(edges, edges[1:], counts)
        ],
    }
