"""Run-directory faults: a write refused part-way leaves only whole records, every file fails the
same clean way, one process at a time, duplicates dropped on open."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tokenplan.errors import RunDirError
from tokenplan.runner.store import appendlog as rundir_module
from tokenplan.runner.store.appendlog import WriteFailed, shard_paths, write_whole
from tokenplan.runner.store.record import OutputRecord
from tokenplan.runner.store.rundir import RunDir

JOB = {"model": "m"}


def _half_then_full(monkeypatch) -> None:
    real = os.write
    state = {"calls": 0}

    def write(fd: int, data) -> int:
        state["calls"] += 1
        if state["calls"] == 1:
            return real(fd, bytes(data[: len(data) // 2]))  # half the record reaches the file
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rundir_module, "_write", write)


@pytest.mark.parametrize(
    ("write", "name"),
    [
        ("write_done", "shards/part-00000.jsonl"),
        ("write_skipped", "skipped.jsonl"),
        ("write_error", "errors.jsonl"),
        ("write_reject", "rejects.jsonl"),
    ],
)
def test_a_record_refused_part_way_is_cut_off_and_the_failure_is_one_line(
    tmp_path: Path, monkeypatch, write: str, name: str
) -> None:
    def record(data: dict) -> object:  # write_done takes the typed record, the others a dict
        return OutputRecord.from_json(data) if write == "write_done" else data

    run = RunDir.open(tmp_path, JOB)
    getattr(run, write)(record({"id": "whole"}))
    _half_then_full(monkeypatch)
    with pytest.raises(WriteFailed) as caught:
        getattr(run, write)(record({"id": "torn", "fields": {"text": "x" * 1000}}))
    assert "No space left on device" in str(caught.value) and "\n" not in str(caught.value)
    # only the whole record is left (a stored record's line: runner.store.record's keys, all empty)
    assert (tmp_path / name).read_bytes() == (
        b'{"id":"whole","conversations":[],"turns":[],"source_id":null,"sample_index":null,"model":null,'
        b'"sampling":null,"source":{"file":null,"line":null}}\n'
        if write == "write_done"
        else b'{"id":"whole"}\n'
    )
    monkeypatch.setattr(rundir_module, "_write", os.write)
    getattr(run, write)(record({"id": "after"}))  # once there is room the file goes on from its last record
    run.close()
    assert [json.loads(line)["id"] for line in (tmp_path / name).read_text().splitlines()] == ["whole", "after"]


def test_a_summary_that_cannot_be_written_leaves_the_old_one(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old")
    monkeypatch.setattr(
        os, "replace", lambda *_: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device"))
    )
    with pytest.raises(WriteFailed, match="summary.json.*No space left"):
        write_whole(target, b"new")
    assert target.read_text() == "old" and not (tmp_path / "summary.json.tmp").exists()


def test_a_second_open_of_a_locked_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first = RunDir.open(tmp_path, JOB)
    with pytest.raises(RunDirError, match=rf"in use by another tokenplan generate \(pid {os.getpid()}\)"):
        RunDir.open(tmp_path, JOB)
    first.close()
    RunDir.open(tmp_path, JOB).close()  # released by close


def test_duplicate_records_are_dropped_on_open_keeping_the_first(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    for unit_id, text in (("a", "first"), ("b", "b"), ("a", "second"), ("a", "third")):
        run.shards.append({"id": unit_id, "text": text})  # as two processes without a lock wrote
    run.write_skipped({"id": "b"})  # also a duplicate of a stored record
    run.close()
    reopened = RunDir.open(tmp_path, JOB)
    reopened.close()
    assert reopened.stats.duplicate_ids == 3 and reopened.done_ids == {"a", "b"}
    shard = shard_paths(tmp_path / "shards")[0]
    assert [json.loads(line)["text"] for line in shard.read_text().splitlines()] == ["first", "b"]
    assert (tmp_path / "skipped.jsonl").read_text() == ""


def test_a_manifest_that_cannot_be_written_is_one_line_and_releases_the_lock(tmp_path: Path, monkeypatch) -> None:
    real_replace = os.replace

    def full(*args) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(WriteFailed, match="manifest.json.*No space left"):
        RunDir.open(tmp_path, JOB)
    monkeypatch.setattr(os, "replace", real_replace)
    RunDir.open(tmp_path, JOB).close()  # the lock was released: the next open works
