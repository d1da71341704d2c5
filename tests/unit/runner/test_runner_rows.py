"""Row shapes, stable ids, rejects, and the three file formats."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from tokenplan.errors import InputError
from tokenplan.runner.input.files import check_readable, expand_inputs
from tokenplan.runner.input.rows import read_rows
from tokenplan.runner.input.shapes import Message, Row, RowError, parse_row


def test_specforge_sharegpt_openai_prompt_and_batch_shapes_become_messages() -> None:
    spec = parse_row(
        {"id": "a", "conversations": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]}, "f", 1
    )
    share = parse_row(
        {
            "id": "b",
            "conversations": [
                {"from": "system", "value": "s"},
                {"from": "human", "value": "q"},
                {"from": "gpt", "value": "r"},
            ],
        },
        "f",
        2,
    )
    openai = parse_row({"id": 7, "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]}, "f", 3)
    prompt = parse_row({"id": "d", "prompt": "q"}, "f", 4)
    batch = parse_row(
        {"custom_id": "e", "method": "POST", "body": {"messages": [{"role": "user", "content": "q"}]}}, "f", 5
    )
    assert (spec.shape, share.shape, openai.shape, prompt.shape, batch.shape) == (
        "conversations",
        "sharegpt",
        "messages",
        "prompt",
        "batch",
    )
    assert share.messages == (Message("system", "s"), Message("user", "q"), Message("assistant", "r"))
    assert openai.id == "7" and openai.messages == (Message("user", "q"),)
    assert batch.id == "e" and prompt.messages == (Message("user", "q"),)


def test_a_row_without_an_id_gets_the_hash_of_its_messages() -> None:
    row = parse_row({"prompt": "hello"}, "f", 1)
    # 16 hex digits of SHA-256 over [["user", "hello"]] as JSON.
    assert row.id == hashlib.sha256(b'[["user", "hello"]]').hexdigest()[:16]
    assert parse_row({"messages": [{"role": "user", "content": "hello"}]}, "g", 9).id == row.id
    # an id of blanks only is none: SpecForge's validator strips it and refuses the empty rest
    assert parse_row({"id": " ", "prompt": "hello"}, "f", 1).id == row.id
    assert (
        parse_row(
            {"id": "\t", "custom_id": "c", "body": {"messages": [{"role": "user", "content": "hello"}]}}, "f", 1
        ).id
        == "c"
    )


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (
            [1, 2],
            "row is a list, not a JSON object (a file holding one JSON array of rows is read as such when named .json)",
        ),
        ({"text": "x"}, "unknown shape"),
        # the shape's key with null is named, not "unknown shape: keys ['id', 'prompt']" (a new-user pass)
        ({"id": "f", "prompt": None}, "prompt: null"),
        ({"id": "f", "messages": None}, "messages: null"),
        ({"conversations": []}, "conversations: not a non-empty list"),
        ({"conversations": [{"role": "function", "content": "x"}]}, "conversations[0].role: 'function' is not one of"),
        ({"conversations": [{"from": "bot", "value": "x"}]}, "conversations[0].from: 'bot' is not one of"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content: not a string"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages: no user turn"),
        ({"custom_id": "x", "body": {"prompt": "x"}}, "body: batch line without body.messages"),
        ({"id": {"x": 1}, "prompt": "x"}, "id: expected text or an integer, got dict"),
        ({"id": True, "prompt": "x"}, "id: expected text or an integer, got bool"),
    ],
)
def test_malformed_rows_name_the_field_and_what_is_allowed(item: object, reason: str) -> None:
    with pytest.raises(RowError, match=re.escape(reason)):
        parse_row(item, "f", 1)


def test_bad_lines_and_duplicate_ids_are_rejected_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "prompt": "x"}\n\nnot json\n{"id": "a", "prompt": "y"}\n{"id": "b", "prompt": "z"}\n')
    items = list(read_rows([path]))
    assert [type(i).__name__ for i in items] == ["Row", "Reject", "Reject", "Row"]
    bad_json, duplicate = items[1], items[2]
    assert (bad_json.line, bad_json.reason.startswith("invalid JSON")) == (3, True)
    assert (duplicate.line, duplicate.reason, duplicate.id) == (4, "duplicate id 'a'", "a")
    assert items[3].line == 5  # the blank line 2 still counts for line numbers
    # an integer id may repeat one written as text; a row without an id repeats another's messages
    path.write_text('{"id": "7", "prompt": "x"}\n{"id": 7, "prompt": "y"}\n{"prompt": "z"}\n{"prompt": "z"}\n')
    reasons = [i.reason for i in read_rows([path]) if not isinstance(i, Row)]
    z = hashlib.sha256(b'[["user", "z"]]').hexdigest()[:16]  # the id of a row without one
    assert reasons == [
        "duplicate id '7' (ids compare as text: 7 and \"7\" are one id)",
        f"duplicate messages: no id, and another row's messages are the same (both hash to {z!r})",
    ]


def test_compressed_jsonl_and_parquet_are_read_like_plain_jsonl(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": f"r{i}", "conversations": [{"role": "user", "content": f"q{i}"}]} for i in range(3)]
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    names = []
    for suffix, codec in (
        ("jsonl.zst", "zstd"),
        ("jsonl.zstd", "zstd"),
        ("jsonl.gz", "gzip"),
        ("jsonl.bz2", "bz2"),
        ("jsonl.lz4", "lz4"),
        ("json.gz", "gzip"),
    ):
        with pa.output_stream(tmp_path / f"a.{suffix}", compression=codec) as out:
            out.write(text)
        names.append(f"a.{suffix}")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "b.parquet")
    check_readable([tmp_path / name for name in names])
    for name in (*names, "b.parquet"):
        got = [r for r in read_rows([tmp_path / name]) if isinstance(r, Row)]
        assert [(r.id, r.messages, r.line) for r in got] == [
            (f"r{i}", (Message("user", f"q{i}"),), i + 1) for i in range(3)
        ]


def test_globs_expand_sorted_and_unknown_or_missing_inputs_are_one_line_errors(tmp_path: Path) -> None:
    for name in ("b.jsonl", "a.jsonl"):
        (tmp_path / name).write_text("")
    assert [p.name for p in expand_inputs([str(tmp_path / "*.jsonl")])] == ["a.jsonl", "b.jsonl"]
    (tmp_path / "c.csv").write_text("")
    with pytest.raises(InputError, match=r"input .*c\.csv' is not allowed \(allowed: \.jsonl"):
        expand_inputs([str(tmp_path / "c.csv")])
    with pytest.raises(InputError, match="existing files or globs"):
        expand_inputs([str(tmp_path / "missing*.jsonl")])
    # one file named twice, as written or by an overlapping glob, is refused (a new-user pass: its
    # rows were read twice, the copies rejected as duplicate ids, and the run said [ok])
    a = str(tmp_path / "a.jsonl")
    with pytest.raises(InputError) as twice:
        expand_inputs([str(tmp_path / "*.jsonl"), a])
    assert (
        str(twice.value)
        == f"input {a!r} is not allowed (allowed: each file once (also named by {str(tmp_path / '*.jsonl')!r}))"
    )
    # a hard link is the same file under another name (a second break-it pass found it read twice)
    link = tmp_path / "sub" / "a-link.jsonl"
    link.parent.mkdir()
    os.link(a, link)
    with pytest.raises(InputError, match=r"a-link.jsonl' is not allowed \(allowed: each file once"):
        expand_inputs([a, str(link)])


def test_lines_only_pythons_json_takes_are_read_then_refused_by_name_and_the_error_text_is_pythons(
    tmp_path: Path,
) -> None:
    # NaN and a 2**70 integer are refused by orjson but read by json.loads; a record cannot hold
    # either as it is (orjson writes NaN as null and refuses 2**70), so each row is a reject
    # naming the field (issue 26), not a silent null or a crash when its answer is stored.
    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"id": "a", "prompt": "x", "score": NaN}\n{"id": "b", "prompt": "y", "n": 1180591620717411303424}\n'
        '{"id": "c", "prompt": \n'
    )
    items = list(read_rows([path]))
    assert [(type(i).__name__, i.id) for i in items[:2]] == [("Reject", "a"), ("Reject", "b")]
    assert items[0].reason.startswith("score: nan is not a finite number")
    assert items[1].reason.startswith("n: integer 1180591620717411303424 is outside the 64-bit range")
    # json.loads's own message: the 22 characters before the line's newline (char 22) and then
    # nothing, so the value is missing at char 23, the start of line 2.
    assert items[2].reason == "invalid JSON: Expecting value: line 2 column 1 (char 23)"


def test_blank_and_whitespace_only_lines_are_not_rows_but_are_counted(tmp_path: Path) -> None:
    from tokenplan.runner.input.files import ReadStats

    path = tmp_path / "in.jsonl"
    # line 1 row, line 2 empty, line 3 spaces and a tab, line 4 row, line 5 "\r" (CRLF blank), then
    # the trailing newline of line 5: 2 rows and 3 blank lines; no reject.
    path.write_bytes(b'{"id": "a", "prompt": "x"}\n\n  \t\n{"id": "b", "prompt": "y"}\n\r\n')
    stats = ReadStats()
    items = list(read_rows([path], stats))
    assert [(type(i).__name__, i.line) for i in items] == [("Row", 1), ("Row", 4)]
    assert stats.blank_lines == 3
    assert list(read_rows([path])) == items  # without stats: the same rows


def test_a_text_part_whose_text_is_not_a_string_is_a_malformed_row():
    # A break-it pass sent {"type": "text", "text": 5}: it was coerced to "5" and sent.
    import pytest

    from tokenplan.runner.input.shapes import RowError

    with pytest.raises(RowError, match=r"messages\[0\]\.content: not a string or a list of text parts"):
        parse_row({"id": "a", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "f", 1)


def test_text_parts_are_joined_with_a_newline_as_vllm_flattens_them():
    # vllm/entrypoints/chat_utils.py: text_prompt = "\n".join(texts); joined with nothing the two
    # parts read "Helloworld" in what was sent and stored (a break-it pass)
    parts = [{"type": "text", "text": "Hello"}, {"type": "text", "text": "world"}]
    row = parse_row({"id": "a", "messages": [{"role": "user", "content": parts}]}, "f", 1)
    assert row.messages == (Message("user", "Hello\nworld"),)
