"""Issue 26, the training file: a run with reasoning, tool turns and input fields of mixed types,
read from a ``.jsonl.gz``, exported for SpecForge and as Parquet, then read by what reads them:
SpecForge's rules (restated with their source commits in ``tests/support/specforge_rules.py``),
Hugging Face ``datasets`` 5.x, and tokenplan's own reader over a ``datasets``-written Parquet."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.support.fault_server import FaultServerProcess, answer_for
from tests.support.specforge_rules import parser_problem, validator_problem

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.runner.input.rows import read_rows
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.store.appendlog import iter_records
from tokenplan.runner.store.export import export_run, specforge_line
from tokenplan.runner.store.record import stored_records

TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
ROWS = [
    # ShareGPT with a system field, two user turns, and fields of three kinds.
    {
        "id": "s1",
        "system": "Be brief.",
        "category": "math",
        "difficulty": 3,
        "tags": ["add", "easy"],
        "conversations": [
            {"from": "human", "value": "1+1?"},
            {"from": "gpt", "value": "old"},
            {"from": "human", "value": "and 2+2?"},
            {"from": "gpt", "value": "old"},
        ],
    },
    # OpenAI messages; "difficulty" is text here (int above): a mixed column; "meta" an object.
    {
        "id": "m1",
        "category": "chat",
        "difficulty": "hard",
        "meta": {"src": "forum", "score": 0.5},
        "messages": [{"role": "user", "content": "hi"}],
    },
    # Tool use: the call and its result are kept, the answer after the tool is regenerated.
    {
        "id": "t1",
        "category": "tools",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C, sunny"},
            {"role": "assistant", "content": "old answer"},
        ],
    },
]


def _answer(messages: list[dict]) -> dict:
    return answer_for({"messages": messages, "max_tokens": 64}, 16)["choices"][0]["message"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run over a ``.jsonl.gz`` input, exported as the training JSONL."""
    tmp = tmp_path_factory.mktemp("training")
    data = tmp / "in.jsonl.gz"
    data.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in ROWS).encode()))
    with FaultServerProcess(str(tmp), tokens=16) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp / "run",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                export=tmp / "train.jsonl",
            )
        )
    assert (result.units_total, result.stored, result.accounting_ok, result.export_rows) == (3, 3, True, 3)
    return tmp


def _lines(path: Path) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_the_training_file_keeps_reasoning_tools_and_fields_as_specforge_reads_them(run: Path) -> None:
    rows = _lines(run / "train.jsonl")
    side = _lines(run / "train.unvalidated.jsonl")
    # the tool row goes to the companion file, so that train.jsonl passes the validator whole
    assert sorted(rows) == ["m1", "s1"] and sorted(side) == ["t1"]
    s1, m1, t1 = rows["s1"], rows["m1"], side["t1"]
    # the stored answers are the fault server's, under SpecForge's names
    asked = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}]
    first = _answer(asked)
    assert s1["conversations"][2] == {
        "role": "assistant",
        "content": first["content"],
        "reasoning_content": first["reasoning_content"],
    }
    assert (s1["status"], s1["category"], s1["difficulty"], s1["tags"]) == ("success", "math", 3, ["add", "easy"])
    assert (m1["difficulty"], m1["meta"]) == ("hard", {"src": "forum", "score": 0.5})
    tool_turns = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "content": "18 C, sunny", "tool_call_id": "call_1", "name": "get_weather"},
    ]
    after_tool = _answer(tool_turns)
    assert t1["conversations"] == tool_turns + [
        {"role": "assistant", "content": after_tool["content"], "reasoning_content": after_tool["reasoning_content"]}
    ]
    # SpecForge's validator (the flags the issue names) passes every line of train.jsonl: it stops
    # the whole file at its first bad line, so the file passes only if each line does ...
    for row in rows.values():
        assert validator_problem(row, expect_reasoning=True, strict_think_markers=True) is None
    # ... and cannot pass a tool row by design (it allows system/user/assistant with non-empty
    # content only), which is why t1 is in the companion; SpecForge's trainer (ThinkingParser)
    # keeps every key and turn of all three.
    assert validator_problem(t1) == "message 1 content must be a non-empty string"
    for row in (s1, m1, t1):
        assert parser_problem(row) is None


