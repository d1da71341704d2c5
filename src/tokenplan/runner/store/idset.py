"""One compact set of unit ids for a run: what is done, and which input rows were already seen.

A resumed run used to hold every id twice as Python strings (the run directory's done-set and the
reader's duplicate-id set): ~90 bytes per id per set, 1.8 GB at 10M rows. :class:`IdSet` holds
each id as a 64-bit key (the first 8 bytes of BLAKE2b of its UTF-8 text, :func:`id_key`):

* the ids stored before this run: one sorted ``array('Q')`` (8 bytes per id), searched by
  bisection, plus one byte per stored id that marks "seen as an input row in this run" and "asked
  for as a unit of this input" (what is stored outside the input is then known at the end);
* ids added during the run (stored, skipped) and input row ids not stored before: Python sets of
  ints (this run's work, bounded by what it sends and reads beyond the stored ids).

Collision rule: two different ids with the same key are the same id here. For ``s`` stored ids
and ``q`` ids looked up, the chance that any lookup is wrong is at most ``s·q / 2**64`` (10M
stored × 10M looked up: 5.4e-6); a wrong answer is a unit counted as done and not sent, or an
input row rejected as ``duplicate id`` (named in ``rejects.jsonl``, so it is visible). Dropping
duplicate *records* on open (:mod:`tokenplan.runner.store.rundir`) confirms each key match by the exact
id before it removes a line, so no stored record is ever lost to a collision.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Set
from hashlib import blake2b

ROW_SEEN, UNIT_SEEN = 1, 2  # the marks of a stored id (IdSet._seen_stored)
_UNIT_SEEN_BYTE = bytes((b & UNIT_SEEN) >> 1 for b in range(256))  # a mark byte → 1 where UNIT_SEEN is set


def id_key(unit_id: str) -> int:
    """The 64-bit key of an id: BLAKE2b (RFC 7693) with an 8-byte digest of its UTF-8 text, as an
    unsigned little-endian int in ``[0, 2**64)`` (lone surrogates are encoded as they are)."""
    return int.from_bytes(blake2b(unit_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class IdSet:
    """Ids by 64-bit key (see the module docstring): ``in`` and :meth:`add` for the done-set,
    :meth:`first_sighting` for the reader's duplicate check.

    Args:
        stored: the keys of the ids stored before this run, sorted, unique, ``uint64`` (owned by
            the set from here on).
    """

    def __init__(self, stored: array | None = None):
        self._stored = array("Q") if stored is None else stored
        self._stored_view = memoryview(self._stored)  # a view: the array cannot grow while it is held
        # per stored id: bit ROW_SEEN, seen as an input row; bit UNIT_SEEN, a unit of this input
        self._seen_stored = bytearray(len(self._stored))
        self._added: set[int] = set()  # done in this run, not stored before
        self._seen_new: set[int] = set()  # input row ids not stored before
        self._last: tuple[str, int] = ("", id_key(""))  # the reader and the dispatcher ask in turn

    def _key(self, unit_id: str) -> int:
        last_id, last_key = self._last
        if unit_id is last_id or unit_id == last_id:
            return last_key
        key = id_key(unit_id)
        self._last = (unit_id, key)
        return key

    def _stored_index(self, key: int) -> int:
        """The position of ``key`` among the stored keys, or -1."""
        view = self._stored_view
        i = bisect_left(view, key)
        return i if i < len(view) and view[i] == key else -1

    def __contains__(self, unit_id: object) -> bool:
        if not isinstance(unit_id, str):
            return False
        key = self._key(unit_id)
        return key in self._added or self._stored_index(key) >= 0

    def add(self, unit_id: str) -> None:
        """Count ``unit_id`` as done."""
        key = self._key(unit_id)
        if self._stored_index(key) < 0:
            self._added.add(key)

    def __len__(self) -> int:
        return len(self._stored) + len(self._added)

    def __eq__(self, other: object) -> bool:
        """Equal to a set of ids with the same number of ids, each of them in here (by key)."""
        if isinstance(other, IdSet):
            return len(self) == len(other) and all(
                key in other._added or other._stored_index(key) >= 0 for key in self._keys()
            )
        if isinstance(other, Set):
            return len(self) == len(other) and all(unit_id in self for unit_id in other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def _keys(self) -> Iterable[int]:
        yield from self._stored_view
        yield from self._added

    def first_sighting(self, row_id: str) -> bool:
        """Whether ``row_id`` is seen for the first time as an input row (and mark it seen);
        False for a duplicate row of the input."""
        key = self._key(row_id)
        i = self._stored_index(key)
        if i >= 0:
            if self._seen_stored[i] & ROW_SEEN:
                return False
            self._seen_stored[i] |= ROW_SEEN
            return True
        if key in self._seen_new:
            return False
        self._seen_new.add(key)
        return True

    def done_for_input(self, unit_id: str) -> bool:
        """Whether ``unit_id`` (a unit of the input being read) is done; a stored one is marked
        as a unit of this input, so :meth:`stored_outside_input` leaves it out."""
        key = self._key(unit_id)
        i = self._stored_index(key)
        if i >= 0:
            self._seen_stored[i] |= UNIT_SEEN
            return True
        return key in self._added

    def stored_outside_input(self) -> set[int]:
        """The keys of the ids stored before this run that no unit of the input asked for
        (:meth:`done_for_input`): records of an earlier, larger or different input (``--force``,
        ``--limit``). Complete only once the whole input was read."""
        marks = self._seen_stored
        if marks.translate(_UNIT_SEEN_BYTE).count(0) == 0:  # every stored id asked for: the usual end
            return set()
        return {key for i, key in enumerate(self._stored_view) if not marks[i] & UNIT_SEEN}

    @property
    def nbytes(self) -> int:
        """Bytes the stored keys and their seen marks take (the sets of this run's ids not counted)."""
        return len(self._stored) * self._stored.itemsize + len(self._seen_stored)
