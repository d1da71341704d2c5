"""The run directory: the single source of truth for what is already done.

Layout::

    RUN_DIR/manifest.json         job fingerprint and configuration (pydantic :class:`Manifest`)
    RUN_DIR/shards/part-NNNNN.jsonl  one record per finished unit, append-only, rotated by size
    RUN_DIR/skipped.jsonl         units deliberately not generated (append-only; final unless
                                  ``--retry-skipped``, which sets it aside as skipped.retried.jsonl)
    RUN_DIR/errors.jsonl          units that failed in the latest run (retried by the next run)
    RUN_DIR/rejects.jsonl         input rows that could not be used (rewritten by every run)
    RUN_DIR/summary.json          the run's summary, over all invocations (runner.invocations)
    RUN_DIR/invocations.jsonl     one line per invocation that sent requests: time, tokens, latencies
    RUN_DIR/invocation.current.json  the running invocation's figures so far (a killed one's are
                                  appended to invocations.jsonl by the next open)

Exactly once: every record is one ``os.write`` of one complete line to a file opened with
``O_APPEND``, so a ``kill -9`` leaves at most one torn line at the end of a file. On open, a tail
without its newline is cut off; the ids in the shards and in ``skipped.jsonl`` form the done-set
(a compact :class:`~tokenplan.runner.store.idset.IdSet` of 64-bit keys, 8 bytes per stored id; its
collision rule is stated there), and only units outside it are sent. Finding a record's id reads
only the start of its line (the writer puts ``"id"`` first: ``{"id":"…",``); a line of any other
form is parsed whole. A unit is written after its answer arrives, never before, so
in-flight units of a killed run are simply sent again.

Write failures (a full disk, ``ulimit -f``, an I/O error): a record that could not be written
whole is cut off again (the file is truncated back to where the record began) and
:class:`WriteFailed` is raised, so the caller stops sending; the directory stays resumable.

One process at a time: :meth:`RunDir.open` takes an exclusive ``flock`` on ``RUN_DIR/.lock``
(released by the kernel when the process ends, however it ends) and refuses, naming the holder's
pid, while another process holds it. Records whose id was already stored (left by older versions
or by two processes that ran without the lock) are dropped on open, keeping the first; a record is
dropped only when its exact id matches an earlier one (not merely its key).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenplan.errors import RunDirError
from tokenplan.runner.store.appendlog import AppendLog, ShardLog, WriteFailed, iter_records, shard_paths
from tokenplan.runner.store.idset import IdSet
from tokenplan.runner.store.invocations import recover_killed
from tokenplan.runner.store.manifest import check_manifest
from tokenplan.runner.store.record import OutputRecord
from tokenplan.runner.store.record_ids import repeated_keys, repeated_lines, scan_keys
from tokenplan.runner.store.runlock import RunLock


@dataclass(slots=True)
class ScanStats:
    """What the existing records say: the ids done, how many records of each kind, what was repaired."""

    done_ids: IdSet = field(default_factory=IdSet)
    stored: int = 0
    skipped: int = 0
    duplicate_ids: int = 0
    torn_bytes: int = 0


class RunDir:
    """An opened run directory (see the module docstring).

    Use :meth:`open`; then ``done_ids`` says what not to send, and the ``write_*`` methods record
    outcomes. Call :meth:`close` (or :meth:`sync` now and then) to flush to disk.
    """

    def __init__(
        self, path: Path, stats: ScanStats, shard_max_bytes: int, lock: RunLock, notes: list[str] | None = None
    ):
        self.path, self.stats, self._lock = path, stats, lock
        self.notes = notes or []  # what opening did that the user should hear (a rebind, a retry)
        self.invocation_id = uuid.uuid4().hex  # this invocation's, in invocations.jsonl and its checkpoint
        self.shards = ShardLog(path / "shards", shard_max_bytes)
        self.skipped = AppendLog(path / "skipped.jsonl")
        (path / "errors.jsonl").unlink(missing_ok=True)
        (path / "rejects.jsonl").unlink(missing_ok=True)
        self.errors = AppendLog(path / "errors.jsonl")
        self.rejects = AppendLog(path / "rejects.jsonl")

    @property
    def done_ids(self) -> IdSet:
        return self.stats.done_ids

    @classmethod
    def open(
        cls,
        path: Path,
        job: dict[str, Any],
        *,
        force: bool = False,
        shard_max_bytes: int = 256 * 2**20,
        retry_skipped: bool = False,
        fence: Callable[[Path], object] | None = None,
    ) -> RunDir:
        """Open (or create) ``path`` for ``job``, recover torn tails and read the done-set.

        ``retry_skipped`` (or a directory rebound because it held no stored answer,
        :func:`~tokenplan.runner.store.manifest.check_manifest`) sets ``skipped.jsonl`` aside as
        ``skipped.retried.jsonl``, so its units are not done and are sent again. ``fence``
        (``path`` → anything) runs once this process holds the directory's lock and its manifest
        is checked, before the done-set is read: raising the epoch that fences earlier Ray
        actors there, and not before the lock, stops a second invocation that is then refused
        from stopping the run that holds it (a break-it pass: a refused ``generate`` ended a
        running Ray job with exit 130).

        Raises:
            RunDirError: the directory belongs to a different job (unless ``force``), or its
                manifest or records are damaged beyond a torn last line.
        """
        _check_not_foreign(path, force)
        (path / "shards").mkdir(parents=True, exist_ok=True)
        lock = RunLock.take(path)
        try:
            rebound = check_manifest(path, job, force=force)
            notes = [rebound] if rebound else []
            if fence is not None:
                fence(path)
            if retry_skipped or rebound:
                notes += set_aside_skipped(path)
            killed = recover_killed(path)  # an earlier invocation's figures, left by a kill
            notes += [killed] if killed else []
            files = [(shard, False) for shard in shard_paths(path / "shards")]
            if (path / "skipped.jsonl").exists():
                files.append((path / "skipped.jsonl", True))
            return cls(path, _scan(files), shard_max_bytes, lock, notes)
        except BaseException:
            lock.release()
            raise

    def write_done(self, record: OutputRecord) -> None:
        """Store one finished unit (its ``id`` must not be in ``done_ids``)."""
        self.shards.append(record.to_json())
        self.stats.done_ids.add(record.id)

    def write_skipped(self, record: dict[str, Any]) -> None:
        """Record a unit deliberately not generated; it counts as done."""
        self.skipped.append(record)
        self.stats.done_ids.add(record["id"])

    def write_error(self, record: dict[str, Any]) -> None:
        """Record a unit that failed for good in this run."""
        self.errors.append(record)

    def write_reject(self, record: dict[str, Any]) -> None:
        """Record an input row that could not be used."""
        self.rejects.append(record)

    def sync(self) -> None:
        """fsync the files written to."""
        for log in (self.shards, self.skipped, self.errors, self.rejects):
            log.sync()

    def close(self) -> None:
        """Flush and close every file, then release the lock.

        Raises:
            WriteFailed: the first file that could not be flushed (all are closed regardless).
        """
        failure: WriteFailed | None = None
        for log in (self.shards, self.skipped, self.errors, self.rejects):
            try:
                log.close()
            except WriteFailed as problem:
                failure = failure or problem
        self._lock.release()
        if failure is not None:
            raise failure


def set_aside_skipped(path: Path) -> list[str]:
    """Move ``skipped.jsonl`` to ``skipped.retried.jsonl`` (replacing an older one), so its units are
    sent again; the note says how many. A torn last line is not a unit and is not counted.

    Raises:
        WriteFailed: the file could not be renamed.
    """
    skipped = path / "skipped.jsonl"
    if not skipped.exists() or skipped.stat().st_size == 0:
        return []
    count = sum(1 for _ in iter_records(skipped, damaged="skip"))
    try:
        os.replace(skipped, path / "skipped.retried.jsonl")
    except OSError as problem:
        raise WriteFailed(skipped, problem) from None
    return [f"{count:,} skipped units are sent again (the earlier skipped.jsonl is kept as skipped.retried.jsonl)"]


def cut_torn_tail(path: Path) -> int:
    """Cut a last line that lacks its newline (a write cut short by a kill); return bytes cut."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "r+b") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        end, keep = size, 0
        while end > 0:
            start = max(0, end - 65536)
            fh.seek(start)
            newline = fh.read(end - start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        fh.truncate(keep)
        return size - keep


def _scan(files: list[tuple[Path, bool]]) -> ScanStats:
    """Read the ids of every record of ``files`` (``(path, is skipped.jsonl)``, in order) into one
    :class:`IdSet`; records whose exact id was seen before are dropped from their file (the first
    stays) and counted in ``duplicate_ids``. Memory: 8 bytes per record, sorted in place."""
    stats = ScanStats()
    for path, _ in files:
        stats.torn_bytes += cut_torn_tail(path)
    paths = [path for path, _ in files]
    keys, counts = scan_keys(paths)
    for (_, skipped), count in zip(files, counts):
        if skipped:
            stats.skipped += count
        else:
            stats.stored += count
    stored, suspects = repeated_keys(keys)
    if suspects:
        for (path, skipped), lines in zip(files, repeated_lines(paths, suspects)):
            if lines:
                _drop_lines(path, lines)
                stats.duplicate_ids += len(lines)
                if skipped:
                    stats.skipped -= len(lines)
                else:
                    stats.stored -= len(lines)
    stats.done_ids = IdSet(stored)
    return stats


def _drop_lines(path: Path, lines: set[int]) -> None:
    """Rewrite ``path`` without the given 1-based lines (a copy beside it, fsynced, renamed over it).

    Raises:
        WriteFailed: the copy could not be written; ``path`` is left as it was.
    """
    tmp = path.with_name(path.name + ".dedup")
    try:
        with open(path, "rb") as source, open(tmp, "wb") as target:
            for line_no, raw in enumerate(source, start=1):
                if line_no not in lines:
                    target.write(raw)
            target.flush()
            os.fsync(target.fileno())
        os.replace(tmp, path)
    except OSError as problem:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(path, problem) from None


# What a run directory holds before its manifest is written (``RunDir.open`` makes ``shards/``
# and takes ``.lock`` first): a directory with only these, or nothing, is a run's to take.
_BEFORE_MANIFEST = frozenset(("shards", ".lock"))


def _check_not_foreign(path: Path, force: bool) -> None:
    """Refuse ``path`` when it is a file, or a directory that holds something and no run's
    manifest (not a tokenplan run directory: a model folder, a user's own files), unless
    ``force``. Raises RunDirError naming the path and what to do."""
    if path.exists() and not path.is_dir():
        raise RunDirError(f"--out {path} is a file, not a directory (allowed: a new or empty directory, or a run's)")
    if force or not path.is_dir() or (path / "manifest.json").exists():
        return
    foreign = sorted(p.name for p in path.iterdir() if p.name not in _BEFORE_MANIFEST)
    if foreign or any((path / "shards").glob("*")):
        shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
        raise RunDirError(
            f"--out {path} holds files and no tokenplan run ({shown or 'shards/'}); "
            "use a new or empty directory, or --force to write into it anyway"
        )