def test_the_old_export_shape_fails_the_rules_the_new_one_passes() -> None:
    # Guards the checker itself: the shape tokenplan wrote before (reasoning under "thinking", no
    # status) is rejected at the status, and its reasoning is a key the trainer drops.
    old = {
        "id": "a",
        "conversations": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "thinking": "r"}],
    }
    assert validator_problem(old) == "status must be 'success'"
    assert parser_problem(old) == "message 1: keys ['thinking'] are dropped by _sanitize_message"
    assert validator_problem({**old, "status": "success"}, expect_reasoning=True) == (
        "assistant message 1 has empty reasoning_content"
    )


def test_the_training_file_loads_in_hf_datasets_and_its_parquet_reads_back_row_for_row(run: Path) -> None:
    datasets = pytest.importorskip("datasets")
    train = datasets.load_dataset(
        "json",
        data_files=[str(run / "train.jsonl"), str(run / "train.unvalidated.jsonl")],
        split="train",
        cache_dir=str(run / "hf"),
    )
    assert sorted(train["id"]) == ["m1", "s1", "t1"]
    loaded = {row["id"]: row for row in train}
    assert loaded["t1"]["conversations"][1]["tool_calls"] == [TOOL_CALL]
    assert loaded["m1"]["meta"] == {"src": "forum", "score": 0.5} and loaded["s1"]["difficulty"] == 3
    # datasets 5.x writes messages whose keys differ (reasoning here, tool fields there) as
    # list<arrow.json>: JSON text per message. tokenplan must read that back as the rows it came from.
    parquet = run / "hf.parquet"
    train.to_parquet(str(parquet))
    assert "arrow.json" in str(pq.ParquetFile(parquet).schema_arrow.field("conversations").type)
    direct = [r for r in read_rows([run / "train.jsonl", run / "train.unvalidated.jsonl"])]
    via_hf = [r for r in read_rows([parquet])]
    assert all(isinstance(r, Row) for r in direct + via_hf) and len(via_hf) == 3
    by_id = {r.id: r for r in via_hf}
    for row in direct:
        again = by_id[row.id]
        assert again.messages == row.messages  # roles, contents, tool fields
        # every field of the row comes back; datasets adds the keys other rows have, as null
        assert {k: v for k, v in again.fields.items() if v is not None} == row.fields


def test_the_parquet_export_keeps_tool_fields_and_every_input_field(run: Path) -> None:
    out = run / "export.parquet"
    assert export_run(run / "run", out, "parquet")["written"] == 3
    table = pq.read_table(out)
    stored = {
        r["id"]: r for shard in sorted((run / "run" / "shards").glob("*.jsonl")) for _, r in iter_records(shard)
    }  # in the order stored (answers arrive in any order)
    first_seen = list(dict.fromkeys(k for r in stored.values() for k in r["fields"]))
    assert sorted(first_seen) == ["category", "difficulty", "meta", "tags"]
    # own columns, then the input fields in the order first seen; typed by what they hold
    assert table.column_names == [
        *("id", "source_id", "sample_index", "model", "conversations", "turns", "status"),
        *first_seen,
    ]
    assert set(table.column("status").to_pylist()) == {"success"}
    assert str(table.schema.field("category").type) == "string"
    assert "arrow.json" in str(table.schema.field("difficulty").type)  # 3 and "hard": mixed
    rows = {r["id"]: r for r in table.to_pylist()}
    t1 = rows["t1"]["conversations"]
    assert json.loads(t1[1]["tool_calls"]) == [TOOL_CALL]
    assert (t1[2]["tool_call_id"], t1[2]["name"]) == ("call_1", "get_weather")
    assert json.loads(rows["m1"]["meta"]) == {"src": "forum", "score": 0.5}
    datasets = pytest.importorskip("datasets")
    loaded = {
        r["id"]: r
        for r in datasets.load_dataset("parquet", data_files=str(out), split="train", cache_dir=str(run / "hf2"))
    }
    assert loaded["t1"]["conversations"][1]["tool_calls"] == [TOOL_CALL]  # arrow.json decoded by datasets
    assert (loaded["s1"]["difficulty"], loaded["m1"]["difficulty"], loaded["m1"]["meta"]) == (
        3,
        "hard",
        {"src": "forum", "score": 0.5},
    )
    assert loaded["s1"]["tags"] == ["add", "easy"]
    # and tokenplan reads its own Parquet export back: the same conversations as the records
    for row in read_rows([out]):
        assert isinstance(row, Row)
        assert [m.as_dict() for m in row.messages] == [
            {k: v for k, v in m.items() if k != "reasoning_content"} for m in stored[row.id]["conversations"]
        ]
        assert row.fields["category"] == stored[row.id]["fields"]["category"]


