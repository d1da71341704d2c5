"""Issue 26: the Parquet export's columns and types, the training file's left-out rules, and the
reader's arrow.json decoding and Parquet break reporting, each on small hand-made inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenplan.runner.input.files import InputBroken
from tokenplan.runner.input.rows import Reject, read_rows
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.json_columns import json_decoders
from tokenplan.runner.store.export import training_problem
from tokenplan.runner.store.export_parquet import export_parquet


def _record(rid: str, fields: dict, conversations: list | None = None) -> dict:
    return {
        "id": rid,
        "source_id": rid,
        "sample_index": 0,
        "model": "m",
        "fields": fields,
        "conversations": conversations
        or [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}],
        "turns": [
            {
                "finish_reason": "stop",
                "length_flag": False,
                "reasoning_truncated": False,
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "reasoning_tokens": None},
            }
        ],
    }


def _run(tmp_path: Path, records: list[dict]) -> Path:
    shards = tmp_path / "run" / "shards"
    shards.mkdir(parents=True)
    (shards / "part-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path / "run"


def test_each_input_field_gets_a_column_typed_by_every_value_it_holds(tmp_path: Path) -> None:
    records = [
        _record(
            "a",
            {
                "lang": "en",
                "ok": True,
                "n": 1,
                "x": 1,
                "big": 1,
                "none": None,
                "model": "gpt-x",
                "input_model": "v1",
                "obj": {"k": [1]},
                "status": "failed",  # an earlier output's: this row's own status column says success
            },
        ),
        _record("b", {"lang": "fr", "ok": False, "n": 2, "x": 2.5, "big": 2**63, "none": None, "obj": "text"}),
    ]
    out = tmp_path / "out.parquet"
    assert export_parquet(_run(tmp_path, records), out) == 2
    schema = pq.read_schema(out)
    # "model" is an own column: the input's "model" becomes "input_model", which the input also
    # has, so that one becomes "input_input_model" (prefix until unique, in the order first seen).
    extra = {
        f.name: str(f.type)
        for f in schema
        if f.name not in ("id", "source_id", "sample_index", "model", "conversations", "turns", "status")
    }
    assert extra == {
        "lang": "string",
        "ok": "bool",
        "n": "int64",
        "x": "double",  # 1 and 2.5: ints and floats
        "big": "extension<arrow.json>",  # 2**63 is past int64's 2**63 - 1
        "none": "string",  # null in every row
        "input_model": "string",
        "input_input_model": "string",
        "obj": "extension<arrow.json>",
        "input_status": "string",
    }  # an object and a string
    rows = pq.read_table(out).to_pylist()
    assert (rows[0]["input_model"], rows[0]["input_input_model"], rows[1]["input_model"]) == ("gpt-x", "v1", None)
    assert (rows[0]["x"], rows[1]["x"], json.loads(rows[1]["big"])) == (1.0, 2.5, 2**63)
    assert (json.loads(rows[0]["obj"]), json.loads(rows[1]["obj"])) == ({"k": [1]}, "text")
    assert [(r["status"], r["input_status"]) for r in rows] == [("success", "failed"), ("success", None)]


def test_tool_fields_are_kept_in_the_parquet_conversation(tmp_path: Path) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]  # an object
    conversation = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "42", "tool_call_id": "c1", "name": "f"},
        {"role": "assistant", "content": "It is 42.", "reasoning_content": "r"},
    ]
    out = tmp_path / "out.parquet"
    export_parquet(_run(tmp_path, [_record("t", {}, conversation)]), out)
    (row,) = pq.read_table(out).to_pylist()
    got = [{k: v for k, v in m.items() if v is not None} for m in row["conversations"]]
    text = json.dumps(calls, separators=(",", ":"))  # arrow.json: the calls as compact JSON text
    assert got == [
        conversation[0],
        {"role": "assistant", "content": "", "tool_calls": text},
        conversation[2],
        conversation[3],
    ]


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"role": "assistant", "content": "", "reasoning_content": "cut while thinking"}, "empty_answer"),
        ({"role": "assistant", "content": " \n", "reasoning_content": "r"}, "empty_answer"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}, None),  # calls a tool: an answer
        ({"role": "assistant", "content": "ok </THINK>", "reasoning_content": "r"}, "think_marker"),  # any case
        ({"role": "assistant", "content": "ok", "reasoning_content": "a <think> b"}, "think_marker"),
        ({"role": "assistant", "content": "ok", "reasoning_content": None}, None),
        ({"role": "user", "content": ""}, None),  # only assistant turns are judged
    ],
)
def test_training_problem(message: dict, problem: str | None) -> None:
    assert training_problem({"conversations": [{"role": "user", "content": "q"}, message]}) == problem


def test_arrow_json_is_decoded_at_any_depth_and_bad_json_is_a_reject_naming_the_column(tmp_path: Path) -> None:
    j = pa.json_()
    storage = pa.schema(
        [
            ("id", pa.string()),
            ("messages", pa.list_(pa.string())),
            ("meta", pa.struct([("tags", pa.string()), ("n", pa.int64())])),
            ("kv", pa.map_(pa.string(), pa.string())),
            ("plain", pa.string()),
        ]
    )
    final = pa.schema(
        [
            ("id", pa.string()),
            ("messages", pa.list_(j)),
            ("meta", pa.struct([("tags", j), ("n", pa.int64())])),
            ("kv", pa.map_(pa.string(), j)),
            ("plain", pa.string()),
        ]
    )
    assert sorted(json_decoders(final)) == ["kv", "messages", "meta"]  # "plain" text stays text
    rows = [
        {
            "id": "a",
            "messages": ['{"role": "user", "content": "hi"}'],
            "meta": {"tags": '["x"]', "n": 1},
            "kv": [("k", '{"v": 2}')],
            "plain": '{"not": "decoded"}',
        },
        {"id": "b", "messages": ['{"role": "user", "content": '], "meta": None, "kv": None, "plain": None},
    ]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=storage).cast(final), path)
    good, bad = read_rows([path])
    assert isinstance(good, Row) and good.messages[0].content == "hi"
    assert good.fields == {"meta": {"tags": ["x"], "n": 1}, "kv": [("k", {"v": 2})], "plain": '{"not": "decoded"}'}
    assert isinstance(bad, Reject) and bad.line == 2 and bad.reason.startswith("messages: arrow.json value is not JSON")


def test_a_corrupt_parquet_page_stops_the_read_naming_its_row_group_offset_and_the_last_row(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    table = pa.table({"id": [f"r{i}" for i in range(100)], "prompt": ["p"] * 100})
    pq.write_table(table, path, row_group_size=50, compression="none")  # two row groups of 50 rows
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    offset = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(path.read_bytes())
    data[offset : offset + 8] = b"\xff" * 8  # the second group's first page header
    path.write_bytes(bytes(data))
    got = []
    with pytest.raises(InputBroken) as broken:
        got.extend(read_rows([path]))
    assert [r.id for r in got] == [f"r{i}" for i in range(50)]  # the first group is read whole
    assert (broken.value.byte, broken.value.line) == (offset, 50)
    message = str(broken.value)
    assert f"at byte {offset:,} of {len(data):,}" in message and "last row read: line 50;" in message
