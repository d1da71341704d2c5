"""Epochs and fencing for writers that outlive their driver (the Ray backend's actors).

Every Ray-backend run takes a new *epoch*: one more than the manifest's ``epoch`` and than any
epoch in a shard file name (``shards/part-<epoch>-<actor>-NNNNN.jsonl``), so epochs only grow even
when ``--force`` rewrote the manifest. Each actor writes only while the manifest still carries its
own epoch. A driver killed with ``kill -9`` leaves its actors running for a while (Ray reaps them
when it notices); the resumed run's driver raises the epoch *before* it reads the done-set, so
those orphans stop writing and nothing they finish can be sent again.

The check and the write are made atomic with ``flock(2)`` on ``RUN_DIR/fence.lock``: a writer
holds it shared around "is the epoch still mine? then append"; :func:`advance_epoch` holds it
exclusive while it replaces the manifest. So every record is either written before the new epoch
(and seen by the new run's scan, which follows) or refused. On one machine this is exact; on a
cluster the run directory must be on a shared file system whose ``flock`` is honoured across
clients (NFSv4, Lustre, CephFS, GPFS do).

Reading the epoch costs one ``stat`` per record: the manifest is re-read only when its inode
changed (it is always replaced, never edited in place).
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tokenplan.errors import RunDirError
from tokenplan.runner.store.appendlog import iter_records, shard_paths
from tokenplan.runner.store.manifest import Manifest
from tokenplan.runner.store.rundir import cut_torn_tail

LOCK_NAME = "fence.lock"
_ACTOR_SHARD = re.compile(r"^part-(\d+)-(\d+)-\d{5}\.jsonl$")


class Fenced(Exception):
    """A writer of an older epoch tried to write; it must stop (a newer run owns the directory)."""


def actor_prefix(epoch: int, actor: int) -> str:
    """The shard-name prefix of one actor in one epoch: ``part-0003-0012-`` (epoch 3, actor 12).

    Four digits sort correctly up to 9,999 runs and actors; beyond, names grow and still parse."""
    return f"part-{epoch:04d}-{actor:04d}-"


def shard_epoch(path: Path) -> int | None:
    """The epoch in an actor shard's name; None for a local-backend shard ``part-NNNNN.jsonl``."""
    match = _ACTOR_SHARD.match(path.name)
    return int(match.group(1)) if match else None


def read_epoch(run_dir: Path) -> int:
    """The manifest's epoch (0 for a directory written only by the local backend).

    Raises:
        RunDirError: no readable manifest.
    """
    try:
        return Manifest.model_validate_json((run_dir / "manifest.json").read_text()).epoch
    except (OSError, ValueError) as problem:
        raise RunDirError(
            f"{run_dir / 'manifest.json'}: cannot read the epoch ({str(problem).splitlines()[0]})"
        ) from None


@contextmanager
def _locked(run_dir: Path, mode: int) -> Iterator[None]:
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def advance_epoch(run_dir: Path) -> int:
    """Take the next epoch for a new run of ``run_dir`` (its manifest must exist); return it.

    Holds the fence lock exclusively while the manifest is replaced, so no older-epoch writer is
    between its check and its write when this returns.
    """
    with _locked(run_dir, fcntl.LOCK_EX):
        path = run_dir / "manifest.json"
        manifest = Manifest.model_validate_json(path.read_text())
        seen = [e for e in (shard_epoch(p) for p in shard_paths(run_dir / "shards")) if e is not None]
        epoch = max([manifest.epoch, *seen]) + 1
        tmp = path.with_suffix(".json.epoch-tmp")
        tmp.write_text(manifest.model_copy(update={"epoch": epoch}).model_dump_json(indent=2))
        os.replace(tmp, path)
    return epoch


def fence_earlier_actors(run_dir: Path) -> bool:
    """For the local backend, before it reads the done-set: when ``run_dir`` holds Ray actors'
    shards, raise the epoch so none of them can still write; return whether it did. A missing or
    unreadable manifest is left for :meth:`RunDir.open` to report."""
    shards = run_dir / "shards"
    if not shards.is_dir() or all(shard_epoch(p) is None for p in shard_paths(shards)):
        return False
    try:
        advance_epoch(run_dir)
    except (OSError, ValueError):
        return False
    return True


class Fence:
    """One writer's fence: :meth:`holding` runs a write only while ``epoch`` is current.

    Keeps the lock file open; the manifest is re-read only when its inode changed.
    """

    def __init__(self, run_dir: Path, epoch: int):
        self.run_dir, self.epoch = run_dir, epoch
        self._fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        self._inode: int | None = None
        self._current = epoch

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the shared lock; raise :class:`Fenced` when a newer epoch has started."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            inode = os.stat(self.run_dir / "manifest.json").st_ino
            if inode != self._inode:
                self._current, self._inode = read_epoch(self.run_dir), inode
            if self._current != self.epoch:
                raise Fenced(f"epoch {self.epoch} ended: epoch {self._current} owns {self.run_dir}")
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


def stored_ids(shards_dir: Path, prefix: str) -> set[str]:
    """Ids stored in the shards ``{prefix}*.jsonl`` of one writer that has stopped (torn tail cut).

    Used when an actor dies mid-run: what it stored is done, the rest of its share is sent again.
    """
    ids: set[str] = set()
    for path in sorted(shards_dir.glob(f"{prefix}*.jsonl")):
        cut_torn_tail(path)
        ids.update(record["id"] for _, record in iter_records(path))
    return ids
