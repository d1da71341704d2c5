"""The run's one compact id set: done-set and duplicate-row check by 64-bit key, the resume scan
that reads ids from the start of each line, and duplicate records dropped only on exact ids."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from tokenplan.errors import RunDirError
from tokenplan.runner.finish import count_outcomes
from tokenplan.runner.input.rows import ExactIds, Reject, read_rows
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.store import record_ids as record_ids_module
from tokenplan.runner.store.appendlog import shard_paths
from tokenplan.runner.store.idset import IdSet, id_key
from tokenplan.runner.store.record import OutputRecord
from tokenplan.runner.store.record_ids import record_id, repeated_keys
from tokenplan.runner.store.rundir import RunDir

JOB = {"model": "m", "sampling": {"temperature": 0.0}}


def _stored(*ids: str) -> IdSet:
    keys, _ = repeated_keys(array("Q", [id_key(i) for i in ids]))
    return IdSet(keys)


def test_stored_and_added_ids_are_done_and_counted_once() -> None:
    done = _stored("a", "b#0", "b#1")
    assert "a" in done and "b#1" in done and "c" not in done and 7 not in done
    done.add("c")
    done.add("a")  # already stored: not counted again
    assert "c" in done and len(done) == 4  # a, b#0, b#1 stored + c added
    assert done == {"a", "b#0", "b#1", "c"} and done != {"a", "b#0", "b#1", "d"}


def test_a_row_id_is_a_first_sighting_once_whether_stored_or_not() -> None:
    ids = _stored("a")
    assert [ids.first_sighting(i) for i in ("a", "x", "a", "x", "y")] == [True, True, False, False, True]
    assert "x" not in ids  # seen as a row is not done
    exact = ExactIds()
    assert [exact.first_sighting(i) for i in ("a", "a")] == [True, False]


def test_the_stored_ids_take_nine_bytes_each() -> None:
    # 8 bytes of key (uint64) + 1 byte "seen as a row" mark per stored id: 1,000 ids → 9,000 bytes.
    assert _stored(*(f"r{i}" for i in range(1000))).nbytes == 9000


def test_the_key_is_blake2b_with_an_8_byte_digest_little_endian() -> None:
    # RFC 7693 test vector for BLAKE2b-512 of "abc" cannot be truncated (the digest size is a
    # parameter of the hash), so compare against hashlib's BLAKE2b-64 directly.
    import hashlib

    digest = hashlib.blake2b(b"abc", digest_size=8).digest()
    assert id_key("abc") == int.from_bytes(digest, "little") and 0 <= id_key("é\ud800") < 2**64


def test_ids_are_read_from_the_line_start_and_other_lines_are_parsed_whole(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    assert record_id(b'{"id":"r-1","turns":[]}\n', path, 1) == "r-1"
    assert record_id('{"id":"é","x":1}\n'.encode(), path, 1) == "é"
    assert record_id(b'{"id":"a\\"b","x":1}\n', path, 1) == 'a"b'  # escaped: parsed whole
    assert record_id(b'{"turns": [], "id": "late"}\n', path, 1) == "late"  # another key order
    with pytest.raises(RunDirError, match=r"f.jsonl:3: damaged record"):
        record_id(b'{"id": 5}\n', path, 3)
    with pytest.raises(RunDirError, match=r"f.jsonl:4: damaged record"):
        record_id(b'{"id":"a","x":\n', path, 4)  # the fast path needs the closing brace


def test_the_resume_scan_agrees_with_the_writer_on_awkward_ids(tmp_path: Path) -> None:
    ids = ["plain", 'quote"d', "back\\slash", "tab\there", "ünï", "emoji 🙂", "#0", ""]
    run = RunDir.open(tmp_path, JOB)
    for unit_id in ids:
        run.write_done(
            OutputRecord.from_json({"id": unit_id, "conversations": [{"role": "user", "content": '{"id":"fake"}'}]})
        )
    run.close()
    again = RunDir.open(tmp_path, JOB)
    again.close()
    assert again.done_ids == set(ids) and "fake" not in again.done_ids and again.stats.stored == len(ids)


def test_records_sharing_a_key_are_both_kept_and_only_exact_repeats_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every id gets the same key, as if all of them collided: a, b, a → the second a is dropped,
    # b stays though its key matches a's.
    monkeypatch.setattr(record_ids_module, "id_key", lambda unit_id: 7)
    run = RunDir.open(tmp_path, JOB)
    for unit_id, text in (("a", "first"), ("b", "b"), ("a", "second")):
        run.shards.append({"id": unit_id, "text": text})
    run.close()
    reopened = RunDir.open(tmp_path, JOB)
    reopened.close()
    shard = shard_paths(tmp_path / "shards")[0]
    assert [json.loads(line)["text"] for line in shard.read_text().splitlines()] == ["first", "b"]
    assert reopened.stats.duplicate_ids == 1 and reopened.stats.stored == 2


def test_outcomes_are_counted_by_exact_id_even_when_keys_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = RunDir.open(tmp_path, JOB)
    for unit_id in ("a", "b", "c"):
        run.write_done(OutputRecord.from_json({"id": unit_id}))
    run.write_skipped({"id": "s"})
    run.write_error({"id": "a", "kind": "status"})  # an error for a stored id: a duplicate
    run.close()
    # 3 stored + 1 skipped + 0 errors (its id "a" is stored) + 1 duplicate; the same with every
    # key equal (the exact ids decide).
    expected = {"stored": 3, "skipped": 1, "errors": 0, "duplicates": 1, "outside_input": 0}
    assert count_outcomes(tmp_path) == expected
    # "b" and "s" are outside the input: counted apart, once each, not as stored or skipped
    apart = {id_key("b"), id_key("s")}
    assert count_outcomes(tmp_path, apart) == {**expected, "stored": 2, "skipped": 0, "outside_input": 2}
    monkeypatch.setattr(record_ids_module, "id_key", lambda unit_id: 7)
    assert count_outcomes(tmp_path) == expected


def test_stored_ids_no_unit_of_the_input_asked_for_are_outside_it() -> None:
    done = _stored("a", "b#0", "b#1", "c")
    # the input now holds a and b (2 samples each); c was an earlier input's
    assert [done.done_for_input(u) for u in ("a", "b#0", "b#1", "x")] == [True, True, True, False]
    assert done.stored_outside_input() == {id_key("c")}
    assert done.done_for_input("c") and done.stored_outside_input() == set()


def test_the_reader_uses_the_run_directory_set_for_duplicate_rows(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done(OutputRecord.from_json({"id": "a"}))
    run.close()
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": i, "prompt": "q"}) + "\n" for i in ("a", "b", "a", "b", "c")))
    resumed = RunDir.open(tmp_path, JOB)
    items = list(read_rows([data], seen=resumed.done_ids))
    resumed.close()
    assert [type(i).__name__ for i in items] == ["Row", "Row", "Reject", "Reject", "Row"]
    assert [i.id for i in items if isinstance(i, Row)] == ["a", "b", "c"]
    assert all(i.reason.startswith("duplicate id") for i in items if isinstance(i, Reject))
    assert "a" in resumed.done_ids and "b" not in resumed.done_ids


def test_generate_runs_on_uvloop_only_where_installed_and_not_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenplan.runner.local import event_loop_factory

    monkeypatch.setenv("TOKENPLAN_UVLOOP", "0")
    assert event_loop_factory() is None
    monkeypatch.delenv("TOKENPLAN_UVLOOP")
    try:
        import uvloop
    except ImportError:
        assert event_loop_factory() is None
    else:
        assert event_loop_factory() is uvloop.new_event_loop


def test_repeated_keys_merges_sorted_runs_and_finds_repeats_across_them(monkeypatch) -> None:
    from tokenplan.runner.store import record_ids

    monkeypatch.setattr(record_ids, "SORT_RUN_KEYS", 3)  # runs [9, 2, 7] [2, 5, 9] [1, 1]
    keys = array("Q", [9, 2, 7, 2, 5, 9, 1, 1])
    unique, repeated = record_ids.repeated_keys(keys)
    # sorted and unique: 1, 2, 5, 7, 9; 2 and 9 repeat across runs, 1 within its run
    assert list(unique) == [1, 2, 5, 7, 9]
    assert repeated == {1, 2, 9}
    assert len(keys) == 0  # handed over: the caller's array is emptied
    assert record_ids.repeated_keys(array("Q")) == (array("Q"), set())
