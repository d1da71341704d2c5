"""The run directory: torn tails cut, done-set rebuilt, another job refused, rotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.errors import RunDirError
from tokenplan.runner.store.appendlog import shard_paths
from tokenplan.runner.store.record import OutputRecord, TurnRecord, TurnUsage, stored_records
from tokenplan.runner.store.rundir import RunDir, cut_torn_tail

JOB = {"model": "m", "sampling": {"temperature": 0.0}}


def test_a_torn_last_line_is_cut_and_its_id_is_not_done(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done(OutputRecord.from_json({"id": "a", "turns": []}))
    run.close()
    shard = shard_paths(tmp_path / "shards")[0]
    with shard.open("ab") as fh:
        fh.write(b'{"id": "b", "conversa')  # a write cut short by kill -9
    reopened = RunDir.open(tmp_path, JOB)
    assert reopened.done_ids == {"a"} and reopened.stats.torn_bytes == len(b'{"id": "b", "conversa')
    reopened.write_done(OutputRecord.from_json({"id": "b", "turns": []}))
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
    run.write_done(OutputRecord.from_json({"id": "a", "turns": []}))  # a stored answer: the directory is bound to JOB
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
    run.write_done(OutputRecord.from_json({"id": "a", "turns": []}))
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


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ('"turns": [1]', "turns: not a list of objects"),
        ('"conversations": [1]', "conversations: not a list of objects"),
        ('"conversations": "abc"', "conversations: not a list of objects"),
        ('"fields": "abc"', "fields: not an object"),
    ],
)
def test_a_hand_edited_record_of_the_wrong_shape_is_a_damaged_record_not_a_traceback(
    tmp_path: Path, edit: str, why: str
) -> None:
    from tokenplan.runner.store.record import stored_records

    RunDir.open(tmp_path, JOB).close()
    (tmp_path / "shards" / "part-00000.jsonl").write_text('{"id": "a"}\n{"id": "b", ' + edit + "}\n")
    with pytest.raises(RunDirError, match=f"part-00000.jsonl:2: damaged record \\({why}\\)"):
        list(stored_records(tmp_path))
    assert [r.id for r in stored_records(tmp_path, damaged="skip")] == ["a"]


def test_shards_rotate_once_past_their_size(tmp_path: Path) -> None:
    # OutputRecord.from_json({"id": "rN"}) is written as
    # {"id":"rN","conversations":[],"turns":[],"source_id":null,"sample_index":null,"model":null,
    #  "sampling":null,"source":{"file":null,"line":null}} and a newline:
    # 11 + 19 + 11 + 17 + 20 + 13 + 16 + 34 + 1 ("}") + 1 ("\n") = 143 bytes. A shard rotates once
    # it has reached its size, so with 200 bytes a shard takes 2 lines (143 < 200 ≤ 286).
    run = RunDir.open(tmp_path, JOB, shard_max_bytes=200)
    for i in range(5):
        run.write_done(OutputRecord.from_json({"id": f"r{i}"}))
    run.close()
    shards = shard_paths(tmp_path / "shards")
    assert [len(p.read_bytes()) for p in shards] == [286, 286, 143]
    assert RunDir.open(tmp_path, JOB).done_ids == {f"r{i}" for i in range(5)}


def test_records_are_one_compact_utf8_line_each(tmp_path: Path) -> None:
    # The line every earlier version wrote for this unit (the key order and the compact, UTF-8 form
    # of runner.store.record's docstring, spelled out by hand): run directories keep resuming.
    record = OutputRecord(
        "é",
        ({"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}),
        (TurnRecord("stop", False, False, TurnUsage(3, 2, 1), "http://e/v1", 0.25, None, 1, 7, 0, "m"),),
        request_overrides={"max_tokens": 9},
        fields={"topic": "ü"},
        source_id="é",
        sample_index=0,
        model="m",
        sampling={"temperature": 0.0},
        source_file="in.jsonl",
        source_line=3,
    )
    run = RunDir.open(tmp_path, JOB)
    run.write_done(record)
    run.close()
    shard = shard_paths(tmp_path / "shards")[0]
    expected = (
        '{"id":"é","conversations":[{"role":"user","content":"q"},'
        '{"role":"assistant","content":"a","reasoning_content":"r"}],'
        '"turns":[{"finish_reason":"stop","length_flag":false,"reasoning_truncated":false,'
        '"usage":{"prompt_tokens":3,"completion_tokens":2,"reasoning_tokens":1},"endpoint":"http://e/v1",'
        '"latency_s":0.25,"ttft_s":null,"attempts":1,"seed":7,"length_retries":0,"model":"m"}],'
        '"request_overrides":{"max_tokens":9},"fields":{"topic":"ü"},"source_id":"é","sample_index":0,'
        '"model":"m","sampling":{"temperature":0.0},"source":{"file":"in.jsonl","line":3}}\n'
    )
    assert shard.read_bytes() == expected.encode()
    # read back through the one reader: the same record
    assert list(stored_records(tmp_path)) == [record]
    reopened = RunDir.open(tmp_path, JOB)
    assert reopened.done_ids == {"é"}
    reopened.close()


def test_a_record_of_an_older_form_reads_back_with_what_it_has(tmp_path: Path) -> None:
    # A line without request_overrides, fields, sampling or source, a turn without max_tokens,
    # ttft_s or reasoning_truncated, and a key no version writes: what is there is read, the rest is
    # None (empty for fields), the unknown key ignored.
    RunDir.open(tmp_path, JOB).close()
    (tmp_path / "shards" / "part-00000.jsonl").write_text(
        '{"id":"a","conversations":[{"role":"assistant","content":"x"}],'
        '"turns":[{"finish_reason":"length","length_flag":true,"usage":{"prompt_tokens":4}}],"extra":1}\n'
    )
    (record,) = stored_records(tmp_path)
    assert record.fields == {} and record.source_file is None and record.sampling is None
    assert record.turns == (
        TurnRecord("length", True, None, TurnUsage(4, None), None, None, None, None, None, None, None),
    )
    assert record.last_assistant() == {"role": "assistant", "content": "x"}


def test_a_directory_of_other_files_is_not_taken_as_a_run_without_force(tmp_path: Path) -> None:
    # newuser2 finding 2: --out pointed at a model folder (config.json, a user's summary.json) was
    # written into and its summary.json overwritten, and the run said [ok].
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "summary.json").write_text('{"mine": true}')
    with pytest.raises(RunDirError, match=r"holds files and no tokenplan run \(config.json, summary.json\)"):
        RunDir.open(folder, JOB)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "summary.json"]  # nothing written
    with pytest.raises(RunDirError, match="is a file, not a directory"):
        RunDir.open(folder / "config.json", JOB)
    RunDir.open(folder, JOB, force=True).close()  # --force: the user said so
    assert (folder / "manifest.json").exists() and json.loads((folder / "summary.json").read_text()) == {"mine": True}


def test_an_empty_directory_or_one_a_run_started_is_taken(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    RunDir.open(empty, JOB).close()
    started = tmp_path / "started"  # a run that stopped after making shards/ and before its manifest
    (started / "shards").mkdir(parents=True)
    RunDir.open(started, JOB).close()
    RunDir.open(empty, JOB).close()  # and a run's own directory again


def test_a_refused_second_open_does_not_fence_the_run_that_holds_the_directory(tmp_path: Path) -> None:
    # a break-it pass: a second generate on the --out of a running Ray job raised the epoch (which
    # stops that job's actors) before it was refused for the lock; the fence now runs under the lock
    from tokenplan.runner.store.fencing import advance_epoch

    epochs: list[int] = []
    first = RunDir.open(tmp_path, JOB, fence=lambda path: epochs.append(advance_epoch(path)))
    try:
        with pytest.raises(RunDirError, match="is in use by another tokenplan generate"):
            RunDir.open(tmp_path, JOB, fence=lambda path: epochs.append(advance_epoch(path)))
        manifest = json.loads((tmp_path / "manifest.json").read_text())
        assert epochs == [1] and manifest["epoch"] == 1  # the running one's epoch stands
    finally:
        first.close()
    again = RunDir.open(tmp_path, JOB, fence=lambda path: epochs.append(advance_epoch(path)))
    again.close()
    assert epochs == [1, 2]  # once the directory is free, the next run fences the earlier one
