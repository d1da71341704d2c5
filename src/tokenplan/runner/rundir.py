"""The run directory: the single source of truth for what is already done.

Layout::

    RUN_DIR/manifest.json         job fingerprint and configuration (pydantic :class:`Manifest`)
    RUN_DIR/shards/part-NNNNN.jsonl  one record per finished unit, append-only, rotated by size
    RUN_DIR/skipped.jsonl         units deliberately not generated (append-only; final)
    RUN_DIR/errors.jsonl          units that failed in the latest run (retried by the next run)
    RUN_DIR/rejects.jsonl         input rows that could not be used (rewritten by every run)
    RUN_DIR/summary.json          the last run's summary

Exactly once: every record is one ``os.write`` of one complete line to a file opened with
``O_APPEND``, so a ``kill -9`` leaves at most one torn line at the end of a file. On open, a tail
without its newline is cut off; the ids in the shards and in ``skipped.jsonl`` form the done-set,
and only units outside it are sent. A unit is written after its answer arrives, never before, so
in-flight units of a killed run are simply sent again.

Write failures (a full disk, ``ulimit -f``, an I/O error): a record that could not be written
whole is cut off again (the file is truncated back to where the record began) and
:class:`WriteFailed` is raised, so the caller stops sending; the directory stays resumable.

One process at a time: :meth:`RunDir.open` takes an exclusive ``flock`` on ``RUN_DIR/.lock``
(released by the kernel when the process ends, however it ends) and refuses, naming the holder's
pid, while another process holds it. Records whose id was already stored (left by older versions
or by two processes that ran without the lock) are dropped on open, keeping the first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ValidationError

from tokenplan.errors import RunDirError
from tokenplan.runner.runlock import RunLock

MANIFEST_FORMAT = 1


class Manifest(BaseModel):
    """``manifest.json``: which job this directory belongs to."""

    format: int = MANIFEST_FORMAT
    fingerprint: str
    job: dict[str, Any]
    created_at: str
    epoch: int = 0  # raised by every Ray-backend run; writers of an older epoch stop (runner.fencing)


def fingerprint(job: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over the job configuration as canonical JSON."""
    return hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(slots=True)
class ScanStats:
    """What the existing records say: ids done, and per-record token and latency figures."""

    done_ids: set[str] = field(default_factory=set)
    stored: int = 0
    skipped: int = 0
    duplicate_ids: int = 0
    torn_bytes: int = 0
    completion_tokens: array = field(default_factory=lambda: array("q"))
    turn_latency_s: array = field(default_factory=lambda: array("d"))


class WriteFailed(RunDirError):
    """A file of the run directory could not be written (disk full, file size limit, I/O error).

    The file ends at its last whole record; the message is one line saying what to do.
    """

    def __init__(self, path: Path, problem: OSError):
        self.path, self.errno = path, problem.errno
        why = problem.strerror or type(problem).__name__
        super().__init__(f"cannot write {path} ({why}): stopped sending; every record written so far is "
                         "whole and kept — make room and rerun the same command to resume")


def _write(fd: int, data: memoryview) -> int:
    """``os.write``: one place the tests can make fail (ENOSPC part-way through a record)."""
    return os.write(fd, data)


class AppendLog:
    """An append-only JSONL file; each record is one ``os.write`` of a whole line.

    Raises:
        WriteFailed: from :meth:`append`, :meth:`sync` or :meth:`close` when the OS refuses.
    """

    def __init__(self, path: Path):
        self.path = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as problem:
            raise WriteFailed(path, problem) from None
        self.size_bytes = os.fstat(self._fd).st_size
        self._closed = False

    def append(self, record: dict[str, Any]) -> None:
        # orjson: UTF-8 as is (like ensure_ascii=False), compact, ~8x faster than json.dumps.
        data = memoryview(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
        start = self.size_bytes
        try:
            while data:
                written = _write(self._fd, data)
                data = data[written:]
                self.size_bytes += written
        except OSError as problem:
            self._cut_back(start)
            raise WriteFailed(self.path, problem) from None

    def _cut_back(self, size: int) -> None:
        """Truncate a partly written record away, so the file ends at its last whole record."""
        with contextlib.suppress(OSError):  # if even this fails, the next open cuts the torn tail
            os.ftruncate(self._fd, size)
            self.size_bytes = size

    def sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as problem:
            raise WriteFailed(self.path, problem) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            os.fsync(self._fd)
        except OSError as problem:
            raise WriteFailed(self.path, problem) from None
        finally:
            os.close(self._fd)


class ShardLog:
    """Append-only shards ``{prefix}NNNNN.jsonl``, a new one once the current passes ``max_bytes``.

    ``prefix`` is ``part-`` for the local backend; each Ray actor writes its own series,
    ``part-<epoch>-<actor>-`` (:func:`tokenplan.runner.fencing.actor_prefix`). Only files of this
    series (the prefix then exactly five digits) are continued; every ``part-*`` file is a shard.
    """

    def __init__(self, directory: Path, max_bytes: int, prefix: str = "part-"):
        self.directory, self.max_bytes, self.prefix = directory, max_bytes, prefix
        existing = [p for p in shard_paths(directory)
                    if p.name.startswith(prefix) and len(p.name) == len(prefix) + 11
                    and p.name[len(prefix):-6].isdigit()]
        index = int(existing[-1].name[len(prefix):-6]) if existing else 0
        self._log = AppendLog(directory / f"{prefix}{index:05d}.jsonl")
        self._index = index

    def append(self, record: dict[str, Any]) -> None:
        if self._log.size_bytes >= self.max_bytes:
            self._log.close()
            self._index += 1
            self._log = AppendLog(self.directory / f"{self.prefix}{self._index:05d}.jsonl")
        self._log.append(record)

    def sync(self) -> None:
        self._log.sync()

    def close(self) -> None:
        self._log.close()


def write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a copy beside it, renamed over it).

    Raises:
        WriteFailed: the copy could not be written; ``path`` is left as it was.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as problem:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(path, problem) from None


