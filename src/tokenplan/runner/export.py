"""Export the stored records of a run directory: one Parquet file (pyarrow imported here only), one
SpecForge training JSONL, or one OpenAI Batch API output file.

One Parquet row per stored unit: ``id``, ``source_id``, ``sample_index``, ``model``, the
``conversations`` (role, content, reasoning_content) and the per-turn facts (finish_reason,
token counts, endpoint, latency in seconds, attempts, seed). Written batch by batch with an
explicit schema, so memory stays bounded by ``batch_rows`` and every batch has the same types.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tokenplan.runner.appendlog import shard_paths
from tokenplan.runner.rundir import iter_records


def _schema():  # noqa: ANN202 - pyarrow is imported lazily
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("reasoning_content", pa.string())])
    turn = pa.struct([("finish_reason", pa.string()), ("length_flag", pa.bool_()),
                      ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
                      ("reasoning_tokens", pa.int64()), ("endpoint", pa.string()), ("latency_s", pa.float64()),
                      ("attempts", pa.int64()), ("seed", pa.int64())])
    return pa.schema([("id", pa.string()), ("source_id", pa.string()), ("sample_index", pa.int64()),
                      ("model", pa.string()), ("conversations", pa.list_(message)), ("turns", pa.list_(turn))])


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    turns = []
    for t in record.get("turns") or ():
        usage = t.get("usage") or {}
        turns.append({"finish_reason": t.get("finish_reason"), "length_flag": t.get("length_flag"),
                      "prompt_tokens": usage.get("prompt_tokens"),
                      "completion_tokens": usage.get("completion_tokens"),
                      "reasoning_tokens": usage.get("reasoning_tokens"), "endpoint": t.get("endpoint"),
                      "latency_s": t.get("latency_s"), "attempts": t.get("attempts"), "seed": t.get("seed")})
    return {"id": record["id"], "source_id": record.get("source_id"), "sample_index": record.get("sample_index"),
            "model": record.get("model"), "conversations": record.get("conversations"), "turns": turns}


def export_parquet(run_dir: Path, out_path: Path, *, batch_rows: int = 4096) -> int:
    """Write every stored record of ``run_dir`` to ``out_path``; return the rows written.

    The file is written beside its final name and renamed into place, so a reader never sees a
    partial file; on failure the partial file is removed and the error (``OSError``) raised.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    tmp = out_path.with_name(out_path.name + ".tmp")
    rows, batch = 0, []
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for shard in shard_paths(run_dir / "shards"):
                for _, record in iter_records(shard):
                    batch.append(_flat(record))
                    if len(batch) >= batch_rows:
                        writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                        rows, batch = rows + len(batch), []
            if batch:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                rows += len(batch)
        os.replace(tmp, out_path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # no half-written file left beside the target
        raise
    return rows


@dataclass(slots=True)
class ExportCounts:
    """What a JSONL export wrote and left out (records, i.e. units).

    ``dropped_length``: records with a turn cut by ``max_tokens`` (``--drop-length``);
    ``dropped_think_open``: records whose thinking was cut before ``</think>``
    (``--require-think-close``; counted here only when not already dropped for length);
    ``failed``: Batch output lines for skipped and failed units (``openai-batch`` only).
    """

    written: int = 0
    dropped_length: int = 0
    dropped_think_open: int = 0
    failed: int = 0

    def as_record(self) -> dict[str, int]:
        """The counts as stored in ``summary.json`` under ``export``."""
        return {"written": self.written, "dropped_length": self.dropped_length,
                "dropped_think_open": self.dropped_think_open, "failed": self.failed}


def specforge_line(record: dict[str, Any]) -> dict[str, Any]:
    """One training row in the shape SpecForge's ``scripts/regenerate_train_data.py`` writes
    (https://github.com/sgl-project/SpecForge): the input row's own fields, then ``id`` and the
    regenerated ``conversations`` of ``{"role", "content"}``, with an assistant turn's reasoning
    under ``thinking`` and tool fields (``tool_calls``, ``tool_call_id``, ``name``) kept."""
    conversations = []
    for message in record.get("conversations") or ():
        line = {k: v for k, v in message.items() if k != "reasoning_content"}
        if message.get("reasoning_content") is not None:
            line["thinking"] = message["reasoning_content"]
        conversations.append(line)
    return {**(record.get("fields") or {}), "id": record["id"], "conversations": conversations}


def batch_line(record: dict[str, Any], status: int = 200, error: dict[str, Any] | None = None) -> dict[str, Any]:
    """One OpenAI Batch API output line for a stored record (``status`` 200) or a unit that
    failed: ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``
    as in https://platform.openai.com/docs/guides/batch and vLLM's ``BatchRequestOutput``
    (``vllm/entrypoints/openai/run_batch.py``). Ids derive from the unit id, so a rerun writes
    the same file. ``body`` is the chat completion of the unit's last turn."""
    unit_id = str(record["id"])
    digest = hashlib.sha256(unit_id.encode()).hexdigest()
    line: dict[str, Any] = {"id": f"batch_req_{digest[:24]}", "custom_id": unit_id, "response": None, "error": None}
    if status != 200:
        if error is None:  # refused by the server (400/413): its answer, as OpenAI reports a 4xx
            line["response"] = {"status_code": status, "request_id": f"req_{digest[24:48]}",
                                "body": {"error": {"message": record.get("detail"), "type": "invalid_request_error"}}}
        else:
            line["error"] = error
        return line
    turn = (record.get("turns") or [{}])[-1]
    message = next((m for m in reversed(record.get("conversations") or []) if m.get("role") == "assistant"), {})
    usage = turn.get("usage") or {}
    body = {"id": f"chatcmpl-{digest[:24]}", "object": "chat.completion", "model": turn.get("model") or record.get("model"),
            "choices": [{"index": 0, "message": dict(message), "logprobs": None,
                         "finish_reason": turn.get("finish_reason")}],
            "usage": {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
                      "total_tokens": None if usage.get("prompt_tokens") is None or usage.get("completion_tokens") is None
                      else usage["prompt_tokens"] + usage["completion_tokens"]}}
    line["response"] = {"status_code": 200, "request_id": f"req_{digest[24:48]}", "body": body}
    return line


def _kept(record: dict[str, Any], counts: ExportCounts, drop_length: bool, require_think_close: bool) -> bool:
    turns = record.get("turns") or ()
    if drop_length and any(t.get("length_flag") for t in turns):
        counts.dropped_length += 1
        return False
    if require_think_close and any(t.get("reasoning_truncated") for t in turns):
        counts.dropped_think_open += 1
        return False
    return True


def export_lines(run_dir: Path, out_path: Path, fmt: str, *, drop_length: bool = False,
                 require_think_close: bool = False) -> ExportCounts:
    """Write the run's records as one JSONL file: ``fmt`` ``jsonl`` (SpecForge training rows,
    :func:`specforge_line`) or ``openai-batch`` (:func:`batch_line`; skipped and failed units
    become lines with their status or error, so every ``custom_id`` of the input has a line).

    Written beside ``out_path`` and renamed into place; on failure the partial file is removed
    and the error (``OSError``) raised.
    """
    counts = ExportCounts()
    tmp = out_path.with_name(out_path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            for shard in shard_paths(run_dir / "shards"):
                for _, record in iter_records(shard):
                    if not _kept(record, counts, drop_length, require_think_close):
                        continue
                    line = specforge_line(record) if fmt == "jsonl" else batch_line(record)
                    fh.write(orjson.dumps(line) + b"\n")
                    counts.written += 1
            if fmt == "openai-batch":
                counts.failed = _failed_lines(run_dir, fh)
        os.replace(tmp, out_path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
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
                line = batch_line(record, status)
            else:
                line = batch_line(record, -1, {"code": str(record.get("reason")), "message": record.get("detail")
                                               or f"{record.get('reason')} (status {status})"})
            fh.write(orjson.dumps(line) + b"\n")
            written += 1
    return written


def export_run(run_dir: Path, out_path: Path, fmt: str, *, drop_length: bool = False,
               require_think_close: bool = False) -> dict[str, Any]:
    """Write the run's records to ``out_path`` as ``fmt`` (``parquet``, ``jsonl``, ``openai-batch``);
    return the summary's ``export`` record (format, path, written and the counts left out).

    Raises:
        OSError: the file cannot be written (nothing partial is left).
    """
    if fmt == "parquet":
        return {"format": fmt, "path": str(out_path), "written": export_parquet(run_dir, out_path)}
    counts = export_lines(run_dir, out_path, fmt, drop_length=drop_length, require_think_close=require_think_close)
    return {"format": fmt, "path": str(out_path), **counts.as_record()}
