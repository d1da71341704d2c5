"""Input files, read as a stream of decoded items: JSONL (plain or zstd), Parquet, and ``.json``
holding either JSONL or one JSON array of rows (how ShareGPT and many datasets ship; streamed with
ijson, the "line" of an array element is its 1-based index). Files are read line by line
(Parquet: batch by batch), never whole.

Faults: a line that is not JSON or is nested deeper than the parser allows comes out as a
:class:`~tokenplan.runner.row_shapes.RowError` in its place (the caller rejects it); a file that
stops being readable part-way (a corrupt zstd frame or Parquet page) raises one of
:func:`read_errors` from the iterator. A file that cannot be read at all is refused before
anything is sent (:func:`check_readable`).

Blank lines: a JSONL line that is empty or only whitespace is not a row. The JSON Lines format
allows none, but tools often write trailing or separating newlines, so such a line is neither
used nor rejected: it is counted (:attr:`ReadStats.blank_lines`) and reported in the run's
summary as ``blank_lines``, so nothing in the input goes unaccounted for.
"""

from __future__ import annotations

import glob
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tokenplan.errors import InputError
from tokenplan.runner.row_shapes import RowError

SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.zst", ".jsonl.zstd", ".zst", ".zstd", ".parquet")


@dataclass(slots=True)
class ReadStats:
    """What :func:`read_rows` read besides rows: blank or whitespace-only JSONL lines."""

    blank_lines: int = 0


def expand_inputs(patterns: Sequence[str]) -> list[Path]:
    """Files named by ``patterns`` (paths or globs), in the given order, each glob sorted.

    Raises:
        InputError: a pattern matches no file, or a file's suffix is not a known format.
    """
    files: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise InputError("input", pattern, "existing files or globs that match files")
        for match in matches:
            if not match.endswith(SUFFIXES):
                raise InputError("input", match, SUFFIXES)
            files.append(Path(match))
    return files


def file_name(path: Path) -> str:
    """``path`` as UTF-8 text: a name with bytes that are not UTF-8 (which Python keeps as lone
    surrogates) gets U+FFFD for them, so records naming the file can be written."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file raises: OS errors, zstd frame errors, Arrow errors."""
    import pyarrow as pa
    import zstandard

    return (OSError, EOFError, ValueError, zstandard.ZstdError, pa.ArrowException)


def why(problem: BaseException) -> str:
    """``"TypeName: message"`` on one line, at most 200 characters of message."""
    text = " ".join(str(problem).split())[:200]
    return f"{type(problem).__name__}: {text}" if text else type(problem).__name__


def check_readable(files: Sequence[Path]) -> None:
    """Open each file and read its start (zstd: the first 64 KiB decompressed; Parquet: the
    footer and the first row group's first batch), so a file that cannot be read at all is
    refused before anything is sent.

    Raises:
        InputError: naming the file and why it cannot be read.
    """
    for path in files:
        try:
            if path.name.endswith(".parquet"):
                import pyarrow.parquet as pq

                parquet = pq.ParquetFile(path)
                if parquet.metadata.num_rows:
                    next(parquet.iter_batches(batch_size=1), None)
                continue
            with _open_binary(path) as fh:
                fh.read(65536)
        except read_errors() as problem:
            raise InputError("input", str(path), f"a readable JSONL, JSONL.zst or Parquet file "
                             f"({why(problem)})") from None


def count_rows(files: Sequence[Path]) -> int:
    """Rows expected in ``files``: non-empty lines of JSONL, ``num_rows`` of Parquet (for ETA)."""
    total = 0
    for path in files:
        if path.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            total += pq.ParquetFile(path).metadata.num_rows
            continue
        if _is_json_array(path):
            total += sum(1 for _ in _json_array_items(path))
            continue
        with _open_binary(path) as fh:
            total += sum(1 for line in fh if line.strip())
    return total


def count_rows_or_none(files: Sequence[Path]) -> int | None:
    """:func:`count_rows`, or None when a file breaks part-way (the reader then rejects the
    unreadable part; the count only feeds the ETA)."""
    try:
        return count_rows(files)
    except read_errors():
        return None


def raw_items(path: Path, stats: ReadStats) -> Iterator[tuple[int, Any]]:
    """``(line, item)`` for every item of ``path`` (see the module docstring); blank JSONL lines
    are counted in ``stats``, not yielded."""
    if path.name.endswith(".parquet"):
        yield from _parquet_items(path)
        return
    if _is_json_array(path):
        yield from _json_array_items(path)
        return
    with _open_binary(path) as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                stats.blank_lines += 1
                continue
            try:
                yield line_no, _loads(raw)
            except ValueError as problem:
                yield line_no, RowError(f"invalid JSON: {' '.join(str(problem).split())[:200]}")
            except RecursionError:
                yield line_no, RowError("invalid JSON: nested deeper than the parser's limit")


# 19 digits in a row: the shortest integer orjson may not keep exact (2^63 = 9223372036854775808).
# Found by mapping every digit to "0" and the rest to " " (one pass in C; a regex backtracks at every
# digit and cost 6x as much). Digits inside text match too; such a line is only parsed the slower,
# exact way.
_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))  # b"0"…b"9" → b"0", else b" "
_LONG_DIGITS = b"0" * 19
FAST_PARSE_MAX_BRACKETS = 512  # more '{' + '[' than this in a line: parsed by json, not orjson


def _is_json_array(path: Path) -> bool:
    """Whether a ``.json`` file holds one JSON array (its first non-blank byte is ``[``)."""
    if not path.name.endswith(".json"):
        return False
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def _json_array_items(path: Path) -> Iterator[tuple[int, Any]]:
    """The elements of a file holding one JSON array, streamed; "line" is the 1-based index.
    A file that stops being valid JSON yields one :class:`RowError` at the element it broke."""
    import ijson

    index = 0
    with open(path, "rb") as fh:
        try:
            for index, item in enumerate(ijson.items(fh, "item", use_float=True), start=1):
                yield index, item
        except ijson.JSONError as problem:
            yield index + 1, RowError(f"invalid JSON in the array after element {index}: {problem}")


def _loads(raw: bytes) -> Any:
    """``json.loads``, ~3x faster through orjson; lines orjson refuses but Python's json takes
    (``NaN``, integers past 64 bits) still go through ``json.loads``."""
    if raw.count(b"{") + raw.count(b"[") > FAST_PARSE_MAX_BRACKETS:
        # orjson 3.8 has no nesting limit: 100,000 nested objects overflow the C stack and kill
        # the process (measured: SIGSEGV). Python's json stops at the recursion limit with a
        # RecursionError, which becomes a reject; a line with this many brackets is rare.
        return json.loads(raw)
    if _LONG_DIGITS in raw.translate(_DIGITS_AS_ZERO):
        # orjson reads an integer past 64 bits as a float, silently (2^64 → 1.8446744073709552e19);
        # json keeps it exact, and the row check refuses it by name (runner.storable).
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _parquet_items(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    row_no = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        for item in batch.to_pylist():
            row_no += 1
            yield row_no, item


def _open_binary(path: Path) -> io.BufferedIOBase:
    fh = open(path, "rb")
    if path.name.endswith((".zst", ".zstd")):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(fh, closefd=True))
    return fh
