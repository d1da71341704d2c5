"""One run of ``generate`` as the backends receive it (:class:`RunSpec`, with :class:`JobSettings`:
how each unit is generated, and :class:`ExportSpec`: what is exported at the end), what a backend
hands back (:class:`RunOutcome`, with the :class:`RunTally` of what it sent), and the two steps
every backend takes after opening the run directory (:func:`duplicate_notes`, :func:`start_progress`).

Its own module, below :mod:`tokenplan.runner.backend` (which picks a backend) and the backends
(:mod:`tokenplan.runner.local`, :mod:`tokenplan.runner.ray.backend`), so neither backend imports
the selector.
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tokenplan.client.endpoints import PoolSettings
from tokenplan.client.retry import RetryPolicy
from tokenplan.errors import InputError
from tokenplan.runner.input.files import count_rows_or_none, file_name
from tokenplan.runner.progress import Progress
from tokenplan.runner.requests import Mode, OnLength, Sampling
from tokenplan.runner.store.rundir import RunDir


@dataclass(frozen=True, slots=True)
class JobSettings:
    """How each unit is generated.

    Attributes:
        model: the model name the servers serve.
        mode: ``regenerate`` or ``complete``.
        n: samples per row.
        on_length, length_retries: the ``length`` finish policy.
        sampling: parameters sent with every request.
        stream: stream answers (measures TTFT; costs client CPU per token).
        retry: retry policy per request.
        deadline_s: limit on one request (seconds).
        grace_s: how long in-flight units may finish after a stop (seconds).
        max_answer_bytes: cap on one answer body (bytes); ``None``: 1 MiB + 1 KiB per max_tokens.
    """

    model: str
    mode: Mode
    n: int
    on_length: OnLength
    length_retries: int
    sampling: Sampling
    stream: bool
    retry: RetryPolicy
    deadline_s: float
    grace_s: float
    max_answer_bytes: int | None = None


@dataclass(slots=True)
class RunTally:
    """What this run did: units seen, already done, and latencies of its requests (seconds)."""

    units_seen: int = 0
    already_done: int = 0
    rejected_rows: int = 0
    stopped: bool = False
    latency_s: array = field(default_factory=lambda: array("d"))
    ttft_s: array = field(default_factory=lambda: array("d"))
    completion_tokens: array = field(default_factory=lambda: array("q"))


@dataclass(frozen=True, slots=True)
class ExportSpec:
    """``--export``: the file, its format (``parquet``, ``jsonl`` or ``openai-batch``) and which
    records to leave out (a length-cut turn; thinking cut before ``</think>``)."""

    path: Path
    format: str
    drop_length: bool = False
    require_think_close: bool = False

    @classmethod
    def of(
        cls, path: Path, fmt: str | None, drop_length: bool = False, require_think_close: bool = False
    ) -> ExportSpec:
        """The export to ``path`` in ``fmt``; without one, ``jsonl`` (a SpecForge training file)
        for a ``.jsonl`` path and ``parquet`` for a ``.parquet`` one or a name without a suffix.

        Raises:
            InputError: no ``fmt`` and another suffix (``x.csv`` was written as Parquet).
        """
        suffix = Path(path).suffix.lower()
        if fmt is None and suffix not in ("", ".jsonl", ".parquet"):
            raise InputError(
                "--export",
                str(path),
                "a .parquet or .jsonl file, or another name with --format parquet|jsonl|openai-batch",
            )
        fmt = fmt or ("jsonl" if suffix == ".jsonl" else "parquet")
        return cls(path, fmt, drop_length, require_think_close)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run, resolved from the request.

    Attributes:
        backend: ``local`` or ``ray``.
        out_dir: the run directory; ``identity`` the job it is bound to (its manifest), ``force``
            rebinds a directory that holds another job; ``shard_max_bytes`` the size of one shard (bytes);
            ``retry_skipped`` sends the units of ``skipped.jsonl`` again.
        files: the input files; ``limit`` the first N usable rows only; ``n`` samples per row.
        job: how each unit is generated.
        endpoints: API roots; ``pool`` their settings (the one concurrency limit); ``api_key`` or None.
        progress_every_s: a rolling ``summary.json`` every S seconds (None: none).
        plan_output_tok_s: the plan's output tok/s, for the progress display (None: no plan).
        actors, ray_address: the Ray backend's actor count and cluster (None: join or start one).
        export: what :func:`tokenplan.runner.finish.finish_run` exports at the end (None: nothing).
    """

    backend: Literal["local", "ray"]
    out_dir: Path
    identity: dict[str, Any]
    force: bool
    shard_max_bytes: int
    files: list[Path]
    limit: int | None
    n: int
    job: JobSettings
    endpoints: list[str]
    pool: PoolSettings
    api_key: str | None = field(repr=False)
    progress_every_s: float | None = None
    plan_output_tok_s: float | None = None
    actors: int = 2
    ray_address: str | None = None
    retry_skipped: bool = False
    export: ExportSpec | None = None


