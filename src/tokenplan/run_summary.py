"""A ``tokenplan generate`` run's ``summary.json`` as the report reads it: :class:`RunSummary`.

A frozen dataclass on :class:`~tokenplan.results.JsonResult`; its fields are the summary's keys
that ``tokenplan report`` and ``generate``'s closing lines draw (keys = field names). Reading
ignores the keys it does not declare (the histogram, this invocation's figures, the counts of
duplicates, …), so ``from_json`` is a typed view of the file, not its copy: the runner
(:mod:`tokenplan.runner.finish`) still writes the file, and ``to_json`` gives the declared keys
only. Units are in the names: ``_s`` seconds, ``_ms`` milliseconds, ``_tok_s`` tokens/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tokenplan.errors import RunDirError
from tokenplan.results import OMIT_NONE, RUN_SUMMARY_SCHEMA_VERSION, JsonResult


@dataclass(frozen=True, kw_only=True)
class LatencyMs(JsonResult):
    """A latency distribution over a run's requests (milliseconds) and how many requests it holds."""

    p50_ms: float
    p90_ms: float | None = None
    p99_ms: float
    mean_ms: float | None = None
    count: int | None = None


@dataclass(frozen=True, kw_only=True)
class ExportCounts(JsonResult):
    """What ``--export`` wrote and left out (rows): cut by ``max_tokens``, thinking not closed, no
    answer text, a ``<think>`` marker left in, failed or skipped lines, and the rows with tool turns
    written aside (``unvalidated``, to ``unvalidated_path``; ``tool_calls`` of them with a generated
    answer that calls a tool), and ``no_reasoning``: rows of the
    training file with an assistant turn without reasoning text (written; SpecForge's validator
    refuses them under ``--expect-reasoning``); ``path``: the file written, and ``partial``: units
    were left in ``errors.jsonl``, so it went to ``NAME.partial.SUFFIX``, not the name asked for."""

    written: int = 0
    dropped_length: int = 0
    dropped_think_open: int = 0
    dropped_empty_answer: int = 0
    dropped_think_marker: int = 0
    failed: int = 0
    unvalidated: int = 0
    unvalidated_path: str | None = None
    no_reasoning: int = 0
    tool_calls: int = 0
    path: str | None = None
    partial: bool = False

    def left_out(self) -> list[tuple[int, str]]:
        """The non-zero counts of rows the export left out, each with what it says, in that order."""
        labelled = (
            (self.dropped_length, "cut by max_tokens"),
            (self.dropped_think_open, "thinking not closed"),
            (self.dropped_empty_answer, "no answer text"),
            (self.dropped_think_marker, "<think> marker left in"),
            (self.failed, "failed/skipped lines"),
        )
        return [(n, label) for n, label in labelled if n]


@dataclass(frozen=True, kw_only=True)
class RunSummary(JsonResult):
    """A run's ``summary.json``: the model, the units (rows × samples) and how many were stored or
    failed, the run-wide time (s), output tokens and rates, the plan's tok/s where the run was
    started from a plan (None otherwise), latencies (None: no request finished) and the export's
    counts (None: no export). ``run_dir``: where it was read from (set by the reader, not in the
    file)."""

    SCHEMA_VERSION: ClassVar[int | None] = RUN_SUMMARY_SCHEMA_VERSION

    model: str
    units_total: float
    stored: float
    errors: float
    elapsed_s: float
    output_tokens: float
    output_tok_s: float
    requests_per_s: float | None = None
    plan_output_tok_s: float | None = None
    latency_e2e: LatencyMs | None = None
    latency_ttft: LatencyMs | None = None  # streamed answers only (--stream)
    export: ExportCounts | None = None
    run_dir: str | None = field(default=None, metadata=OMIT_NONE)


def check_finished(data: object, path: str) -> None:
    """Refuse a ``summary.json`` that a run still going (or stopped before its end) left in its
    rolling form (``"in_progress": true``, :mod:`tokenplan.runner.rolling`): its counters are not
    the run's figures.

    Raises:
        RunDirError: naming the file and what to do.
    """
    if isinstance(data, dict) and data.get("in_progress") is True:
        raise RunDirError(
            f"{path}: the run is going, or was stopped before it finished (summary.json holds its "
            "counters so far, in_progress: true); let it finish, or rerun the same generate command"
        )