def shard_paths(directory: Path) -> list[Path]:
    """The shard files of a run directory's ``shards/`` folder, in order."""
    return sorted(directory.glob("part-*.jsonl"))


class RunDir:
    """An opened run directory (see the module docstring).

    Use :meth:`open`; then ``done_ids`` says what not to send, and the ``write_*`` methods record
    outcomes. Call :meth:`close` (or :meth:`sync` now and then) to flush to disk.
    """

    def __init__(self, path: Path, stats: ScanStats, shard_max_bytes: int, lock: RunLock):
        self.path, self.stats, self._lock = path, stats, lock
        self.shards = ShardLog(path / "shards", shard_max_bytes)
        self.skipped = AppendLog(path / "skipped.jsonl")
        (path / "errors.jsonl").unlink(missing_ok=True)
        (path / "rejects.jsonl").unlink(missing_ok=True)
        self.errors = AppendLog(path / "errors.jsonl")
        self.rejects = AppendLog(path / "rejects.jsonl")

    @property
    def done_ids(self) -> set[str]:
        return self.stats.done_ids

    @classmethod
    def open(cls, path: Path, job: dict[str, Any], *, force: bool = False,
             shard_max_bytes: int = 256 * 2**20) -> RunDir:
        """Open (or create) ``path`` for ``job``, recover torn tails and read the done-set.

        Raises:
            RunDirError: the directory belongs to a different job (unless ``force``), or its
                manifest or records are damaged beyond a torn last line.
        """
        (path / "shards").mkdir(parents=True, exist_ok=True)
        lock = RunLock.take(path)
        try:
            check_manifest(path, job, force=force)
            stats = ScanStats()
            for shard in shard_paths(path / "shards"):
                stats.torn_bytes += cut_torn_tail(shard)
                _scan(shard, stats, skipped=False)
            skipped = path / "skipped.jsonl"
            if skipped.exists():
                stats.torn_bytes += cut_torn_tail(skipped)
                _scan(skipped, stats, skipped=True)
            return cls(path, stats, shard_max_bytes, lock)
        except BaseException:
            lock.release()
            raise

    def write_done(self, record: dict[str, Any]) -> None:
        """Store one finished unit (its ``id`` must not be in ``done_ids``)."""
        self.shards.append(record)
        self.stats.done_ids.add(record["id"])

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


def check_manifest(path: Path, job: dict[str, Any], *, force: bool) -> None:
    """Write the manifest for ``job``, or check that the existing one is for the same job.

    Raises:
        RunDirError: a different job's manifest (without ``force``), or an unreadable one.
    """
    manifest_path = path / "manifest.json"
    new = Manifest(fingerprint=fingerprint(job), job=job,
                   created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if manifest_path.exists():
        try:
            old = Manifest.model_validate_json(manifest_path.read_text())
        except (ValidationError, ValueError) as problem:
            raise RunDirError(f"{manifest_path}: not a tokenplan manifest "
                              f"({str(problem).splitlines()[0]})") from None
        if old.fingerprint == new.fingerprint:
            return
        if not force:
            before, after = _flatten(old.job), _flatten(job)
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            detail = "; ".join(f"{k}: {before.get(k)!r} → {after.get(k)!r}" for k in changed)
            raise RunDirError(f"{path} holds a different job ({detail}); use another --out, "
                              "or --force to continue it with the new configuration")
    write_whole(manifest_path, new.model_dump_json(indent=2).encode())


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``, so a refusal names the one setting that changed."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict) and item:
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat


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


def iter_records(path: Path, *, damaged: Literal["raise", "skip"] = "raise") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for every line of a JSONL file written by :class:`AppendLog`;
    ``damaged="skip"`` passes over a line that is not a record (a reader that must not repair).

    Raises:
        RunDirError: a line that is not a JSON object with an ``id`` (``damaged="raise"``).
    """
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                record = orjson.loads(raw)
                if not isinstance(record, dict) or "id" not in record:
                    raise ValueError("no 'id'")
            except ValueError as problem:
                if damaged == "skip":
                    continue
                raise RunDirError(f"{path}:{line_no}: damaged record ({problem}); "
                                  "the run directory was edited or corrupted") from None
            yield line_no, record


def _scan(path: Path, stats: ScanStats, *, skipped: bool) -> None:
    """Add ``path``'s records to ``stats``; records whose id was seen before are dropped from the
    file (the first stays) and counted in ``stats.duplicate_ids``."""
    duplicate_lines: set[int] = set()
    for line_no, record in iter_records(path):
        unit_id = record["id"]
        if unit_id in stats.done_ids:
            duplicate_lines.add(line_no)
            continue
        stats.done_ids.add(unit_id)
        if skipped:
            stats.skipped += 1
            continue
        stats.stored += 1
        tokens = 0
        for turn in record.get("turns") or ():
            usage = turn.get("usage") or {}
            tokens += int(usage.get("completion_tokens") or 0)
            stats.turn_latency_s.append(float(turn.get("latency_s") or 0.0))
        stats.completion_tokens.append(tokens)
    if duplicate_lines:
        _drop_lines(path, duplicate_lines)
        stats.duplicate_ids += len(duplicate_lines)


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
