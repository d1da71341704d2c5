"""How a record reaches a run directory's files whole: append-only JSONL logs and whole-file writes.

Every record is one ``os.write`` of one complete line to a file opened with ``O_APPEND``, so a
``kill -9`` leaves at most one torn line at the end of a file (cut on the next open, see
:func:`tokenplan.runner.store.rundir.cut_torn_tail`). A record that could not be written whole (a full
disk, ``ulimit -f``, an I/O error) is cut off again — the file is truncated back to where the
record began — and :class:`WriteFailed` is raised, so the caller stops sending; the directory stays
resumable. Small whole files (``manifest.json``, ``summary.json``) are written beside their name
and renamed over it (:func:`write_whole`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import orjson

from tokenplan.errors import RunDirError


class WriteFailed(RunDirError):
    """A file of the run directory could not be written (disk full, file size limit, I/O error).

    The file ends at its last whole record; the message is one line saying what to do.
    """

    def __init__(self, path: Path, problem: OSError):
        self.path, self.errno = path, problem.errno
        why = problem.strerror or type(problem).__name__
        super().__init__(
            f"cannot write {path} ({why}): stopped sending; every record written so far is "
            "whole and kept — make room and rerun the same command to resume"
        )


class RecordUnstorable(RunDirError):
    """A record orjson cannot write (the checks before sending should make this impossible:
    :mod:`tokenplan.runner.input.storable`); nothing of it was written, the file stays whole."""

    def __init__(self, path: Path, record: dict[str, Any], problem: Exception):
        unit = record.get("id")
        super().__init__(
            f"cannot store the record of {unit!r} in {path} ({problem}): stopped sending; every "
            "record written so far is whole and kept — report this as a tokenplan bug"
        )


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
        try:
            data = memoryview(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
        except orjson.JSONEncodeError as problem:  # rows and answers are checked before sending
            raise RecordUnstorable(self.path, record, problem) from None
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
    ``part-<epoch>-<actor>-`` (:func:`tokenplan.runner.store.fencing.actor_prefix`). Only files of this
    series (the prefix then exactly five digits) are continued; every ``part-*`` file is a shard.
    """

    def __init__(self, directory: Path, max_bytes: int, prefix: str = "part-"):
        self.directory, self.max_bytes, self.prefix = directory, max_bytes, prefix
        existing = [
            p
            for p in shard_paths(directory)
            if p.name.startswith(prefix) and len(p.name) == len(prefix) + 11 and p.name[len(prefix) : -6].isdigit()
        ]
        index = int(existing[-1].name[len(prefix) : -6]) if existing else 0
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
                raise RunDirError(
                    f"{path}:{line_no}: damaged record ({problem}); the run directory was edited or corrupted"
                ) from None
            yield line_no, record
