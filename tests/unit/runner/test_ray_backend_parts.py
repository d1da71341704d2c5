"""The Ray backend's parts that need no Ray: epochs and fencing, actor shard names, the endpoint
shares, the anti-join, and the local backend continuing only its own shard series."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from array import array
from pathlib import Path

import pytest

from tokenplan.errors import RunDirError
from tokenplan.runner.input.rows import Reject
from tokenplan.runner.input.shapes import Message, Row
from tokenplan.runner.ray.work import endpoint_shares, pending_units
from tokenplan.runner.spec import RunTally
from tokenplan.runner.store.appendlog import ShardLog
from tokenplan.runner.store.fencing import (
    Fence,
    Fenced,
    actor_prefix,
    advance_epoch,
    fence_earlier_actors,
    read_epoch,
    shard_epoch,
    stored_ids,
)
from tokenplan.runner.store.idset import IdSet, id_key
from tokenplan.runner.store.manifest import check_manifest
from tokenplan.runner.store.record_ids import repeated_keys
from tokenplan.runner.store.rundir import RunDir

JOB = {"model": "m", "mode": "regenerate"}


def _run_dir(tmp_path: Path) -> Path:
    (tmp_path / "shards").mkdir()
    check_manifest(tmp_path, JOB, force=False)
    return tmp_path


def test_epochs_grow_from_the_manifest_and_from_shard_names(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    assert read_epoch(run) == 0  # a directory the local backend made
    assert advance_epoch(run) == 1 and advance_epoch(run) == 2 and read_epoch(run) == 2
    # --force rewrites the manifest (epoch back to 0), but epoch 7's shards remain: next is 8.
    (run / "shards" / f"{actor_prefix(7, 3)}00000.jsonl").write_text("")
    check_manifest(run, {**JOB, "model": "other"}, force=True)
    assert read_epoch(run) == 0
    assert advance_epoch(run) == 8


def test_an_older_epoch_is_fenced_and_the_current_one_writes(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    old = Fence(run, advance_epoch(run))
    with old.holding():
        pass  # current: allowed
    new = Fence(run, advance_epoch(run))
    with pytest.raises(Fenced, match="epoch 1 ended: epoch 2"):
        with old.holding():
            raise AssertionError("an older epoch must not reach its write")
    with new.holding():
        pass


def test_advance_waits_for_a_write_in_progress(tmp_path: Path) -> None:
    # The orphan holds the shared lock (between its check and its write); the new run's advance
    # must not return before that write is done, so its scan sees the record.
    run = _run_dir(tmp_path)
    fence = Fence(run, advance_epoch(run))
    order: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def orphan() -> None:
        with fence.holding():
            entered.set()
            release.wait(10)
            order.append("orphan wrote")

    writer = threading.Thread(target=orphan)
    writer.start()
    entered.wait(10)
    advancer = threading.Thread(target=lambda: (advance_epoch(run), order.append("advanced")))
    advancer.start()
    advancer.join(0.3)
    assert advancer.is_alive()  # blocked on the exclusive lock while the write is in progress
    release.set()
    writer.join(10)
    advancer.join(10)
    assert order == ["orphan wrote", "advanced"]


def test_shard_names_parse_and_stored_ids_cut_a_torn_tail(tmp_path: Path) -> None:
    assert actor_prefix(3, 12) == "part-0003-0012-"
    assert shard_epoch(Path("part-0003-0012-00004.jsonl")) == 3
    assert shard_epoch(Path("part-00004.jsonl")) is None
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "part-0002-0001-00000.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "tu')
    (shards / "part-0002-0001-00001.jsonl").write_text('{"id": "d"}\n')
    (shards / "part-0002-0011-00000.jsonl").write_text('{"id": "other actor"}\n')
    assert stored_ids(shards, actor_prefix(2, 1)) == {"a", "b", "d"}
    assert (shards / "part-0002-0001-00000.jsonl").read_text() == '{"id": "a"}\n{"id": "b"}\n'


def test_local_shard_log_continues_only_its_own_series(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "part-00003.jsonl").write_text('{"id": "x"}\n')
    (shards / "part-0009-0001-00000.jsonl").write_text('{"id": "y"}\n')  # an actor's: sorts after
    log = ShardLog(shards, max_bytes=1 << 20)
    log.append({"id": "z"})
    log.close()
    assert (shards / "part-00003.jsonl").read_text() == '{"id": "x"}\n{"id":"z"}\n'  # orjson: compact
    actor = ShardLog(shards, max_bytes=1, prefix=actor_prefix(9, 1))
    actor.append({"id": "w"})  # the existing file is past 1 byte: rotates to …-00001
    actor.close()
    assert (shards / "part-0009-0001-00001.jsonl").read_text() == '{"id":"w"}\n'


def test_a_run_directory_scan_reads_actor_shards_too(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    (run / "shards" / "part-0001-0000-00000.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n')
    (run / "shards" / "part-0001-0001-00000.jsonl").write_text('{"id": "c"}\n{"id": "a"}\n')
    rundir = RunDir.open(run, JOB)
    rundir.close()
    assert rundir.done_ids == {"a", "b", "c"} and rundir.stats.duplicate_ids == 1


def test_endpoint_shares() -> None:
    urls = [f"http://h{i}/v1" for i in range(16)]
    shares = endpoint_shares(urls, 4, 8)
    # 16 endpoints over 4 actors: 4 each, every endpoint once, full concurrency.
    assert [len(s[0]) for s in shares] == [4, 4, 4, 4] and all(c == 8 for _, c in shares)
    assert sorted(u for s, _ in shares for u in s) == sorted(urls)
    # 2 endpoints, 3 actors: actors 0 and 2 split h0's 8 slots 4 + 4, actor 1 has h1's 8.
    assert endpoint_shares(urls[:2], 3, 8) == [((urls[0],), 4), ((urls[1],), 8), ((urls[0],), 4)]
    # 1 endpoint, 3 actors, concurrency 7: 7 = 3 + 2 + 2.
    assert [c for _, c in endpoint_shares(urls[:1], 3, 7)] == [3, 2, 2]


def test_pending_units_is_a_left_anti_join_on_id() -> None:
    row = lambda i: Row(f"r{i}", (Message("user", f"q{i}"),), "prompt", "in.jsonl", i)  # noqa: E731
    source = [row(1), Reject("in.jsonl", 2, "invalid JSON"), row(3), row(4)]
    tally, rejects = RunTally(), []
    done = IdSet(repeated_keys(array("Q", [id_key(i) for i in ("r1#0", "r3#1", "r4#0", "r4#1", "r9#0")]))[0])
    units = list(pending_units(iter(source), done, 2, tally, rejects.append))
    # 3 rows × 2 samples = 6 units; 4 done → 2 left (r1#1, r3#0); 1 rejected row.
    assert [u.id for u in units] == ["r1#1", "r3#0"]
    assert (tally.units_seen, tally.already_done, tally.rejected_rows) == (6, 4, 1)
    assert [r.line for r in rejects] == [2]
    assert done.stored_outside_input() == {id_key("r9#0")}  # stored, but no unit of this input


def test_read_epoch_of_a_missing_manifest_is_a_run_dir_error(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="cannot read the epoch"):
        read_epoch(tmp_path)


def test_the_core_install_imports_no_ray() -> None:
    code = (
        "import sys, json; from tokenplan.api.generate import generate; import tokenplan.cli.generate; "
        "import tokenplan.runner.ray.driver; print(json.dumps('ray' in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is False


def test_the_local_backend_fences_ray_actors_only_where_there_were_some(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    (run / "shards" / "part-00000.jsonl").write_text('{"id": "a"}\n')
    assert not fence_earlier_actors(run) and read_epoch(run) == 0  # a local-only directory: untouched
    orphan = Fence(run, advance_epoch(run))
    (run / "shards" / f"{actor_prefix(1, 0)}00000.jsonl").write_text('{"id": "b"}\n')
    assert fence_earlier_actors(run) and read_epoch(run) == 2
    with pytest.raises(Fenced):
        with orphan.holding():
            raise AssertionError("unreachable")
    assert not fence_earlier_actors(tmp_path / "nothing-here")


def test_an_actors_refusal_log_keeps_order_and_logs_only_the_answers_that_matter() -> None:
    from tokenplan.runner.refusals import Held, RefusalLog, RefusalStreak, replay

    def held(row: int, endpoint: str = "http://a/v1") -> Held:
        return Held(f"r{row}", f"r{row}", {"file": "in.jsonl", "line": row + 1}, 400, "too long", 1, endpoint)

    log = RefusalLog()
    assert log.refused(held(0)) == [] and log.refused(held(1)) == []  # the actor decides nothing
    for _ in range(50):  # 50 answers from a: one event (the one after the refusals)
        assert log.answered("http://a/v1") == []
    log.refused(held(2))
    log.answered("http://a/v1")  # the first answer after a refusal: logged
    log.answered("http://a/v1")  # and the next one is not
    events = log.take()
    assert [(kind, v.unit_id if kind == "refused" else v) for kind, v in events] == [
        ("refused", "r0"),
        ("refused", "r1"),
        ("answered", "http://a/v1"),
        ("refused", "r2"),
        ("answered", "http://a/v1"),
    ]
    assert log.take() == []
    # Replayed into the driver's streak they decide as the local backend would: r0 and r1 released
    # by the answer, r2 the row's own at once (its endpoint had answered)
    streak = RefusalStreak()
    assert [h.unit_id for h in replay(streak, events)] == ["r0", "r1", "r2"] and streak.job_wide is None
    # Two actors' logs over one endpoint that never answers: eight rows between them are job-wide
    a, b = RefusalLog(), RefusalLog()
    for row in range(4):
        a.refused(held(row))
        b.refused(held(row + 4))
    judge = RefusalStreak()
    assert replay(judge, a.take()) == [] and replay(judge, b.take()) == []
    assert judge.job_wide is not None and len(judge.held) == 8
    assert held(3).error_record()["reason"] == "status" and held(3).skipped_record()["reason"] == "refused"
