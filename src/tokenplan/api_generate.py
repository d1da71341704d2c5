"""``generate``: regenerate or complete a dataset through OpenAI-compatible servers, exactly once.

Usage::

    from tokenplan.api_generate import GenerateRequest, generate

    result = generate(GenerateRequest(inputs=["data.jsonl"], out_dir="run", model="qwen",
                                      endpoints=["http://127.0.0.1:8000/v1"]))
    print(result.stored, result.errors, result.accounting_ok)

Rerunning the same request on the same ``out_dir`` continues where the last run stopped (see
:mod:`tokenplan.runner.rundir`). The API key is read from the environment variable named by
``api_key_env`` and is never logged or written.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tokenplan.client.endpoints import EndpointPool, PoolSettings
from tokenplan.client.retry import RetryPolicy, deadline_s
from tokenplan.errors import ConfigError, InputError, RunDirError
from tokenplan.runner.dispatch import Dispatcher, JobSettings, RunTally, summary_record
from tokenplan.runner.export import export_parquet
from tokenplan.runner.progress import Progress, Snapshot
from tokenplan.runner.requests import Sampling
from tokenplan.runner.rows import count_rows, expand_inputs, read_rows
from tokenplan.runner.rundir import RunDir, iter_records, shard_paths

DEFAULT_CONCURRENCY = 64  # per endpoint, when neither --concurrency nor a plan gives one


class GenerateRequest(BaseModel):
    """Everything ``generate`` needs; validated once (see :meth:`build`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inputs: list[str] = Field(min_length=1)
    out_dir: Path
    endpoints: list[str] = Field(min_length=1)
    model: str = Field(min_length=1)
    mode: Literal["regenerate", "complete"] = "regenerate"
    concurrency: int | None = Field(default=None, ge=1, le=100_000)
    max_tokens: int = Field(default=4096, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=1)
    seed: int = 0
    thinking: Literal["on", "off"] | None = None
    on_length: Literal["keep", "drop", "retry"] = "keep"
    length_retries: int = Field(default=2, ge=0)
    n: int = Field(default=1, ge=1)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    plan: Path | None = None
    export: Path | None = None
    force: bool = False
    api_key_env: str = "OPENAI_API_KEY"
    stream: bool = False
    max_attempts: int = Field(default=6, ge=1)
    retry_base_delay_s: float = Field(default=1.0, ge=0)
    deadline_s: float | None = Field(default=None, gt=0)
    grace_s: float = Field(default=30.0, ge=0)
    shard_max_bytes: int = Field(default=256 * 2**20, ge=1)
    eject_after_failures: int = Field(default=5, ge=1)
    probe_interval_s: float = Field(default=5.0, gt=0)
    max_all_down_s: float = Field(default=600.0, gt=0)

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not an http(s) base URL such as http://127.0.0.1:8000/v1")
        return urls

    @classmethod
    def build(cls, **options: Any) -> GenerateRequest:
        """Validate ``options``.

        Raises:
            InputError: naming the first bad option, its value and what is allowed.
        """
        try:
            return cls(**options)
        except ValidationError as problem:
            error = problem.errors()[0]
            field_name = ".".join(str(p) for p in error["loc"]) or "request"
            raise InputError(field_name, error.get("input"), error["msg"]) from None


@dataclass(frozen=True, slots=True)
class PlanHint:
    """What ``generate`` reads from ``tokenplan plan --json``: ``recommended.*``."""

    concurrency_per_endpoint: int | None
    output_tok_s_total: float | None
    num_replicas: int | None


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


def read_plan(path: Path) -> tuple[PlanHint, list[str]]:
    """Read ``recommended`` from a ``tokenplan plan --json`` file; notes say what was missing.

    Raises:
        ConfigError: the file is missing or not a JSON object.
    """
    try:
        data = json.loads(path.read_text())
    except OSError as problem:
        raise ConfigError(str(path), "file", f"cannot read ({problem.strerror})") from None
    except ValueError as problem:
        raise ConfigError(str(path), "file", f"not JSON ({problem})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "file", "not a JSON object as printed by `tokenplan plan --json`")
    recommended = data.get("recommended")
    if not isinstance(recommended, dict):
        return PlanHint(None, None, None), [f"{path}: no 'recommended' section; using the defaults"]
    notes, values = [], {}
    for key, kind in (("concurrency_per_endpoint", int), ("output_tok_s_total", float), ("num_replicas", int)):
        value = recommended.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            values[key] = kind(value)
        else:
            values[key] = None
            notes.append(f"{path}: recommended.{key} is absent or not a positive number")
    return PlanHint(**values), notes


def job_identity(request: GenerateRequest, sampling: Sampling) -> dict[str, Any]:
    """The configuration a run directory is bound to (what changes the outputs)."""
    files = expand_inputs(request.inputs)
    return {"model": request.model, "mode": request.mode, "n": request.n, "on_length": request.on_length,
            "length_retries": request.length_retries, "sampling": sampling.as_record(),
            "inputs": [{"name": f.name, "size_bytes": f.stat().st_size} for f in files]}


def generate(request: GenerateRequest, on_progress: Callable[[Snapshot], None] | None = None) -> GenerateResult:
    """Run (or continue) the job; return when every unit is settled or the run was stopped.

    SIGINT/SIGTERM (when called from the main thread) stop sending, give in-flight requests
    ``grace_s`` seconds, flush and return with ``interrupted=True``; a second signal cancels at once.

    Raises:
        InputError: a bad input path or option.
        ConfigError: an unreadable plan file.
        RunDirError: ``out_dir`` holds another job (use ``force``), or is damaged.
        ServerError: no endpoint serves the model, a fatal answer (401/403/404), or every
            endpoint down for ``max_all_down_s``.
    """
    return asyncio.run(_generate(request, on_progress))


async def _generate(request: GenerateRequest, on_progress: Callable[[Snapshot], None] | None) -> GenerateResult:
    notes: list[str] = []
    hint = PlanHint(None, None, None)
    if request.plan is not None:
        hint, notes = read_plan(request.plan)
    concurrency = request.concurrency or hint.concurrency_per_endpoint or DEFAULT_CONCURRENCY
    if request.concurrency is None:
        source = "the plan" if hint.concurrency_per_endpoint else "the default"
        notes.append(f"concurrency {concurrency} per endpoint ({source})")
    sampling = Sampling(request.max_tokens, request.temperature, request.top_p, request.top_k, request.seed,
                        None if request.thinking is None else request.thinking == "on", request.extra_body)
    files = expand_inputs(request.inputs)
    rundir = RunDir.open(request.out_dir, job_identity(request, sampling), force=request.force,
                         shard_max_bytes=request.shard_max_bytes)
    pool = EndpointPool(request.endpoints, PoolSettings(concurrency, request.eject_after_failures,
                                                        request.probe_interval_s, request.max_all_down_s),
                        api_key=os.environ.get(request.api_key_env) or None)
    try:
        await pool.check_health(request.model)
        job = JobSettings(request.model, request.mode, request.n, request.on_length, request.length_retries,
                          sampling, request.stream, RetryPolicy(request.max_attempts, request.retry_base_delay_s),
                          request.deadline_s or deadline_s(request.max_tokens), request.grace_s)
        # Before the first unit finishes, the ETA assumes max_tokens per unit.
        progress = Progress(time.monotonic(), count_rows(files) * request.n, float(request.max_tokens),
                            done_before=len(rundir.done_ids), plan_output_tok_s=hint.output_tok_s_total)
        dispatcher = Dispatcher(job, pool, rundir, progress, on_progress)
        stop = asyncio.Event()
        with _stop_on_signals(stop):
            tally = await dispatcher.run(read_rows(files), stop)
    finally:
        await pool.aclose()
        rundir.close()
    return _finish(request, rundir.path, tally, progress, notes)


def _finish(request: GenerateRequest, run_dir: Path, tally: RunTally, progress: Progress,
            notes: list[str]) -> GenerateResult:
    counts = count_outcomes(run_dir)
    accounted = counts["stored"] + counts["skipped"] + counts["errors"]
    accounting_ok = not tally.stopped and accounted == tally.units_seen and counts["duplicates"] == 0
    if not tally.stopped and not accounting_ok:
        raise RunDirError(f"{run_dir}: accounting mismatch: {counts['stored']} stored + {counts['skipped']} "
                          f"skipped + {counts['errors']} errors = {accounted}, but the input has "
                          f"{tally.units_seen} units ({counts['duplicates']} duplicate records)")
    snapshot = progress.snapshot(time.monotonic(), {}, 0)
    summary = {"model": request.model, "units_total": tally.units_seen, **counts,
               "rejected_rows": tally.rejected_rows, "already_done": tally.already_done,
               "interrupted": tally.stopped, "elapsed_s": snapshot.elapsed_s,
               "output_tokens": snapshot.output_tokens, "output_tok_s": snapshot.output_tok_s_mean,
               "plan_output_tok_s": progress.plan_output_tok_s,
               "requests_per_s": len(tally.latency_s) / snapshot.elapsed_s, **summary_record(tally)}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    export_rows = None
    if request.export is not None and not tally.stopped:
        export_rows = export_parquet(run_dir, request.export)
    return GenerateResult(run_dir, tally.units_seen, counts["stored"], counts["skipped"], counts["errors"],
                          tally.rejected_rows, tally.already_done, counts["duplicates"], tally.stopped,
                          accounting_ok, summary, export_rows, notes)


def count_outcomes(run_dir: Path) -> dict[str, int]:
    """Distinct ids stored, skipped and failed in ``run_dir``, and records whose id was seen before.

    Read back from the files, independently of the run's own counters.
    """
    seen: set[str] = set()
    counts = {"stored": 0, "skipped": 0, "errors": 0, "duplicates": 0}
    files = [("stored", p) for p in shard_paths(run_dir / "shards")]
    files += [("skipped", run_dir / "skipped.jsonl"), ("errors", run_dir / "errors.jsonl")]
    for kind, path in files:
        if not path.exists():
            continue
        for _, record in iter_records(path):
            if record["id"] in seen:
                counts["duplicates"] += 1
                continue
            seen.add(record["id"])
            counts[kind] += 1
    return counts


class _stop_on_signals:
    """SIGINT/SIGTERM → ``stop``; a second signal cancels the running task (main thread only)."""

    def __init__(self, stop: asyncio.Event):
        self.stop = stop
        self.active = threading.current_thread() is threading.main_thread()

    def __enter__(self) -> None:
        if not self.active:
            return
        loop, task = asyncio.get_running_loop(), asyncio.current_task()

        def on_signal() -> None:
            if self.stop.is_set() and task is not None:
                task.cancel()
            self.stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)

    def __exit__(self, *exc: object) -> None:
        if self.active:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