# A length-cut answer still thinking (content empty, all reasoning) and an answer with a stray
# </think> left in its content: SpecForge's validator rejects both (the whole file, at that line).
CUT = {
    "id": "x1",
    "object": "chat.completion",
    "model": "fault-model",
    "choices": [
        {
            "index": 0,
            "finish_reason": "length",
            "message": {"role": "assistant", "content": "", "reasoning_content": "Let me think about"},
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11},
}
MARKER = {
    **CUT,
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "4</think> Four.", "reasoning_content": "2+2"},
        }
    ],
}


def test_records_that_cannot_train_are_left_out_of_the_training_file_and_counted(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "cut", "prompt": "q1"}\n{"id": "marker", "prompt": "q2"}\n{"id": "ok", "prompt": "q3"}\n')
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"status": 200, "raw": json.dumps(CUT), "content_type": "application/json"},
                {"status": 200, "raw": json.dumps(MARKER), "content_type": "application/json"},
                {"answer": True},
            ]
        )
    )
    out = tmp_path / "train.jsonl"
    with FaultServerProcess(str(tmp_path), tokens=16, script=str(script)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                concurrency=1,
                export=out,
            )
        )
    assert (result.stored, result.accounting_ok, result.export_rows) == (3, True, 1)  # all three kept in the run
    assert result.summary["export"] == {
        "format": "jsonl",
        "path": str(out),
        "written": 1,
        "dropped_length": 0,
        "dropped_think_open": 0,
        "dropped_empty_answer": 1,
        "dropped_think_marker": 1,
        "failed": 0,
        "unvalidated": 0,
        "no_reasoning": 0,
        "tool_calls": 0,
        "partial": False,  # no unit left in errors.jsonl: under the name asked for
    }
    assert list(_lines(out)) == ["ok"]
    assert validator_problem(_lines(out)["ok"], expect_reasoning=True, strict_think_markers=True) is None
    # what the validator would have said had they been written
    records = {r.id: r for r in stored_records(tmp_path / "run")}
    assert records["cut"].turns[0].reasoning_truncated is True
    assert validator_problem(specforge_line(records["cut"])) == "message 1 content must be a non-empty string"
    assert validator_problem(specforge_line(records["marker"]), strict_think_markers=True) == (
        "assistant message 1 contains a thinking marker"
    )


def test_a_row_without_reasoning_is_written_counted_and_said(tmp_path: Path) -> None:
    # break-it finding: the README said the file passes --expect-reasoning whole, yet an answer the
    # model gave without thinking is written without reasoning_content, which that flag refuses.
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "bare", "prompt": "q1"}\n{"id": "ok", "prompt": "q2"}\n')
    bare = {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"status": 200, "raw": json.dumps(bare), "content_type": "application/json"}, {"answer": True}])
    )
    out = tmp_path / "train.jsonl"
    with FaultServerProcess(str(tmp_path), tokens=16, script=str(script)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                concurrency=1,
                export=out,
            )
        )
    assert (result.summary["export"]["written"], result.summary["export"]["no_reasoning"]) == (2, 1)
    lines = _lines(out)
    assert validator_problem(lines["bare"], expect_reasoning=True) == "assistant message 1 has empty reasoning_content"
    assert validator_problem(lines["bare"]) is None and validator_problem(lines["ok"], expect_reasoning=True) is None
    from tokenplan.report.generate import summary_text

    assert "1 with a turn without reasoning (SpecForge's validator refuses them under --expect-reasoning" in (
        summary_text(result)
    )