@dataclass(slots=True)
class RunOutcome:
    """What a backend did: the tally, the progress counters, blank input lines (not rows), notes
    (duplicate records dropped, the Ray side's events) and what the backend adds to
    ``summary.json`` after the export (``{"ray": ...}``; empty for the local backend)."""

    run_dir: Path
    tally: RunTally
    progress: Progress
    blank_lines: int
    notes: list[str] = field(default_factory=list)
    summary_extra: dict[str, Any] = field(default_factory=dict)
    # keys of ids stored before the run that no unit of its input asked for (IdSet.stored_outside_input;
    # empty for a stopped run, whose input was not read to the end)
    stored_outside_input: AbstractSet[int] = frozenset()
    invocation_id: str = ""  # RunDir.invocation_id: its line in invocations.jsonl and its checkpoint
    # this invocation's figures as the backend appended them (finish.close_invocation), or None
    invocation: dict[str, Any] | None = None


def duplicate_notes(rundir: RunDir) -> list[str]:
    """The note a reopened run directory earns when its scan dropped duplicate records."""
    if not rundir.stats.duplicate_ids:
        return []
    return [
        f"dropped {rundir.stats.duplicate_ids:,} duplicate records from {rundir.path} "
        "(the first record of each id is kept)"
    ]


def start_progress(spec: RunSpec, rundir: RunDir) -> Progress:
    """Progress against the input's rows (the first ``limit``) × n; before the first unit
    finishes, the ETA assumes max_tokens per unit. Rows are None when a file breaks part-way."""
    rows = count_rows_or_none(spec.files)
    if rows is not None and spec.limit is not None:
        rows = min(spec.limit, rows)
    return Progress(
        time.monotonic(),
        None if rows is None else rows * spec.n,
        float(spec.job.sampling.max_tokens),
        done_before=len(rundir.done_ids),
        plan_output_tok_s=spec.plan_output_tok_s,
        requests_in_flight=spec.pool.concurrency_per_endpoint * len(spec.endpoints),
    )


def job_identity(job: JobSettings, files: list[Path]) -> dict[str, Any]:
    """The configuration a run directory is bound to (its manifest's ``job``: what changes the
    outputs): the model, mode, samples per row, the ``length`` policy, the sampling as each record
    states it, and each input file's name, size (bytes) and content digest (SHA-256: an edit that
    keeps the size, ``prompt 5`` → ``PROMPT 5``, is another input; a rerun kept the stale answer).
    Hashing reads each file once more per run: ~1 s a GiB."""
    return {
        "model": job.model,
        "mode": job.mode,
        "n": job.n,
        "on_length": job.on_length,
        "length_retries": job.length_retries,
        "sampling": job.sampling.as_record(),
        "inputs": [
            {"name": file_name(Path(f.name)), "size_bytes": f.stat().st_size, "sha256": _sha256(f)} for f in files
        ],
    }


def _sha256(path: Path) -> str:
    """The SHA-256 of the file's bytes (hex)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
