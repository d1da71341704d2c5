"""Issue 15, inputs: the dataset shapes and files people already have."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenplan.runner.input.files import InputBroken, count_rows
from tokenplan.runner.input.rows import limited, read_rows
from tokenplan.runner.input.shapes import Message, Row, parse_row


def test_a_sharegpt_top_level_system_field_becomes_the_first_turn() -> None:
    # LLaMA-Factory's sharegpt layout: {"conversations": [...], "system": "...", "tools": "..."}
    row = parse_row(
        {
            "id": "a",
            "system": "You are terse.",
            "tools": "[]",
            "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "r"}],
        },
        "f",
        1,
    )
    assert row.messages[0] == Message("system", "You are terse.")
    assert row.messages[1:] == (Message("user", "q"), Message("assistant", "r"))
    assert row.fields == {"tools": "[]"}  # the system field is consumed, every other field kept


def test_a_system_field_does_not_duplicate_a_system_turn_the_conversation_has() -> None:
    row = parse_row(
        {"system": "outer", "messages": [{"role": "system", "content": "inner"}, {"role": "user", "content": "q"}]},
        "f",
        1,
    )
    assert [m.content for m in row.messages] == ["inner", "q"]


def test_a_json_file_holding_one_array_is_read_as_rows(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    rows = [{"id": f"r{i}", "conversations": [{"from": "human", "value": f"q{i}"}]} for i in range(3)]
    path.write_text(json.dumps(rows, indent=2))  # indented: many lines per row, as ShareGPT ships
    items = list(read_rows([path]))
    assert [type(i) for i in items] == [Row, Row, Row]
    assert [(i.id, i.line) for i in items] == [("r0", 1), ("r1", 2), ("r2", 3)]  # "line" = 1-based index
    assert count_rows([path]) == 3


@pytest.mark.parametrize("name", ["bom.json", "bom.json.gz"])
def test_a_json_array_after_a_utf8_byte_order_mark_is_read(tmp_path: Path, name: str) -> None:
    # a break-it pass: the mark before "[" was read as a broken file ("truncated or damaged at byte
    # 93 of 93"), while JSONL after the same mark reads
    import gzip

    data = b"\xef\xbb\xbf" + json.dumps([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}]).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    assert [i.id for i in read_rows([path])] == ["a", "b"]
    assert count_rows([path]) == 2


def test_a_json_file_that_is_jsonl_still_reads_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y"}\n')
    assert [i.id for i in read_rows([path])] == ["a", "b"]
    assert count_rows([path]) == 2


def test_a_truncated_json_array_yields_its_rows_then_stops_naming_the_break(tmp_path: Path) -> None:
    # A cut array is a file copied short: the rows after the cut are unknown, so reading stops
    # with an error (the run must not report success), not with one reject and carry on.
    path = tmp_path / "cut.json"
    text = '[{"id": "a", "prompt": "x"}, {"id": "b", "pro'
    path.write_text(text)
    items = read_rows([path])
    assert next(items).id == "a"
    with pytest.raises(InputBroken) as broken:
        next(items)
    message = str(broken.value)
    assert "\n" not in message and "cut.json" in message and f"at byte {len(text)} of {len(text)}" in message
    assert "after element 1" in message and "last row read: line 1" in message


def test_hf_datasets_parquet_with_mixed_mostly_null_structs_picks_the_shape_by_non_null_keys(tmp_path: Path) -> None:
    # What `datasets` writes for a column holding both ShareGPT and OpenAI turns: one struct type
    # with all four keys, the unused pair null in every turn.
    turn = pa.struct([("from", pa.string()), ("value", pa.string()), ("role", pa.string()), ("content", pa.string())])
    table = pa.table(
        {
            "id": ["share", "openai", "tool"],
            "source": ["s1", "s2", "s3"],
            "conversations": pa.array(
                [
                    [{"from": "human", "value": "q1", "role": None, "content": None}],
                    [
                        {"from": None, "value": None, "role": "user", "content": "q2"},
                        {"from": None, "value": None, "role": "assistant", "content": "a2"},
                    ],
                    [
                        {"from": None, "value": None, "role": "user", "content": "q3"},
                        {"from": None, "value": None, "role": "tool", "content": "42"},
                    ],
                ],
                type=pa.list_(turn),
            ),
        }
    )
    path = tmp_path / "mixed.parquet"
    pq.write_table(table, path)
    share, openai, tool = list(read_rows([path]))
    assert (share.shape, share.messages) == ("sharegpt", (Message("user", "q1"),))
    assert (openai.shape, openai.messages) == ("conversations", (Message("user", "q2"), Message("assistant", "a2")))
    assert tool.messages[-1] == Message("tool", "42")
    assert openai.fields == {"source": "s2"}


def test_the_tool_role_and_tool_fields_are_kept() -> None:
    call = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]
    row = parse_row(
        {
            "messages": [
                {"role": "user", "content": "add"},
                {"role": "assistant", "content": None, "tool_calls": call},
                {"role": "tool", "tool_call_id": "c1", "content": "3"},
            ]
        },
        "f",
        1,
    )
    assert row.messages[1].as_dict() == {"role": "assistant", "content": "", "tool_calls": call}
    assert row.messages[2].as_dict() == {"role": "tool", "content": "3", "tool_call_id": "c1"}
    sharegpt = parse_row(
        {"conversations": [{"from": "human", "value": "q"}, {"from": "observation", "value": "o"}]}, "f", 1
    )
    assert sharegpt.messages[1] == Message("tool", "o")


def test_batch_body_sampling_fields_become_the_rows_overrides() -> None:
    row = parse_row(
        {
            "custom_id": "req-1",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "gpt-x",
                "messages": [{"role": "user", "content": "q"}],
                "max_completion_tokens": 77,
                "temperature": 0.3,
                "top_p": 0.9,
                "stop": ["\n\n"],
                "stream": True,
                "n": 4,
            },
        },
        "f",
        1,
    )
    # max_completion_tokens is read as max_tokens; model, stream and n are not the row's to set.
    assert row.overrides == {"max_tokens": 77, "temperature": 0.3, "top_p": 0.9, "stop": ["\n\n"]}
    assert row.fields == {"method": "POST", "url": "/v1/chat/completions"}
    # both given: max_completion_tokens wins, as vLLM and SGLang read them (a break-it pass)
    body = {"messages": [{"role": "user", "content": "q"}], "max_tokens": 100, "max_completion_tokens": 20}
    assert parse_row({"custom_id": "both", "body": body}, "f", 2).overrides == {"max_tokens": 20}


def test_a_batch_line_with_a_bad_max_tokens_is_rejected_naming_the_field() -> None:
    import pytest

    from tokenplan.runner.input.shapes import RowError

    with pytest.raises(RowError, match=r"body\.max_tokens: -1 is not a positive integer"):
        parse_row(
            {"custom_id": "x", "body": {"messages": [{"role": "user", "content": "q"}], "max_tokens": -1}}, "f", 1
        )


def test_every_other_input_field_is_kept_in_order() -> None:
    row = parse_row(
        {
            "id": "a",
            "category": "math",
            "difficulty": 3,
            "messages": [{"role": "user", "content": "q"}],
            "meta": {"src": "gsm8k"},
        },
        "f",
        1,
    )
    assert list(row.fields.items()) == [("category", "math"), ("difficulty", 3), ("meta", {"src": "gsm8k"})]


def test_limit_keeps_the_first_n_usable_rows_and_passes_rejects_through(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "prompt": "x"}\nbad\n{"id": "b", "prompt": "y"}\n{"id": "c", "prompt": "z"}\n')
    items = list(limited(read_rows([path]), 2))
    assert [getattr(i, "id", None) for i in items] == ["a", None, "b"]


def test_a_rows_own_openai_tools_are_sent_with_its_requests_and_kept_as_a_field() -> None:
    # a break-it pass: a messages row's top-level tools were kept in the export and never sent, so
    # its answers were made without the schema its tool turns were made with
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    row = parse_row({"id": "t", "messages": messages, "tools": [weather], "tool_choice": "auto"}, "f", 1)
    assert row.overrides == {"tools": [weather], "tool_choice": "auto"}
    assert row.fields == {"tools": [weather], "tool_choice": "auto"}
    # tools written as a JSON text, or not OpenAI function definitions: a field only, not sent
    for tools in ('[{"name": "get_weather"}]', [{"name": "get_weather"}], ["get_weather"], []):
        other = parse_row({"id": "t", "messages": messages, "tools": tools}, "f", 1)
        assert other.overrides == {} and other.fields == {"tools": tools}
