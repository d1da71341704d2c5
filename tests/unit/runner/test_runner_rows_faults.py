"""Rows that cannot be read or stored become rejects with file, line and reason; a file that cannot
be read at all is refused up front; a fuzz test shows every line ends up a row or a reject."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplan.errors import InputError
from tokenplan.runner.input.files import InputBroken, ReadStats, check_readable, count_rows_or_none
from tokenplan.runner.input.rows import Reject, read_rows
from tokenplan.runner.input.shapes import Row


def _read(path: Path) -> list[Row | Reject]:
    return list(read_rows([path]))


@pytest.mark.parametrize(
    "line",
    [
        rb'{"id": "a", "prompt": "x\ud800"}',  # an escaped lone surrogate, with an id
        rb'{"prompt": "x\ud800"}',  # and without one (the id would hash it)
        b'{"id": "a", "prompt": "x\xed\xa0\x80"}',  # the raw bytes of a lone surrogate
        rb'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]}',
        rb'{"id": "\ud800", "prompt": "fine"}',  # in the id itself
    ],
)
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


def _compressed(path: Path, data: bytes, codec: str) -> bytes:
    with pa.output_stream(path, compression=codec) as out:
        out.write(data)
    return path.read_bytes()


def test_a_zst_file_that_is_not_zstd_is_refused_up_front(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.zst"
    path.write_bytes(b'{"prompt": "plain text, not zstd"}\n')
    # its first bytes are no zstd frame's (28 b5 2f fd): said as such, not "truncated or damaged
    # at byte 35 of 35" (a new-user pass found that for plain JSONL named .gz)
    with pytest.raises(
        InputError,
        match=r"in.jsonl.zst' is not allowed \(allowed: a file whose name says its format: this one holds "
        r"uncompressed text, its name says zstd \(rename it without .zst\)\)",
    ):
        check_readable([path])
    assert count_rows_or_none([path]) is None
    with pytest.raises(InputBroken, match="last row read: none"):
        _read(path)


# 4,000 rows of 34 bytes ('{"id": "r0", "prompt": "p"}' + newline, ids up to r3999) = ~135 KB:
# more than the 64 KiB one read decodes, so the rows before the break are reached.
GOOD = "".join(json.dumps({"id": f"r{i}", "prompt": "p"}) + "\n" for i in range(4000)).encode()


@pytest.mark.parametrize(("suffix", "codec"), [("zst", "zstd"), ("gz", "gzip"), ("bz2", "bz2"), ("lz4", "lz4")])
def test_a_truncated_compressed_file_is_refused_up_front_naming_byte_and_last_row(
    tmp_path: Path, suffix: str, codec: str
) -> None:
    # An interrupted copy: the stream stops before its last frame/block ends. zstandard's reader
    # returned what it had and ended quietly (rows lost, run [ok]); pyarrow's raises.
    whole = _compressed(tmp_path / f"whole.jsonl.{suffix}", GOOD, codec)
    for cut in (len(whole) - 3, 20):  # near the end; inside the first block
        path = tmp_path / f"cut{cut}.jsonl.{suffix}"
        path.write_bytes(whole[:cut])
        with pytest.raises(InputBroken) as refused:
            check_readable([path])
        message = str(refused.value)
        assert (
            "\n" not in message
            and f"cut{cut}.jsonl.{suffix}' is truncated or damaged at byte {cut:,} of {cut:,}" in message
            and "last row read: " in message
        )
        assert count_rows_or_none([path]) is None
        items = read_rows([path])  # read anyway (the file changed after the check): rows, then the error
        got = []
        with pytest.raises(InputBroken) as broken:
            got.extend(items)
        assert [i.id for i in got] == [f"r{i}" for i in range(len(got))]
        assert f"last row read: {f'line {len(got):,}' if got else 'none'};" in str(broken.value)


def test_a_zst_file_damaged_part_way_keeps_its_rows_then_stops(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.zst"
    path.write_bytes(_compressed(tmp_path / "good.zst", GOOD, "zstd") + b"\x28\xb5\x2f\xfd garbage frame")
    with pytest.raises(InputBroken, match=r"Data corruption detected|Unknown frame|ZSTD decompress failed"):
        check_readable([path])
    got, items = [], read_rows([path])
    with pytest.raises(InputBroken, match=r"in.jsonl.zst' is truncated or damaged at byte [\d,]+ of [\d,]+ "):
        got.extend(items)
    assert [i.id for i in got] == [f"r{i}" for i in range(len(got))] and len(got) >= 4000 - 2048  # 64 KiB lost at most


def test_a_corrupt_parquet_file_is_refused_up_front(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    path.write_bytes(b"PAR1" + b"\x00" * 100 + b"not a parquet footer")
    with pytest.raises(InputError, match=r"in.parquet.*a readable JSONL"):
        check_readable([path])
    with pytest.raises(InputBroken, match=r"in.parquet' is truncated or damaged .*last row read: none"):
        _read(path)


# ---- fuzz: no input makes the reader raise; every non-blank line is one row or one reject ----

_line = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.one_of(st.text(max_size=5), st.integers(), st.none(), st.booleans()),
            "prompt": st.one_of(st.text(max_size=10), st.integers(), st.lists(st.text(max_size=3), max_size=2)),
            "messages": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "role": st.sampled_from(["user", "system", "assistant", "bot", 1]),
                        "content": st.one_of(
                            st.text(max_size=10),
                            st.none(),
                            st.lists(
                                st.dictionaries(st.sampled_from(["type", "text"]), st.text(max_size=4)), max_size=2
                            ),
                        ),
                    },
                ),
                max_size=3,
            ),
            "conversations": st.lists(
                st.dictionaries(
                    st.sampled_from(["from", "value", "role", "content"]),
                    st.sampled_from(["human", "gpt", "user", "x", ""]),
                ),
                max_size=3,
            ),
        },
    ).map(lambda d: json.dumps(d).encode()),
    st.sampled_from(
        [
            rb'{"prompt": "\ud800"}',
            b'{"prompt": "\xed\xa0\x80"}',
            b"[" * 3000 + b"]" * 3000,
            b'{"prompt": 1e999}',
            b'{"id": ' + b"9" * 5000 + b', "prompt": "p"}',
            b"   ",
            b"\xff",
        ]
    ),
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


def test_a_parquet_or_gzip_file_named_jsonl_is_refused_by_what_it_holds(tmp_path: Path) -> None:
    # a new-user pass: a Parquet or gzip file named .jsonl had every row rejected as
    # "'utf-8' codec can't decode…"; its first bytes say what it is (Parquet "PAR1", gzip 1f 8b)
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet, packed = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    pq.write_table(pa.table({"id": ["r0"], "prompt": ["p"]}), parquet)
    packed.write_bytes(gzip.compress(b'{"id": "r0", "prompt": "p"}\n'))
    with pytest.raises(
        InputError,
        match=r"holds Parquet data, its name says uncompressed JSON or JSONL \(rename it to end in .parquet\)",
    ):
        check_readable([parquet])
    with pytest.raises(
        InputError, match=r"holds gzip data, its name says uncompressed JSON or JSONL \(rename it to end in .jsonl.gz\)"
    ):
        check_readable([packed])
    packed.rename(tmp_path / "b.jsonl.gz")
    check_readable([tmp_path / "b.jsonl.gz"])  # named as what it holds: read


def test_a_utf16_file_is_refused_as_such(tmp_path: Path) -> None:
    # a second break-it pass: UTF-16 JSONL (with its byte-order mark) was split on its 0x0a bytes
    # into rows of half characters, "4 usable, 2 rejected"
    path = tmp_path / "u16.jsonl"
    path.write_text('{"id": "r0", "prompt": "p"}\n', encoding="utf-16")
    with pytest.raises(InputError, match=r"u16.jsonl' is not allowed \(allowed: UTF-8 text \(this file is UTF-16"):
        check_readable([path])
