"""Input rows: every item of the input files as a :class:`Row` or a :class:`Reject`, in order.

Reading the files is :mod:`tokenplan.runner.input.files`; turning one item into a row (its shape,
messages and id) is :mod:`tokenplan.runner.input.shapes`. Here they meet: a row that cannot be used
becomes a :class:`Reject` (file, line, reason); a second row with an id already seen is rejected as
a duplicate; a file that stops being readable part-way (truncated, corrupt) raises
:class:`~tokenplan.runner.input.files.InputBroken` naming the file, the byte and the last row read,
so the run stops and does not report success. Nothing in the input is dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tokenplan.runner.input.files import InputBroken, ReadStats, file_name, raw_items, read_errors
from tokenplan.runner.input.shapes import Row, RowError, declared_id, parse_row, unanswered_tool_call, valid_unicode


class SeenIds(Protocol):
    """The reader's duplicate check: :class:`~tokenplan.runner.store.idset.IdSet` (the run's one id set,
    by 64-bit key) or :class:`ExactIds` (exact strings)."""

    def first_sighting(self, row_id: str) -> bool: ...


class ExactIds:
    """Input row ids seen, as exact strings: the reader's duplicate check when there is no run
    directory (``--dry-run``, counting units); the same :meth:`first_sighting` as the run
    directory's :class:`~tokenplan.runner.store.idset.IdSet`."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def first_sighting(self, row_id: str) -> bool:
        """Whether ``row_id`` is seen for the first time (and mark it seen)."""
        if row_id in self._seen:
            return False
        self._seen.add(row_id)
        return True


@dataclass(frozen=True, slots=True)
class Reject:
    """An input row set aside: where it is (file, 1-based line), why, and its id when known."""

    source: str
    line: int
    reason: str
    id: str | None = None


def read_rows(
    files: Sequence[Path], stats: ReadStats | None = None, seen: SeenIds | None = None, mode: str = "regenerate"
) -> Iterator[Row | Reject]:
    """Every row of ``files`` in order, as a :class:`Row` or a :class:`Reject`; blank lines
    are not rows and are counted in ``stats`` (see the module docstring).

    ``seen``: where row ids are checked for duplicates; a run passes its run directory's id set
    (one set for done and duplicate ids, :mod:`tokenplan.runner.store.idset`), others get exact strings.
    ``mode``: the run's (``regenerate`` refuses a row ending in an unanswered tool call,
    :func:`~tokenplan.runner.input.shapes.unanswered_tool_call`).

    Raises:
        InputBroken: a file stops being readable part-way (after the rows before the break).
    """
    seen = seen if seen is not None else ExactIds()
    stats = stats if stats is not None else ReadStats()
    for path in files:
        items, line, source = raw_items(path, stats), 0, file_name(path)
        while True:
            try:  # only reading the file is guarded here: a bad row is a reject, not a bad file
                line, item = next(items)
            except StopIteration:
                break
            except read_errors() as problem:  # a file changed or gone since it was checked
                raise InputBroken(path, None, None, line, problem) from None
            yield _row_or_reject(item, source, line, seen, mode)


def until_broken(items: Iterator[Row | Reject], stats: ReadStats) -> Iterator[Row | Reject]:
    """``items`` until a file breaks part-way: the :class:`InputBroken` is kept in
    ``stats.broken`` and the stream ends there, so the runner settles what it has sent (every
    answer stored, a rerun resumes) before the run ends with that error, never as a success."""
    try:
        yield from items
    except InputBroken as broken:
        stats.broken = broken


def _row_or_reject(item: Any, source: str, line: int, seen: SeenIds, mode: str) -> Row | Reject:
    try:
        row = parse_row(item, source, line)
        valid_unicode(row.id, "id")
    except RowError as problem:
        return Reject(source, line, str(problem), _safe_id(item))
    except RecursionError:
        return Reject(source, line, "nested deeper than the parser's limit", _safe_id(item))
    unsendable = unanswered_tool_call(row.messages) if mode == "regenerate" else None
    if unsendable:
        return Reject(source, line, unsendable, row.id)
    if not seen.first_sighting(row.id):
        return Reject(source, line, _duplicate(row.id, item), row.id)
    return row


def _duplicate(row_id: str, item: Any) -> str:
    """Why a row whose id was seen is set aside, in the words of where its id came from: a row
    with no id of its own is a repeat of another's messages (its id is their hash; a break-it
    pass was told of ids it never wrote), an integer id may repeat one written as text."""
    declared = declared_id(item)
    if declared is None:
        return f"duplicate messages: no id, and another row's messages are the same (both hash to {row_id!r})"
    raw = item.get("id") if item.get("id") is not None else item.get("custom_id")
    kind = ' (ids compare as text: 7 and "7" are one id)' if isinstance(raw, int) else ""
    return f"duplicate id {row_id!r}{kind}"


def _safe_id(item: Any) -> str | None:
    """The row's declared id for a reject line, or None when it is not valid text either."""
    try:
        found = declared_id(item)
        return None if found is None else valid_unicode(found, "id")
    except RowError:
        return None


def limited(items: Iterator[Row | Reject], limit: int | None) -> Iterator[Row | Reject]:
    """``items`` up to and including the ``limit``-th :class:`Row` (rejects pass through); all
    of them when ``limit`` is ``None``."""
    if limit is None:
        yield from items
        return
    rows = 0
    for item in items:
        if rows >= limit:
            return
        yield item
        rows += isinstance(item, Row)


def count_units(files: Sequence[Path], n: int, limit: int | None, mode: str = "regenerate") -> int:
    """Units the input holds: usable rows (the first ``limit``), × ``n`` samples, read from the
    files again (after a stop, the units never read are part of the input too)."""
    return n * sum(isinstance(item, Row) for item in limited(read_rows(files, mode=mode), limit))
