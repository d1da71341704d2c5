"""What ``tokenplan generate`` shows: the live display while it runs, the closing summary, and
``--dry-run``'s counts. Reads the runner's :class:`~tokenplan.runner.progress.Snapshot` and the
result and counts ``tokenplan.api.generate`` returns (``GenerateResult``, ``dry_run_counts``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table

from tokenplan.results import JsonResult
from tokenplan.run_summary import ExportCounts, RunSummary

if TYPE_CHECKING:
    from tokenplan.runner.progress import Snapshot


def duration_text(seconds: float | None) -> str:
    """``3725`` → ``1h02m``, ``75`` → ``1m15s``; "—" when unknown."""
    if seconds is None:
        return "—"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def progress_table(s: Snapshot) -> Table:
    """The live display: rows, tok/s against the plan, ETA, errors, in-flight per endpoint."""
    table = Table(show_header=False, box=None, pad_edge=False)
    total = f"/{s.units_total:,}" if s.units_total is not None else ""
    table.add_row(
        "done",
        f"{s.finished:,}{total}  (stored {s.stored:,}, skipped {s.skipped:,}, "
        f"errors {s.errors:,}, rejected {s.rejected:,}, before this run {s.done_before:,})",
    )
    plan = f"   plan {s.plan_output_tok_s:,.0f}" if s.plan_output_tok_s else ""
    table.add_row("output tok/s", f"{s.output_tok_s_window:,.0f} now, {s.output_tok_s_mean:,.0f} mean{plan}")
    table.add_row("elapsed / ETA", f"{duration_text(s.elapsed_s)} / {duration_text(s.eta_s)}")
    flight = ", ".join(f"{url} {count}" for url, count in s.in_flight.items())
    table.add_row("in flight", f"{flight}  ({s.healthy_endpoints} healthy)")
    for line in s.workers:
        table.add_row("", line)
    return table


def summary_text(result) -> str:  # noqa: ANN001 - a tokenplan.api.generate.GenerateResult
    """The closing summary of a ``GenerateResult``: accounting, throughput and latency."""
    s = RunSummary.from_json(result.summary, "summary.json")
    if result.interrupted:
        check = "incomplete (interrupted)"
    elif not result.accounting_ok:
        check = "MISMATCH"
    elif result.units_total == 0:  # an input with no rows: nothing was done (the command exits 2)
        check = "no rows"
    elif result.errors:  # accounted for, but not done: a rerun sends them again
        check = f"incomplete: {result.errors:,} in errors.jsonl"
    elif result.left_out_by_limit:  # a trial: the job is not done
        check = f"ok as a trial: --limit {result.summary.get('limit')} leaves {result.left_out_by_limit:,} units of the input unsent"
    else:
        check = "ok"
    lines = [
        f"run dir       {result.run_dir}",
        f"units         {result.units_total:,} = {result.stored:,} stored + {result.skipped:,} skipped "
        f"+ {result.errors:,} errors"
        + (f" + {result.not_yet_sent:,} not yet sent" if result.interrupted else "")
        + f"  [{check}]",
        f"rejected rows {result.rejected_rows:,} (see rejects.jsonl)"
        + (f", blank lines {result.blank_lines:,} (not rows)" if result.blank_lines else "")
        + f"   done before this run {result.already_done:,}",
        f"throughput    {s.output_tok_s:,.1f} output tok/s, {s.requests_per_s or 0.0:,.2f} req/s over "
        f"{s.elapsed_s:,.1f} s"
        + (f"  (plan: {s.plan_output_tok_s:,.0f} tok/s)" if s.plan_output_tok_s else "")
        + _earlier(result.summary),
    ]
    e2e = s.latency_e2e
    if e2e:
        lines.append(
            f"latency E2E   p50 {e2e.p50_ms:,.0f} ms  p90 {e2e.p90_ms or 0.0:,.0f} ms  "
            f"p99 {e2e.p99_ms:,.0f} ms  ({e2e.count or 0:,} request{'' if e2e.count == 1 else 's'}"
            # percentiles do not add up over invocations: summary.json keeps the latest one's
            + (", the latest invocation's" if (result.summary.get("invocations") or 0) > 1 else "")
            + ")"
        )
    ttft, runs = s.latency_ttft, result.summary.get("invocations") or 0  # TTFT: where answers stream (--stream)
    if ttft:
        lines.append(
            f"latency TTFT  p50 {ttft.p50_ms:,.0f} ms  p90 {ttft.p90_ms or 0.0:,.0f} ms  p99 {ttft.p99_ms:,.0f} ms"
            + (
                f"  ({ttft.count:,} streamed" + (", the latest invocation's" if runs > 1 else "") + ")"
                if ttft.count
                else ""
            )
        )
    if result.outside_input:
        lines.append(
            f"kept apart    {result.outside_input:,} records in the run directory are for units this input "
            "does not hold (an earlier input's, or past --limit): not counted above"
            + ("; the export holds them too" if result.export_rows is not None else "")
        )
    if result.export_rows is not None:
        lines.append(
            _export_line(result.export_rows, s.export or ExportCounts(), result.errors, result.left_out_by_limit)
        )
    if result.interrupted:
        lines.append("interrupted: rerun the same command to resume")
    return "\n".join(lines)


def _earlier(summary: dict) -> str:
    """Say so where this invocation sent nothing (a rerun that only exports): the throughput and
    latency shown are then the earlier invocations' (summary.json is the run's over all of them)."""
    now = summary.get("this_invocation")
    if not isinstance(now, dict) or now.get("requests") != 0:
        return ""
    runs = summary.get("invocations")
    earlier = "invocation" if runs == 1 else "invocations"
    return f"  (the run's {runs} earlier {earlier}; this one sent nothing)" if runs else ""


def _export_line(rows: int, export: ExportCounts, errors: int = 0, past_limit: int = 0) -> str:
    """``exported N rows to FILE`` and what ``--export`` left out (summary.json's ``export``
    counts): the rows of a training file's companion counted apart (``+ U to FILE``), and an
    export of a run with ``errors`` units left, or ``past_limit`` units past ``--limit``, written
    to its ``.partial`` name, said so."""
    left_out = [f"{n:,} {label}" for n, label in export.left_out()]
    main = rows - export.unvalidated
    where = f" to {export.path}" if export.path else ""
    calls = f"; {export.tool_calls:,} answered with a tool call (kept as tool_calls)" if export.tool_calls else ""
    side = (
        f" + {export.unvalidated:,} to {export.unvalidated_path} (turns SpecForge's validator refuses by "
        f"design: tool turns, a blank turn, two turns of one role in a row, a blank id; its trainer reads them)"
        if export.unvalidated
        else ""
    )
    bare = (
        f"; {export.no_reasoning:,} with a turn without reasoning (SpecForge's validator refuses them "
        "under --expect-reasoning; leave that flag out for this file)"
        if export.no_reasoning
        else ""
    )
    asked = "".join(Path(export.path or "").name.rsplit(".partial", 1))  # partial_path's inverse
    one = errors == 1
    partial = (
        f"; partial: {errors:,} unit{'' if one else 's'} wait{'s' if one else ''} in errors.jsonl, so not "
        f"{asked}: the rerun that settles {'it' if one else 'them'} writes {asked} and removes this file"
        if export.partial and errors
        else f"; partial: a --limit trial ({past_limit:,} units of the input unsent), so not {asked}: the run "
        f"without --limit writes {asked} and removes this file"
        if export.partial and past_limit
        else ""
    )
    return (
        f"exported      {main:,} rows{where}"
        + side
        + (f" ({', '.join(left_out)})" if left_out else "")
        + calls
        + bare
        + partial
    )


@dataclass(frozen=True)
class DryRun(JsonResult):
    """``generate --dry-run``: rows (usable, rejected), units (rows × samples), requests, the
    prompts' token statistics (mean and longest in tokens, σ of ln; None without a tokenizer), the
    tokenizer, the sampling the run would use and the ``tokenplan plan`` command for the job.
    ``--json`` prints :meth:`to_json` (keys = field names)."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    rows: int
    rejected_rows: int
    units: int
    requests: int
    prompt_tokens_mean: float | None
    prompt_tokens_sigma: float | None
    prompt_tokens_max: int | None
    tokenizer: str | None
    sampling: dict[str, Any]
    plan_command: str
    rejects: tuple[str, ...] = ()  # the first rows set aside: "file line N: reason"


