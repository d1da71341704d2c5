"""Issue 26: every value a record will carry is checked before sending, so a bad row is one
reject line (file, line, reason naming the field) and never a crash when its answer is stored.

Limits come from orjson itself (measured: 254 nested containers serialize, 255 raise "Recursion
limit reached"), and the boundary tests store a real record through :class:`AppendLog`, so they
fail if the arithmetic of where a value sits in a record is off by one.
"""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path

import orjson
import pytest

from tokenplan.runner.input.rows import Reject, read_rows
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.input.storable import MAX_RECORD_DEPTH, Unstorable, check_fields
from tokenplan.runner.store.appendlog import AppendLog


def _nested(levels: int) -> str:
    """JSON text of ``levels`` nested lists around 1: ``_nested(2)`` is ``[[1]]``."""
    return "[" * levels + "1" + "]" * levels


def _read(tmp_path: Path, *lines: str) -> list[Row | Reject]:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return list(read_rows([path]))


def _record(row: Row) -> dict:
    """The record the runner stores for ``row`` (runner.requests.stored_record): the same
    places for the row's values, with one generated answer."""
    conversations = [m.as_dict() for m in row.messages] + [{"role": "assistant", "content": "a"}]
    record = {
        "id": row.id,
        "conversations": conversations,
        "turns": [{"finish_reason": "stop"}],
        "fields": dict(row.fields),
        "source": {"file": row.source, "line": row.line},
    }
    if row.overrides:
        record["request_overrides"] = dict(row.overrides)
    return record


def test_orjson_still_has_the_limit_the_checks_assume() -> None:
    # If orjson changes its limit, MAX_RECORD_DEPTH must follow.
    assert orjson.loads(orjson.dumps(json.loads(_nested(MAX_RECORD_DEPTH)))) is not None
    with pytest.raises(orjson.JSONEncodeError, match="Recursion limit"):
        orjson.dumps(json.loads(_nested(MAX_RECORD_DEPTH + 1)))


def test_an_extra_field_at_the_limit_is_stored_and_one_level_deeper_is_a_reject(tmp_path: Path) -> None:
    # A row's other field sits in the record under 2 containers (record → fields), so it may nest
    # 254 − 2 = 252 levels.
    ok, deep, after = _read(
        tmp_path,
        '{"id": "ok", "prompt": "p", "meta": ' + _nested(252) + "}",
        '{"id": "deep", "prompt": "p", "meta": ' + _nested(253) + "}",
        '{"id": "after", "prompt": "p"}',
    )
    assert isinstance(ok, Row) and isinstance(after, Row)
    log = AppendLog(tmp_path / "part.jsonl")
    log.append(_record(ok))  # stores: the check allowed exactly what orjson writes
    log.close()
    assert isinstance(deep, Reject) and deep.line == 2 and deep.id == "deep"
    assert deep.reason.startswith("meta: nested more than 252 levels deep")


def test_tool_calls_at_the_limit_are_stored_and_one_level_deeper_is_a_reject(tmp_path: Path) -> None:
    # An assistant turn's tool_calls sit under 3 containers (record → conversations → the turn):
    # 254 − 3 = 251 levels.
    def row(row_id: str, levels: int) -> str:
        return (
            '{"id": "' + row_id + '", "messages": [{"role": "user", "content": "u"}, {"role": "assistant", '
            '"content": null, "tool_calls": ' + _nested(levels) + '}, {"role": "tool", "content": "t"}]}'
        )

    ok, deep = _read(tmp_path, row("ok", 251), row("deep", 252))
    assert isinstance(ok, Row)
    log = AppendLog(tmp_path / "part.jsonl")
    log.append(_record(ok))
    log.close()
    assert isinstance(deep, Reject) and deep.reason.startswith("messages[1].tool_calls: nested more than 251 levels")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # a lone surrogate outside the messages: an extra field, a field's key, tool_calls, a Batch stop
        (r'{"id": "a", "prompt": "p", "note": "x\ud800"}', r"note: lone UTF-16 surrogate '\ud800' at character 1"),
        (r'{"id": "a", "prompt": "p", "k\udfff": 1}', r"k\udfff: lone UTF-16 surrogate '\udfff' at character 1"),
        (
            r'{"id": "a", "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "",'
            r' "tool_calls": [{"id": "\ud801"}]}, {"role": "tool", "content": "t"}]}',
            r"messages[1].tool_calls[0].id: lone UTF-16 surrogate '\ud801' at character 0",
        ),
        (
            r'{"custom_id": "a", "body": {"messages": [{"role": "user", "content": "u"}], "stop": ["\ud800"]}}',
            r"body.stop[0]: lone UTF-16 surrogate '\ud800' at character 0",
        ),
        (r'{"id": "a", "prompt": "p", "system": "s\ud800"}', r"system: lone UTF-16 surrogate '\ud800' at character 1"),
        # NaN and Infinity: json reads them, orjson would write null
        ('{"id": "a", "prompt": "p", "score": NaN}', "score: nan is not a finite number"),
        ('{"id": "a", "prompt": "p", "s": {"t": [-Infinity]}}', "s.t[0]: -inf is not a finite number"),
        (
            '{"custom_id": "a", "body": {"messages": [{"role": "user", "content": "u"}], "temperature": NaN}}',
            "body.temperature: nan is not a finite number",
        ),
        # integers past 64 bits stay exact (2^64 = 18446744073709551616) and are refused by name
        ('{"id": "a", "prompt": "p", "n": 18446744073709551616}', "n: integer 18446744073709551616 is outside"),
        ('{"id": "a", "prompt": "p", "n": -9223372036854775809}', "n: integer -9223372036854775809 is outside"),
        (
            '{"custom_id": "a", "body": {"messages": [{"role": "user", "content": "u"}], "seed": 9223372036854775808}}',
            "body.seed: integer 9223372036854775808 is outside the 64-bit range -2^63 … 2^63-1",
        ),
    ],
)
def test_a_value_no_record_can_hold_is_a_reject_naming_it_and_the_next_row_is_read(
    tmp_path: Path, line: str, reason: str
) -> None:
    bad, good = _read(tmp_path, line, '{"id": "b", "prompt": "fine"}')
    assert isinstance(bad, Reject) and bad.line == 1 and bad.reason.startswith(reason), bad
    assert "\n" not in bad.reason
    orjson.dumps({"file": bad.source, "line": bad.line, "reason": bad.reason, "id": bad.id})  # rejects.jsonl holds it
    assert isinstance(good, Row) and good.id == "b"


