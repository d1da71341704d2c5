"""Export the stored records of a run directory to one Parquet file (pyarrow imported here only).

One Parquet row per stored unit: ``id``, ``source_id``, ``sample_index``, ``model``, the
``conversations`` (role, content, reasoning_content) and the per-turn facts (finish_reason,
token counts, endpoint, latency in seconds, attempts, seed). Written batch by batch with an
explicit schema, so memory stays bounded by ``batch_rows`` and every batch has the same types.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from tokenplan.runner.rundir import iter_records, shard_paths


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