def dry_run_record(counts, sampling, model: str | None = None) -> DryRun:  # noqa: ANN001 - dry_run_counts' first two
    """``--dry-run``'s :class:`DryRun` from the counts, the sampling and the served ``model`` (the
    plan command names it: without it ``plan`` plans its default model). Where each request asks
    for the model's context less its prompt (``sampling.context_tokens``: no cap given, or a plan's
    at or above the context), the plan command's output cap is what the mean prompt (counted, else
    ``plan``'s default) leaves of the context, so that ``plan`` takes a mean prompt and output within
    it: a new-user pass copied ``--max-tokens 32768`` (the plan's cap) for a model of 2,048 tokens,
    and a break-it pass a cap of the whole context beside 812-token prompts; ``plan`` refused both."""
    cap, context = sampling.max_tokens, sampling.context_tokens
    if context is not None:  # each request asks the context less its prompt: plan at the mean prompt's room
        from tokenplan.job.workload import DEFAULT_ISL

        prompt = counts.prompt_tokens_mean if counts.prompt_tokens_mean is not None else DEFAULT_ISL.mean
        cap = max(1, min(cap, context - round(prompt)))
    return DryRun(
        rows=counts.rows,
        rejected_rows=counts.rejected_rows,
        units=counts.units,
        requests=counts.requests,
        prompt_tokens_mean=counts.prompt_tokens_mean,
        prompt_tokens_sigma=counts.prompt_tokens_sigma,
        prompt_tokens_max=counts.prompt_tokens_max,
        tokenizer=counts.tokenizer,
        sampling=sampling.as_record(),
        plan_command=counts.plan_command(cap, _osl_at_cap(cap), _plannable(model)),
        rejects=tuple(counts.rejects),
    )


