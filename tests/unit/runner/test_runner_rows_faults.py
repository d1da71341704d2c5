"""Rows that cannot be read or stored become rejects with file, line and reason; a file that cannot
be read at all is refused up front; a fuzz test shows every line ends up a row or a reject."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplan.errors import InputError
from tokenplan.runner.rows import ReadStats, Reject, Row, check_readable, count_rows_or_none, read_rows


def _read(path: Path) -> list[Row | Reject]:
    return list(read_rows([path]))


@pytest.mark.parametrize("line", [
    rb'{"id": "a", "prompt": "x\ud800"}',          # an escaped lone surrogate, with an id
    rb'{"prompt": "x\ud800"}',                     # and without one (the id would hash it)
    b'{"id": "a", "prompt": "x\xed\xa0\x80"}',     # the raw bytes of a lone surrogate
    rb'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]}',
    rb'{"id": "\ud800", "prompt": "fine"}',        # in the id itself
])
def test_a_lone_surrogate_is_a_reject_not_a_crash(tmp_path: Path, line: bytes) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(line + b"\n" + b'{"id": "ok", "prompt": "fine"}\n')
    first, second = _read(path)
    assert isinstance(first, Reject) and "lone UTF-16 surrogate" in first.reason and first.line == 1
    assert isinstance(second, Row) and second.id == "ok"
    orjson.dumps({"file": first.source, "line": first.line, "reason": first.reason, "id": first.id})


@pytest.mark.parametrize(("open_", "close"), [("[", "]"), ('{"a": ', "}")])
def test_a_row_nested_100000_levels_deep_is_a_reject(tmp_path: Path, open_: str, close: str) -> None:
    # 100,000 nested objects crash orjson 3.8 outright (SIGSEGV), so this also guards the parser choice.
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "deep", "prompt": ' + open_ * 100_000 + "1" + close * 100_000 + "}\n" + '{"prompt": "p"}\n')
    first, second = _read(path)
    assert isinstance(first, Reject) and "nested deeper" in first.reason and first.line == 1
    assert isinstance(second, Row)


def test_a_zst_file_that_is_not_zstd_is_refused_up_front(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.zst"
    path.write_bytes(b'{"prompt": "plain text, not zstd"}\n')
    with pytest.raises(InputError, match=r"in.jsonl.zst.*a readable JSONL.*ZstdError"):
        check_readable([path])
    assert count_rows_or_none([path]) is None
    (reject,) = _read(path)
    assert isinstance(reject, Reject) and reject.line == 1 and "file unreadable" in reject.reason


def test_a_zst_file_damaged_part_way_keeps_its_rows_and_rejects_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.zst"
    # 4,000 rows of ~33 bytes = ~130 KiB: more than the 64 KiB check_readable looks at.
    good = "".join(json.dumps({"id": f"r{i}", "prompt": "p"}) + "\n" for i in range(4000)).encode()
    path.write_bytes(zstandard.ZstdCompressor().compress(good) + b"\x28\xb5\x2f\xfd garbage frame")
    check_readable([path])  # the start reads
    items = _read(path)
    assert [i.id for i in items[:4000]] == [f"r{i}" for i in range(4000)]
    assert len(items) == 4001 and isinstance(items[4000], Reject) and items[4000].line == 4001
    assert "file unreadable from here on" in items[4000].reason


def test_a_corrupt_parquet_file_is_refused_up_front(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    path.write_bytes(b"PAR1" + b"\x00" * 100 + b"not a parquet footer")
    with pytest.raises(InputError, match=r"in.parquet.*a readable JSONL"):
        check_readable([path])
    (reject,) = _read(path)
    assert isinstance(reject, Reject) and "file unreadable" in reject.reason


# ---- fuzz: no input makes the reader raise; every non-blank line is one row or one reject ----

_line = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.fixed_dictionaries({}, optional={
        "id": st.one_of(st.text(max_size=5), st.integers(), st.none(), st.booleans()),
        "prompt": st.one_of(st.text(max_size=10), st.integers(), st.lists(st.text(max_size=3), max_size=2)),
        "messages": st.lists(st.fixed_dictionaries({}, optional={
            "role": st.sampled_from(["user", "system", "assistant", "bot", 1]),
            "content": st.one_of(st.text(max_size=10), st.none(), st.lists(st.dictionaries(
                st.sampled_from(["type", "text"]), st.text(max_size=4)), max_size=2))}), max_size=3),
        "conversations": st.lists(st.dictionaries(st.sampled_from(["from", "value", "role", "content"]),
                                                  st.sampled_from(["human", "gpt", "user", "x", ""])), max_size=3),
    }).map(lambda d: json.dumps(d).encode()),
    st.sampled_from([rb'{"prompt": "\ud800"}', b'{"prompt": "\xed\xa0\x80"}', b"[" * 3000 + b"]" * 3000,
                     b'{"prompt": 1e999}', b'{"id": ' + b"9" * 5000 + b', "prompt": "p"}', b"   ", b"\xff"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_line, min_size=1, max_size=12))
def test_fuzz_every_line_is_a_row_or_a_reject_or_blank(tmp_path: Path, lines: list[bytes]) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    stats = ReadStats()
    items = list(read_rows([path], stats))
    assert len(items) + stats.blank_lines == len(lines)
    assert [i.line for i in items] == sorted(i.line for i in items)
    for item in items:  # whatever was read can be written to a record or to rejects.jsonl
        if isinstance(item, Row):
            orjson.dumps({"id": item.id, "messages": [[m.role, m.content] for m in item.messages]})
        else:
            orjson.dumps({"file": item.source, "line": item.line, "reason": item.reason, "id": item.id})


def test_a_file_name_that_is_not_utf8_is_stored_with_replacement_characters(tmp_path: Path) -> None:
    name = os.fsdecode(b"in-\xff.jsonl")  # the byte 0xff becomes the lone surrogate U+DCFF in Python
    (tmp_path / name).write_text('{"id": "a", "prompt": "p"}\n')
    (row,) = _read(tmp_path / name)
    assert row.source.endswith("in-\ufffd.jsonl")
    orjson.dumps({"source": row.source})
