"""Export a run directory's stored records as one Parquet file (pyarrow imported here only).

One row per stored unit, columns in this order:

- ``id``, ``source_id``, ``sample_index``, ``model``;
- ``conversations``: list of ``{role, content, reasoning_content, tool_calls, tool_call_id, name}``
  (``tool_calls`` as ``arrow.json``: its shape varies, e.g. ``arguments`` as text or object);
- ``turns``: the per-turn facts (finish_reason, length_flag, reasoning_truncated, token counts,
  endpoint, latency in seconds, attempts, seed);
- ``status``: ``"success"`` on every row, as the training JSONL states it (an input row that was
  itself an earlier output keeps its old ``status`` as ``input_status``, never as this row's);
- every other field of the input row, one column each, in the order first seen. A field's type
  is found in a first pass over the records: all text → ``string``, all booleans → ``bool``, all
  integers within int64 → ``int64``, integers and floats → ``float64``, anything else (objects,
  lists, mixed kinds) → ``arrow.json``, which Hugging Face ``datasets`` reads back as the value
  (its ``Json`` feature). A field whose name is one of the columns above gets the prefix
  ``input_`` (as many times as needed to be unique).

Written batch by batch with that explicit schema, so memory stays bounded by ``batch_rows`` and
every batch has the same types; the shards are read twice (types, then rows).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from tokenplan.runner.json_columns import json_text, json_type
from tokenplan.runner.store.record import OutputRecord, TurnUsage, stored_records

OWN_COLUMNS = ("id", "source_id", "sample_index", "model", "conversations", "turns", "status")
_INT64 = (-(2**63), 2**63 - 1)


def _kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if _INT64[0] <= value <= _INT64[1] else "json"
    if isinstance(value, float):
        return "float"
    return "string" if isinstance(value, str) else "json"


def _arrow_type(kinds: set[str]):  # noqa: ANN202 - pyarrow is imported lazily
    import pyarrow as pa

    if kinds <= {"string"}:
        return pa.string()  # all null: a text column of nulls
    if kinds == {"bool"}:
        return pa.bool_()
    if kinds == {"int"}:
        return pa.int64()
    if kinds <= {"int", "float"}:
        return pa.float64()
    return json_type()


def field_columns(run_dir: Path) -> dict[str, tuple[str, Any]]:
    """Input field name → (its column name, its Arrow type), in the order first seen (first pass)."""
    kinds: dict[str, set[str]] = {}
    for record in stored_records(run_dir):
        for key, value in record.fields.items():
            seen = kinds.setdefault(key, set())
            kind = _kind(value)
            if kind is not None:
                seen.add(kind)
    columns, taken = {}, set(OWN_COLUMNS)
    for key, seen in kinds.items():
        name = key
        while name in taken:
            name = "input_" + name
        taken.add(name)
        columns[key] = (name, _arrow_type(seen))
    return columns


def schema(fields: dict[str, tuple[str, Any]], *, storage: bool = False):  # noqa: ANN201
    """The export's Arrow schema; ``storage`` puts plain text where ``arrow.json`` goes (the rows
    are built with it, then cast)."""
    import pyarrow as pa

    def j():  # noqa: ANN202
        return pa.string() if storage else json_type()

    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("reasoning_content", pa.string()),
            ("tool_calls", j()),
            ("tool_call_id", pa.string()),
            ("name", pa.string()),
        ]
    )
    turn = pa.struct(
        [
            ("finish_reason", pa.string()),
            ("length_flag", pa.bool_()),
            ("reasoning_truncated", pa.bool_()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("reasoning_tokens", pa.int64()),
            ("endpoint", pa.string()),
            ("latency_s", pa.float64()),
            ("attempts", pa.int64()),
            ("seed", pa.int64()),
        ]
    )
    extra = [(name, pa.string() if storage and kind == json_type() else kind) for name, kind in fields.values()]
    return pa.schema(
        [
            ("id", pa.string()),
            ("source_id", pa.string()),
            ("sample_index", pa.int64()),
            ("model", pa.string()),
            ("conversations", pa.list_(message)),
            ("turns", pa.list_(turn)),
            ("status", pa.string()),
            *extra,
        ]
    )


def _text(value: Any) -> str | None:
    """A tool field that should be text: kept as it is, else its JSON text."""
    return value if value is None or isinstance(value, str) else json_text(value)


def flat_row(record: OutputRecord, fields: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    """One stored record as a row of :func:`schema` (storage form: ``arrow.json`` values as text)."""
    json_kind = json_type()
    turns = []
    for t in record.turns:
        usage = t.usage or TurnUsage(None, None)
        turns.append(
            {
                "finish_reason": t.finish_reason,
                "length_flag": t.length_flag,
                "reasoning_truncated": t.reasoning_truncated,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "reasoning_tokens": usage.reasoning_tokens,
                "endpoint": t.endpoint,
                "latency_s": t.latency_s,
                "attempts": t.attempts,
                "seed": t.seed,
            }
        )
    messages = [
        {
            "role": m.get("role"),
            "content": m.get("content"),
            "reasoning_content": m.get("reasoning_content"),
            "tool_calls": json_text(m.get("tool_calls")),
            "tool_call_id": _text(m.get("tool_call_id")),
            "name": _text(m.get("name")),
        }
        for m in record.conversations
    ]
    row = {
        "id": record.id,
        "source_id": record.source_id,
        "sample_index": record.sample_index,
        "model": record.model,
        "conversations": messages,
        "turns": turns,
        "status": "success",  # every stored unit is one; skipped and failed units are not exported here
    }
    own = record.fields
    for key, (name, kind) in fields.items():
        value = own.get(key)
        row[name] = json_text(value) if kind == json_kind else value
    return row


def export_parquet(run_dir: Path, out_path: Path, *, batch_rows: int = 4096) -> int:
    """Write every stored record of ``run_dir`` to ``out_path`` (see the module docstring);
    return the rows written.

    The file is written beside its final name and renamed into place, so a reader never sees a
    partial file; on failure the partial file is removed and the error (``OSError``) raised.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = field_columns(run_dir)
    storage, final = schema(fields, storage=True), schema(fields)
    tmp = out_path.with_name(out_path.name + ".tmp")
    rows = 0
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        writer.write_table(pa.Table.from_pylist(batch, schema=storage).cast(final))

    try:
        with pq.ParquetWriter(tmp, final, compression="zstd") as writer:
            for record in stored_records(run_dir):
                batch.append(flat_row(record, fields))
                if len(batch) >= batch_rows:
                    flush()
                    rows, batch = rows + len(batch), []
            if batch:
                flush()
                rows += len(batch)
        os.replace(tmp, out_path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # no half-written file left beside the target
        raise
    return rows