def _plannable(model: str | None) -> str | None:
    """``model`` as ``plan --model`` takes it, or a placeholder where ``plan`` cannot read it (a
    served name that is neither a catalog model, a Hugging Face id of one, nor a local config)."""
    if model is None:
        return None
    from tokenplan.catalog import load_model
    from tokenplan.errors import TokenplanError

    try:
        load_model(model)
    except TokenplanError:
        return "CONFIG.json"  # the served name: plan needs the model's config.json
    return model


def _osl_at_cap(max_tokens: int) -> float | None:
    """Where ``max_tokens`` is at or below the mean output of ``plan``'s default job (2,500), which
    ``plan`` then refuses as a cap, the mean of that job's outputs cut at ``max_tokens`` (tokens:
    E[min(L, max_tokens)] of its lognormal); None above it."""
    from tokenplan.job.workload import DEFAULT_OSL, lognormal_with_mean

    if max_tokens > DEFAULT_OSL.mean:
        return None
    return lognormal_with_mean(DEFAULT_OSL.mean, DEFAULT_OSL.sigma, DEFAULT_OSL.cap).capped_moment(1, max_tokens)


def dry_run_text(record: DryRun, samples_per_row: int) -> str:
    """``--dry-run``'s report from :func:`dry_run_record`: the counts and the plan command."""
    lines = [
        f"rows          {record.rows:,} usable, {record.rejected_rows:,} rejected",
        f"units         {record.units:,} ({samples_per_row} per row)   requests {record.requests:,}",
    ]
    lines.extend(f"  rejected    {reject}" for reject in record.rejects)
    if record.rejected_rows > len(record.rejects) > 0:
        lines.append(
            f"  rejected    … and {record.rejected_rows - len(record.rejects):,} more (a run lists each in rejects.jsonl)"
        )
    if record.prompt_tokens_mean is None:
        lines.append("prompt tokens not counted (no tokenizer: --tokenizer PATH, or a local --model directory)")
    else:
        lines.append(
            f"prompt tokens mean {record.prompt_tokens_mean:,.0f}, σ {record.prompt_tokens_sigma or 0.0:.2f} "
            f"(ln), longest {record.prompt_tokens_max or 0:,}  (tokenizer {record.tokenizer})"
        )
    context = record.sampling.get("context_tokens")
    if context is not None and (record.prompt_tokens_max or 0) >= context:  # a break-it pass: said nothing
        lines.append(
            f"past context  the longest prompt, {record.prompt_tokens_max:,} tokens, fills the model's context of "
            f"{context:,} tokens: a server refuses such rows (a run skips them)"
        )
    lines.append(f"plan for them {record.plan_command}")
    if "--model CONFIG.json" in record.plan_command:
        lines.append("              (CONFIG.json: the served model's config.json; plan does not know its name)")
    return "\n".join(lines)
