"""``generate`` against a real engine: ``transformers serve`` on the CPU with the tiny chain model.

The model's greedy answer to anything is ``<think> hello </think> world <|im_end|>``
(tests/support/tiny_model.py): content ``"world"``, reasoning ``"hello"``, 5 completion tokens
(the 5 chain tokens, ``<|im_end|>`` included); with ``max_tokens=2`` it stops after ``<think> hello``
with ``finish_reason "length"``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.errors import ServerError

pytestmark = pytest.mark.slow

ROWS = [
    # SpecForge conversation, two user turns → two requests.
    {
        "id": "spec-1",
        "conversations": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "one two"},
            {"role": "assistant", "content": "old answer"},
            {"role": "user", "content": "three four"},
            {"role": "assistant", "content": "old answer 2"},
        ],
    },
    # ShareGPT from/value, one user turn.
    {"id": "share-1", "conversations": [{"from": "human", "value": "cats and dogs"}, {"from": "gpt", "value": "old"}]},
    # A plain prompt: its id is the content hash.
    {"prompt": "why is the river fast"},
]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _records(run_dir: Path) -> dict[str, dict]:
    out = {}
    for shard in sorted((run_dir / "shards").glob("*.jsonl")):
        for line in shard.read_text().splitlines():
            record = json.loads(line)
            assert record["id"] not in out
            out[record["id"]] = record
    return out


def test_regenerates_each_assistant_turn_with_its_reasoning(served_model, tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl", ROWS)
    result = generate(
        GenerateRequest.build(
            inputs=[str(data)],
            out_dir=tmp_path / "run",
            endpoints=[served_model.url],
            model=served_model.model,
            max_tokens=16,
            concurrency=2,
        )
    )
    # 3 rows, 3 units, every one stored; 1 + 2 + 1 turns = 4 requests.
    assert (result.units_total, result.stored, result.skipped, result.errors) == (3, 3, 0, 0)
    assert result.accounting_ok and result.summary["requests"] == 4
    records = _records(tmp_path / "run")
    spec = records["spec-1"]
    assert [m["role"] for m in spec["conversations"]] == ["system", "user", "assistant", "user", "assistant"]
    assistants = [m for m in spec["conversations"] if m["role"] == "assistant"]
    assert all(m["content"] == "world" and m["reasoning_content"] == "hello" for m in assistants)
    assert [t["finish_reason"] for t in spec["turns"]] == ["stop", "stop"]
    assert [t["usage"]["completion_tokens"] for t in spec["turns"]] == [5, 5]
    # The second turn's prompt holds the regenerated first answer, so it is longer than the first.
    assert spec["turns"][1]["usage"]["prompt_tokens"] > spec["turns"][0]["usage"]["prompt_tokens"]
    assert records["share-1"]["conversations"][0] == {"role": "user", "content": "cats and dogs"}
    assert len(records) == 3 and "spec-1" in records and "share-1" in records


def test_length_finish_is_kept_and_flagged_or_dropped_to_skipped(served_model, tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl", ROWS[1:])
    kept = generate(
        GenerateRequest.build(
            inputs=[str(data)],
            out_dir=tmp_path / "keep",
            endpoints=[served_model.url],
            model=served_model.model,
            max_tokens=2,
        )
    )
    turn = _records(tmp_path / "keep")["share-1"]["turns"][0]
    # max_tokens 2 → "<think> hello": cut inside the thinking.
    assert (turn["finish_reason"], turn["length_flag"], turn["usage"]["completion_tokens"]) == ("length", True, 2)
    assert kept.stored == 2
    dropped = generate(
        GenerateRequest.build(
            inputs=[str(data)],
            out_dir=tmp_path / "drop",
            on_length="drop",
            endpoints=[served_model.url],
            model=served_model.model,
            max_tokens=2,
        )
    )
    assert (dropped.stored, dropped.skipped, dropped.accounting_ok) == (0, 2, True)
    reasons = [json.loads(line)["reason"] for line in (tmp_path / "drop" / "skipped.jsonl").read_text().splitlines()]
    assert reasons == ["length", "length"]


def test_streamed_answers_record_ttft_below_latency(served_model, tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl", ROWS[2:])
    result = generate(
        GenerateRequest.build(
            inputs=[str(data)],
            out_dir=tmp_path / "run",
            stream=True,
            endpoints=[served_model.url],
            model=served_model.model,
            max_tokens=16,
        )
    )
    (record,) = _records(tmp_path / "run").values()
    turn = record["turns"][0]
    assert record["conversations"][-1] == {"role": "assistant", "content": "world", "reasoning_content": "hello"}
    assert 0 < turn["ttft_s"] <= turn["latency_s"]
    assert result.summary["latency_ttft"]["count"] == 1


def test_rerun_on_a_finished_run_sends_nothing(served_model, tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl", ROWS)
    options = dict(
        inputs=[str(data)],
        out_dir=tmp_path / "run",
        endpoints=[served_model.url],
        model=served_model.model,
        max_tokens=16,
    )
    generate(GenerateRequest.build(**options))
    again = generate(GenerateRequest.build(**options))
    assert (again.already_done, again.summary["this_invocation"]["requests"], again.stored) == (3, 0, 3)
    # the run's, over both invocations: the first sent 2 + 1 + 1 requests (spec-1 has two user turns)
    assert again.summary["requests"] == 4 and again.summary["invocations"] == 1


def test_a_model_the_server_does_not_serve_is_one_clear_error(served_model, tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl", ROWS)
    with pytest.raises(ServerError, match="no endpoint is ready for model 'not-this-one'"):
        generate(
            GenerateRequest.build(
                inputs=[str(data)], out_dir=tmp_path / "run", endpoints=[served_model.url], model="not-this-one"
            )
        )


def test_cli_prints_the_accounting_summary_and_exports_parquet(served_model, tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl", ROWS)
    cmd = [
        sys.executable,
        "-c",
        "from tokenplan.cli import main; main()",
        "generate",
        str(data),
        "--out",
        str(tmp_path / "run"),
        "--endpoint",
        served_model.url,
        "--model",
        served_model.model,
        "--max-tokens",
        "16",
        "--export",
        str(tmp_path / "out.parquet"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "3 = 3 stored + 0 skipped + 0 errors  [ok]" in done.stdout
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out.parquet")
    # A row without an id gets 16 hex digits of SHA-256 over [[role, content], …] (rows.content_id).
    prompt_id = hashlib.sha256(json.dumps([["user", "why is the river fast"]]).encode()).hexdigest()[:16]
    assert sorted(table.column("id").to_pylist()) == sorted(["spec-1", "share-1", prompt_id])
    assert table.column("conversations").to_pylist()[0][-1]["reasoning_content"] == "hello"


def test_a_request_field_the_server_rejects_ends_the_run_instead_of_skipping_rows(served_model, tmp_path: Path) -> None:
    # transformers serve answers 422 "Unexpected fields in the request: {'top_k'}" to every request:
    # every row of the job refused alike, and the short control prompt with the same settings too.
    data = _write(tmp_path / "in.jsonl", ROWS)
    refused = r"refused \d+ rows in a row with 422 \(\"Unexpected fields in the request: \{'top_k'\}\"\)"
    with pytest.raises(ServerError, match=refused + r".*a short prompt with the same settings too"):
        generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[served_model.url],
                model=served_model.model,
                top_k=5,
            )
        )
    assert not (tmp_path / "run" / "skipped.jsonl").read_text()
