"""The run directory: torn tails cut, done-set rebuilt, another job refused, rotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.errors import RunDirError
from tokenplan.runner.store.appendlog import shard_paths
from tokenplan.runner.store.rundir import RunDir, cut_torn_tail

JOB = {"model": "m", "sampling": {"temperature": 0.0}}


def test_a_torn_last_line_is_cut_and_its_id_is_not_done(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done({"id": "a", "turns": []})
    run.close()
    shard = shard_paths(tmp_path / "shards")[0]
    with shard.open("ab") as fh:
        fh.write(b'{"id": "b", "conversa')  # a write cut short by kill -9
    reopened = RunDir.open(tmp_path, JOB)
    assert reopened.done_ids == {"a"} and reopened.stats.torn_bytes == len(b'{"id": "b", "conversa')
    reopened.write_done({"id": "b", "turns": []})
    reopened.close()
    assert [json.loads(line)["id"] for line in shard.read_text().splitlines()] == ["a", "b"]


def test_cut_torn_tail_keeps_complete_files_and_empties_a_single_torn_line(tmp_path: Path) -> None:
    whole, torn = tmp_path / "whole.jsonl", tmp_path / "torn.jsonl"
    whole.write_bytes(b'{"id": 1}\n')
    torn.write_bytes(b'{"id": 1')
    assert (cut_torn_tail(whole), cut_torn_tail(torn)) == (0, 8)
    assert torn.read_bytes() == b""


def test_skipped_units_count_as_done_errors_and_rejects_do_not(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_skipped({"id": "s"})
    run.write_error({"id": "e"})
    run.write_reject({"file": "f", "line": 3, "reason": "bad"})
    run.close()
    again = RunDir.open(tmp_path, JOB)
    assert again.done_ids == {"s"}
    assert (tmp_path / "errors.jsonl").read_text() == ""  # the new run retries them and starts a fresh file
    again.close()


def test_another_job_is_refused_naming_what_changed_unless_forced(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done({"id": "a", "turns": []})  # a stored answer: the directory is bound to JOB
    run.close()
    other = {"model": "m", "sampling": {"temperature": 0.7}}
    with pytest.raises(RunDirError, match=r"different job \(sampling\.temperature: 0\.0 → 0\.7\); .*--force"):
        RunDir.open(tmp_path, other)
    RunDir.open(tmp_path, other, force=True).close()
    RunDir.open(tmp_path, other).close()  # the manifest now records the new configuration


def test_a_directory_without_a_stored_answer_takes_the_corrected_job_and_resends_its_skipped(tmp_path: Path) -> None:
    # A first run that stored nothing (every row refused, or a wrong --model): its manifest binds nothing.
    run = RunDir.open(tmp_path, JOB)
    run.write_skipped({"id": "s1"})
    run.write_skipped({"id": "s2"})
    run.close()
    with (tmp_path / "shards" / "part-00000.jsonl").open("ab") as fh:
        fh.write(b'{"id": "torn')  # a torn line is not a stored answer either
    other = {"model": "m", "sampling": {"temperature": 0.7}}
    rebound = RunDir.open(tmp_path, other)
    assert rebound.done_ids == set()  # s1, s2 were the old configuration's outcomes: sent again
    assert any("held no stored answer" in note and "0.0 → 0.7" in note for note in rebound.notes)
    assert any(note.startswith("2 skipped units are sent again") for note in rebound.notes)
    rebound.close()
    assert [json.loads(line)["id"] for line in (tmp_path / "skipped.retried.jsonl").read_text().splitlines()] == [
        "s1",
        "s2",
    ]
    assert json.loads((tmp_path / "manifest.json").read_text())["job"] == other


def test_retry_skipped_sends_skipped_units_again_and_keeps_the_stored_ones(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done({"id": "a", "turns": []})
    run.write_skipped({"id": "s"})
    run.close()
    plain = RunDir.open(tmp_path, JOB)
    assert plain.done_ids == {"a", "s"}  # skipped is final by default
    plain.close()
    again = RunDir.open(tmp_path, JOB, retry_skipped=True)
    assert again.done_ids == {"a"} and again.notes == [
        "1 skipped units are sent again (the earlier skipped.jsonl is kept as skipped.retried.jsonl)"
    ]
    again.close()


def test_a_damaged_line_in_the_middle_is_an_error_not_silently_dropped(tmp_path: Path) -> None:
    RunDir.open(tmp_path, JOB).close()
    (tmp_path / "shards" / "part-00000.jsonl").write_text('{"id": "a"}\ngarbage\n{"id": "c"}\n')
    with pytest.raises(RunDirError, match="part-00000.jsonl:2: damaged record"):
        RunDir.open(tmp_path, JOB)


def test_shards_rotate_once_past_their_size(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB, shard_max_bytes=100)
    for i in range(5):
        run.write_done({"id": f"r{i}", "pad": "x" * 60})  # each line ≈ 80 bytes: 2 per 100-byte shard
    run.close()
    shards = shard_paths(tmp_path / "shards")
    assert [len(p.read_text().splitlines()) for p in shards] == [2, 2, 1]
    assert RunDir.open(tmp_path, JOB).done_ids == {f"r{i}" for i in range(5)}


def test_records_are_one_compact_utf8_line_each(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done({"id": "é", "turns": [{"latency_s": 0.25, "usage": None}]})
    run.close()
    shard = shard_paths(tmp_path / "shards")[0]
    assert shard.read_bytes() == '{"id":"é","turns":[{"latency_s":0.25,"usage":null}]}\n'.encode()
    reopened = RunDir.open(tmp_path, JOB)
    assert reopened.done_ids == {"é"}
    reopened.close()
