"""The ids of a run directory's records, read fast and held as 64-bit keys.

The writer (:class:`~tokenplan.runner.store.appendlog.AppendLog`) writes each record with ``orjson``,
the ``"id"`` key first (every record the runner builds starts with it), so a line reads
``{"id":"<id>",…}\\n``; orjson writes text as UTF-8 and escapes only ``"``, ``\\`` and control
characters. :func:`record_id` takes the id from the start of such a line without parsing the
rest (an id without a backslash ends at the next ``"``); any other line (an escaped id, another
key order from an older version, damage) is parsed whole.

:func:`scan_keys` gives one :func:`~tokenplan.runner.store.idset.id_key` per record (8 bytes each);
:func:`repeated_lines` then confirms a repeated key by the exact ids, so a record is called a
repeat only when its exact id occurred before (two ids that merely share a key are both kept).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Sequence
from pathlib import Path

import orjson

from tokenplan.errors import RunDirError
from tokenplan.runner.store.idset import id_key

_ID_START = b'{"id":"'


def record_id(raw: bytes, path: Path, line_no: int) -> str:
    """The id of the record on line ``raw`` (with its newline) of ``path`` (see the module docstring).

    Raises:
        RunDirError: the line is not a JSON object with a text ``id``.
    """
    if raw.startswith(_ID_START) and raw.endswith(b"}\n"):
        end = raw.find(b'"', 7)
        text = raw[7:end]
        if end > 0 and b"\\" not in text:
            try:
                return text.decode()
            except UnicodeDecodeError:
                pass
    try:
        record = orjson.loads(raw)
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise ValueError("no text 'id'")
    except ValueError as problem:
        raise RunDirError(
            f"{path}:{line_no}: damaged record ({problem}); the run directory was edited or corrupted"
        ) from None
    return record["id"]


def scan_keys(paths: Sequence[Path]) -> tuple[array, list[int]]:
    """The key of every record of ``paths`` in order (``array('Q')``), and each file's record count.

    Raises:
        RunDirError: a damaged line (:func:`record_id`).
    """
    keys, counts = array("Q"), []
    for path in paths:
        before = len(keys)
        with open(path, "rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                keys.append(id_key(record_id(raw, path, line_no)))
        counts.append(len(keys) - before)
    return keys, counts


# Keys sorted per run of this many: one run's Python ints (~44 bytes each) exist only while it sorts, so a
# run of 2^16 costs ~3 MB where 2^20 cost ~46 MB (the 1M-row resume peaked at 175 MiB with those)
SORT_RUN_KEYS = 1 << 16


def repeated_keys(keys: array) -> tuple[array, set[int]]:
    """The keys of ``keys`` (``array('Q')``) sorted and unique, as a new ``array('Q')``, and the
    keys that occur more than once. ``keys`` is emptied: its runs of :data:`SORT_RUN_KEYS` are
    sorted in place and merged (``heapq.merge``) into the result, so at most 16 bytes per key are
    held at once (the runs and the result) plus one run's Python ints while it sorts."""
    for start in range(0, len(keys), SORT_RUN_KEYS):
        keys[start : start + SORT_RUN_KEYS] = array("Q", sorted(keys[start : start + SORT_RUN_KEYS]))
    unique, repeated = array("Q"), set()
    with memoryview(keys) as view:
        runs = [view[start : start + SORT_RUN_KEYS] for start in range(0, len(keys), SORT_RUN_KEYS)]
        last = None
        for key in heapq.merge(*runs) if len(runs) > 1 else (runs[0] if runs else ()):
            if key == last:
                repeated.add(key)
            else:
                unique.append(key)
                last = key
        for run in runs:
            run.release()
    del keys[:]
    return unique, repeated


def repeated_lines(paths: Sequence[Path], suspects: set[int]) -> list[set[int]]:
    """For each of ``paths``, the 1-based lines whose exact id occurred before (in that file or
    an earlier one); only records whose key is in ``suspects`` are compared."""
    first: set[str] = set()
    lines: list[set[int]] = []
    for path in paths:
        here: set[int] = set()
        with open(path, "rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                unit_id = record_id(raw, path, line_no)
                if id_key(unit_id) not in suspects:
                    continue
                if unit_id in first:
                    here.add(line_no)
                else:
                    first.add(unit_id)
        lines.append(here)
    return lines
