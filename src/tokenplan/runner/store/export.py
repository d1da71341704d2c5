"""Export the stored records of a run directory: one Parquet file
(:mod:`tokenplan.runner.store.export_parquet`), one SpecForge training JSONL, or one OpenAI Batch API
output file.

The training JSONL is what SpecForge's ``scripts/regenerate_train_data.py`` writes for a
successful row (https://github.com/sgl-project/SpecForge, read at commit a6b6b02, 2026-08-08):
the input row's own fields, ``id``, ``conversations`` of ``{role, content}`` with an assistant
turn's reasoning under ``reasoning_content`` (the name since SpecForge commit afa1f4fb,
2026-03-17; its ``ThinkingParser`` keeps only role, content, tool_calls, reasoning_content, name
and tool_call_id of a message), and ``status: "success"``, which
``scripts/validate_regenerated_data.py`` requires of every line. A record that cannot train is
left out and counted (:func:`training_problem`), as that script rejects the whole file at such a
line and ``regenerate_train_data.py`` writes such a row to its error or skipped file instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tokenplan.runner.store.appendlog import iter_records
from tokenplan.runner.store.export_parquet import export_parquet
from tokenplan.runner.store.record import OutputRecord, TurnRecord, TurnUsage, stored_records

THINK_MARKERS = ("<think>", "</think>")  # as SpecForge's scripts/conversation_validation.py, case-insensitive


@dataclass(slots=True)
class ExportCounts:
    """What a JSONL export wrote and left out (records, i.e. units); a record is counted under
    the first reason that applies, in this order.

    ``dropped_length``: records with a turn cut by ``max_tokens`` (``--drop-length``);
    ``dropped_think_open``: records whose thinking was cut before ``</think>``
    (``--require-think-close``);
    ``dropped_empty_answer``: training file only: an assistant turn with no answer text and no
    tool call (e.g. cut by ``max_tokens`` while still thinking: all reasoning, empty content);
    ``dropped_think_marker``: training file only: ``<think>`` or ``</think>`` left in an
    assistant turn's content or reasoning (a reasoning parser that did not split the answer);
    ``failed``: Batch output lines for skipped and failed units (``openai-batch`` only);
    ``unvalidated``: training file only: rows written to the companion file
    (:func:`unvalidated_path`) because SpecForge's validator refuses their turns by design
    (:func:`validator_unsupported`); they are counted in ``written`` too;
    ``tool_calls``: training file only: rows with a generated answer that calls a tool
    (``turns[].tool_calls``; not a call given in the input), in either file: with blank text in
    the companion, with text in the main file (the validator reads its text);
    ``no_reasoning``: training file only: rows of the main file with an assistant turn that has
    no ``reasoning_content`` (a model that skipped thinking, or a run without it), which SpecForge's
    validator refuses under ``--expect-reasoning`` (``validate_regenerated_data.py``: "assistant
    message N has empty reasoning_content"); counted in ``written`` too.
    """

    written: int = 0
    dropped_length: int = 0
    dropped_think_open: int = 0
    dropped_empty_answer: int = 0
    dropped_think_marker: int = 0
    failed: int = 0
    unvalidated: int = 0
    no_reasoning: int = 0
    tool_calls: int = 0

    def as_record(self) -> dict[str, int]:
        """The counts as stored in ``summary.json`` under ``export``."""
        return {
            "written": self.written,
            "dropped_length": self.dropped_length,
            "dropped_think_open": self.dropped_think_open,
            "dropped_empty_answer": self.dropped_empty_answer,
            "dropped_think_marker": self.dropped_think_marker,
            "failed": self.failed,
            "unvalidated": self.unvalidated,
            "no_reasoning": self.no_reasoning,
            "tool_calls": self.tool_calls,
        }


def specforge_line(record: OutputRecord) -> dict[str, Any]:
    """One training row in the shape SpecForge's ``scripts/regenerate_train_data.py`` writes for
    a successful row (see the module docstring): the input row's own fields, then ``id``, the
    ``conversations`` as stored (``{role, content}``, an assistant turn's reasoning under
    ``reasoning_content``, tool fields ``tool_calls``, ``tool_call_id``, ``name`` kept) and
    ``status: "success"``. ``id``, ``conversations`` and ``status`` win over input fields of those
    names (an input that was itself a SpecForge output carries its old ``status``)."""
    conversations = [dict(message) for message in record.conversations]
    return {**record.fields, "id": record.id, "conversations": conversations, "status": "success"}


def training_problem(line: dict[str, Any]) -> str | None:
    """Why a training line cannot train a drafter, or None: ``empty_answer`` (an assistant turn
    whose content is empty or blank and that calls no tool; SpecForge's validator requires
    non-empty content, ``scripts/conversation_validation.py``) or ``think_marker`` (``<think>`` or
    ``</think>``, any case, in an assistant's content or reasoning_content; its regenerate script
    skips such a row, its validator rejects it under ``--strict-think-markers``)."""
    for message in line["conversations"]:
        if message.get("role") != "assistant":
            continue
        content, reasoning = message.get("content"), message.get("reasoning_content")
        if (not isinstance(content, str) or not content.strip()) and not message.get("tool_calls"):
            return "empty_answer"
        for text in (content, reasoning):
            if isinstance(text, str) and any(marker in text.lower() for marker in THINK_MARKERS):
                return "think_marker"
    return None


def validator_unsupported(line: dict[str, Any]) -> str | None:
    """Why SpecForge's ``scripts/validate_regenerated_data.py`` refuses a training row's turns by
    design although its trainer's parser reads them (``specforge/data/parse.py`` keeps ``tool``
    turns and ``tool_calls``), or None. The validator (``scripts/conversation_validation.py``,
    ``validate_conversation``, SpecForge 69e18e6, 2026-07-12) takes only ``system`` turns before
    the first user turn, then ``user`` and ``assistant`` turns alternating, each with non-empty
    content: ``tool_turns`` for a ``tool`` turn or an assistant turn that only calls a tool (blank
    text; one with text beside its calls passes: the validator reads role and content),
    ``blank_turn`` for a turn whose content is not text or is blank (an empty user prompt, a list
    of no parts: "message N content must be a non-empty string"), ``turn_order`` for a system
    turn after the first user turn or two turns of one role in a row; ``blank_id`` for an id of
    blanks only ("id must be a non-empty string"), which a run started before such ids counted as
    none still holds (a break-it pass: resumed across the change, they reached ``train.jsonl``)."""
    if not str(line.get("id", "")).strip():
        return "blank_id"
    expected, saw_user = "user", False
    for message in line["conversations"]:
        role, content = message.get("role"), message.get("content")
        if role == "tool" or (message.get("tool_calls") and not str(content or "").strip()):
            return "tool_turns"
        if not isinstance(content, str) or not content.strip():
            return "blank_turn"
        if role == "system" and not saw_user:
            continue
        if role != expected:
            return "turn_order"
        saw_user, expected = True, "assistant" if role == "user" else "user"
    return None


def _lacks_reasoning(line: dict[str, Any]) -> bool:
    """Whether an assistant turn of a training row has no reasoning text (``--expect-reasoning``
    refuses it: SpecForge ``scripts/validate_regenerated_data.py``)."""
    return any(
        m.get("role") == "assistant" and not str(m.get("reasoning_content") or "").strip()
        for m in line["conversations"]
    )


def unvalidated_path(out_path: Path) -> Path:
    """The companion of a training file ``train.jsonl``: ``train.unvalidated.jsonl``, holding the
    rows SpecForge's trainer reads but its validator refuses by design (:func:`validator_unsupported`),
    so that ``train.jsonl`` passes the validator whole."""
    return out_path.with_name(f"{out_path.stem}.unvalidated{out_path.suffix or '.jsonl'}")


def partial_path(out_path: Path) -> Path:
    """Where an export of a run with units left in ``errors.jsonl`` goes: ``train.partial.jsonl``
    beside ``train.jsonl`` (``run.partial.parquet``), so that the name a training pipeline waits
    for holds only a complete job; the complete export removes it (:func:`remove_export`)."""
    return out_path.with_name(f"{out_path.stem}.partial{out_path.suffix}")


def remove_export(out_path: Path) -> None:
    """Remove an export and its training companion (:func:`unvalidated_path`), where they exist.

    Raises:
        OSError: a file exists and cannot be removed.
    """
    out_path.unlink(missing_ok=True)
    unvalidated_path(out_path).unlink(missing_ok=True)


def empty_export_error(out_path: Path, export: dict[str, Any], stored: int, run_dir: Path) -> str:
    """The one line of an export that would hold no row: ``stored`` records, each left out for
    the reasons ``export`` counts (``export_run``'s record), and nothing written."""
    reasons = {
        "dropped_length": "cut by max_tokens (--drop-length)",
        "dropped_think_open": "thinking not closed (--require-think-close)",
        "dropped_empty_answer": "no answer text, e.g. cut by max_tokens while thinking",
        "dropped_think_marker": "a <think> marker left in",
    }
    why = "; ".join(f"{export[k]:,} {label}" for k, label in reasons.items() if export.get(k))
    return (
        f"--export {str(out_path)!r}: none of the {stored:,} stored records can go in it"
        + (f" ({why})" if why else "")
        + f", so nothing was written; the records are kept in {run_dir}"
    )


def batch_line(record: OutputRecord) -> dict[str, Any]:
    """One OpenAI Batch API output line for a stored record:
    ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`` as in
    https://platform.openai.com/docs/guides/batch and vLLM's ``BatchRequestOutput``
    (``vllm/entrypoints/openai/run_batch.py``). Ids derive from the unit id, so a rerun writes
    the same file. ``body`` is the chat completion of the unit's last turn."""
    line, digest = _batch_ids(record.id)
    turn = record.turns[-1] if record.turns else TurnRecord.from_json({})
    usage = turn.usage or TurnUsage(None, None)
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    body = {
        "id": f"chatcmpl-{digest[:24]}",
        "object": "chat.completion",
        "model": turn.model or record.model,
        "choices": [
            {
                "index": 0,
                "message": dict(record.last_assistant()),
                "logprobs": None,
                "finish_reason": turn.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": None if prompt is None or completion is None else prompt + completion,
        },
    }
    line["response"] = {"status_code": 200, "request_id": f"req_{digest[24:48]}", "body": body}
    return line


def failed_batch_line(record: dict[str, Any], status: int, error: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Batch API output line of a unit of ``skipped.jsonl`` or ``errors.jsonl``: refused by
    the server (``status`` 400/413, ``error`` None) as OpenAI reports a 4xx, with the server's
    answer; otherwise ``error`` (``{"code", "message"}``) and no response."""
    line, digest = _batch_ids(str(record["id"]))
    if error is None:
        line["response"] = {
            "status_code": status,
            "request_id": f"req_{digest[24:48]}",
            "body": {"error": {"message": record.get("detail"), "type": "invalid_request_error"}},
        }
    else:
        line["error"] = error
    return line


def _batch_ids(unit_id: str) -> tuple[dict[str, Any], str]:
    """An empty Batch output line for ``unit_id`` and the SHA-256 hex digest its ids derive from."""
    digest = hashlib.sha256(unit_id.encode()).hexdigest()
    return {"id": f"batch_req_{digest[:24]}", "custom_id": unit_id, "response": None, "error": None}, digest


def _kept(record: OutputRecord, counts: ExportCounts, drop_length: bool, require_think_close: bool) -> bool:
    if drop_length and any(t.length_flag for t in record.turns):
        counts.dropped_length += 1
        return False
    if require_think_close and any(t.reasoning_truncated for t in record.turns):
        counts.dropped_think_open += 1
        return False
    return True


def export_lines(
    run_dir: Path, out_path: Path, fmt: str, *, drop_length: bool = False, require_think_close: bool = False
) -> ExportCounts:
    """Write the run's records as one JSONL file: ``fmt`` ``jsonl`` (SpecForge training rows,
    :func:`specforge_line`; a record with a :func:`training_problem` is left out and counted) or
    ``openai-batch`` (:func:`batch_line`; skipped and failed units become lines with their status
    or error, so every ``custom_id`` of the input has a line).

    A ``jsonl`` training row whose turns SpecForge's validator refuses (tool turns, blank turns,
    :func:`validator_unsupported`) goes to the companion :func:`unvalidated_path` instead, which
    is written only when it holds a row, so that ``out_path`` passes the validator whole.

    Written beside ``out_path`` and renamed into place; on failure the partial files are removed
    and the error (``OSError``) raised.
    """
    counts = ExportCounts()
    tmp = out_path.with_name(out_path.name + ".tmp")
    side = unvalidated_path(out_path)
    side_tmp = side.with_name(side.name + ".tmp")
    try:
        with open(tmp, "wb") as fh, open(side_tmp, "wb") as side_fh:
            for record in stored_records(run_dir):
                if not _kept(record, counts, drop_length, require_think_close):
                    continue
                line = specforge_line(record) if fmt == "jsonl" else batch_line(record)
                problem = training_problem(line) if fmt == "jsonl" else None
                if problem is not None:
                    setattr(counts, f"dropped_{problem}", getattr(counts, f"dropped_{problem}") + 1)
                    continue
                if fmt == "jsonl" and validator_unsupported(line) is not None:
                    side_fh.write(orjson.dumps(line) + b"\n")
                    counts.unvalidated += 1
                else:
                    fh.write(orjson.dumps(line) + b"\n")
                    counts.no_reasoning += fmt == "jsonl" and _lacks_reasoning(line)
                counts.tool_calls += fmt == "jsonl" and any(turn.tool_calls for turn in record.turns)
                counts.written += 1
            if fmt == "openai-batch":
                counts.failed = _failed_lines(run_dir, fh)
        os.replace(tmp, out_path)
        if counts.unvalidated:
            os.replace(side_tmp, side)
        else:
            side_tmp.unlink()
            side.unlink(missing_ok=True)  # a companion left by an earlier export of the same run
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
            side_tmp.unlink(missing_ok=True)
        raise
    return counts


def _failed_lines(run_dir: Path, fh: Any) -> int:
    written = 0
    for name in ("skipped.jsonl", "errors.jsonl"):
        path = run_dir / name
        if not path.exists():
            continue
        for _, record in iter_records(path):
            status = record.get("status")
            if name == "skipped.jsonl" and status in (400, 413):
                line = failed_batch_line(record, status)
            else:
                line = failed_batch_line(
                    record,
                    -1,
                    {
                        "code": str(record.get("reason")),
                        "message": record.get("detail") or f"{record.get('reason')} (status {status})",
                    },
                )
            fh.write(orjson.dumps(line) + b"\n")
            written += 1
    return written


def export_run(
    run_dir: Path, out_path: Path, fmt: str, *, drop_length: bool = False, require_think_close: bool = False
) -> dict[str, Any]:
    """Write the run's records to ``out_path`` as ``fmt`` (``parquet``, ``jsonl``, ``openai-batch``);
    return the summary's ``export`` record (format, path, written and the counts left out).

    Raises:
        OSError: the file cannot be written (nothing partial is left).
    """
    if fmt == "parquet":
        return {"format": fmt, "path": str(out_path), "written": export_parquet(run_dir, out_path)}
    counts = export_lines(run_dir, out_path, fmt, drop_length=drop_length, require_think_close=require_think_close)
    side = {"unvalidated_path": str(unvalidated_path(out_path))} if counts.unvalidated else {}
    return {"format": fmt, "path": str(out_path), **counts.as_record(), **side}