def test_the_64_bit_edges_are_kept_exactly(tmp_path: Path) -> None:
    # -2^63 and 2^63 − 1 are the last integers allowed; orjson must read them exactly (not as floats).
    (row,) = _read(tmp_path, '{"id": "a", "prompt": "p", "lo": -9223372036854775808, "hi": 9223372036854775807}')
    assert isinstance(row, Row) and row.fields == {"lo": -(2**63), "hi": 2**63 - 1}
    assert orjson.loads(orjson.dumps(_record(row)))["fields"] == {"lo": -(2**63), "hi": 2**63 - 1}


def test_parquet_values_json_cannot_hold_are_rejects(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "in.parquet"
    pq.write_table(
        pa.table({"prompt": ["p1", "p2", "p3"], "blob": [None, b"\x00\x01", None], "score": [1.5, None, float("nan")]}),
        path,
    )
    first, second, third = read_rows([path])
    assert isinstance(first, Row) and first.fields == {"blob": None, "score": 1.5}
    assert isinstance(second, Reject)
    assert second.reason.startswith("blob: a bytes value (b'\\x00\\x01') cannot be stored")
    assert isinstance(third, Reject) and third.reason.startswith("score: nan is not a finite number")


def test_check_fields_refuses_other_python_types_and_keys_by_name() -> None:
    with pytest.raises(Unstorable, match=r"^x\.d: a Decimal value \(Decimal\('1\.5'\)\) cannot be stored"):
        check_fields({"x": {"d": decimal.Decimal("1.5")}}, "", 2)
    with pytest.raises(Unstorable, match=r"^x: key 3 is a int, not text"):
        check_fields({"x": {3: "v"}}, "", 2)
    with pytest.raises(Unstorable, match=r"^a\\nb: nested more than 1 levels"):  # line break escaped: one line
        check_fields({"a\nb": [[1]]}, "", MAX_RECORD_DEPTH - 1)
    # Parquet dates and times: orjson writes them as text, except a time of day with a zone, which it refuses
    utc = datetime.timezone.utc
    values = {
        "at": datetime.datetime(2025, 1, 2, 3, 4, tzinfo=utc),
        "day": datetime.date(2025, 1, 2),
        "clock": datetime.time(3, 4),
    }
    check_fields(values, "", 2)
    assert orjson.loads(orjson.dumps(values)) == {
        "at": "2025-01-02T03:04:00+00:00",
        "day": "2025-01-02",
        "clock": "03:04:00",
    }
    with pytest.raises(Unstorable, match=r"^t: a time of day with a time zone"):
        check_fields({"t": datetime.time(3, 4, tzinfo=utc)}, "", 2)
    with pytest.raises(orjson.JSONEncodeError):  # what the check keeps from reaching the store
        orjson.dumps({"t": datetime.time(3, 4, tzinfo=utc)})


def test_a_row_ending_in_an_unanswered_tool_call_is_refused_in_regenerate_only(tmp_path: Path) -> None:
    # regenerate asks the model after each user or tool turn; a trailing assistant tool call has no
    # tool result to continue from, so the row was stored with no request sent ("[ok]", 0 requests)
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
        ],
    }
    ends_in_call = json.dumps({"id": "t1", "messages": [{"role": "user", "content": "Weather in Paris?"}, call]})
    answered = json.dumps(
        {
            "id": "t2",
            "messages": [
                {"role": "user", "content": "Weather?"},
                call,
                {"role": "tool", "tool_call_id": "c1", "content": "12 C"},
            ],
        }
    )
    first, second = _read(tmp_path, ends_in_call, answered)
    assert isinstance(first, Reject) and first.id == "t1" and first.line == 1
    assert "ends in an assistant tool call with no tool turn answering it" in first.reason
    assert isinstance(second, Row)
    # complete mode sends the turns up to the last user or tool turn, as documented: the row is usable
    path = tmp_path / "in.jsonl"
    assert all(isinstance(item, Row) for item in read_rows([path], mode="complete"))
