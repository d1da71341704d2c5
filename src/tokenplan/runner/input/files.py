"""Input files, read as a stream of decoded items: JSONL (plain, or compressed with zstd, gzip,
bz2 or lz4: ``.jsonl.zst``, ``.jsonl.gz``, ...), Parquet, and ``.json`` holding either JSONL or one
JSON array of rows (how ShareGPT and many datasets ship; streamed with ijson, the "line" of an
array element is its 1-based index). Files are read line by line (Parquet: batch by batch), never
whole. Compressed files are decompressed by pyarrow's stream (``pyarrow.CompressedInputStream``),
which raises on a stream that ends before its last frame or block does.

Parquet columns of the ``arrow.json`` extension type hold JSON text; Hugging Face ``datasets`` 5.x
writes a list of messages whose keys differ from row to row (every regenerated set: reasoning on
some turns, tool fields on others) as ``list<arrow.json>``. Their values are decoded, at any depth,
so such a row reads as the rows it was made from.

Faults: a line that is not JSON or is nested deeper than the parser allows comes out as a
:class:`~tokenplan.runner.input.shapes.RowError` in its place (the caller rejects it). A file that
stops being readable part-way (a truncated or corrupt compressed stream, a corrupt Parquet page,
a JSON array cut short) raises :class:`InputBroken`, naming the file, the byte it broke at and the
last row read: the rows after it cannot be read, so no run over it may report success. A file
that cannot be read at all, or a compressed file that does not decompress to its end, is refused
before anything is sent (:func:`check_readable`).

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
from typing import Any, cast

import orjson

from tokenplan.errors import InputError, TokenplanError
from tokenplan.runner.input.shapes import RowError
from tokenplan.sniff import check_content_matches_name

# Compressed JSONL: the last suffix names the codec (pyarrow's names).
CODECS = {".zst": "zstd", ".zstd": "zstd", ".gz": "gzip", ".bz2": "bz2", ".lz4": "lz4"}
SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", *CODECS)
UTF8_BOM = b"\xef\xbb\xbf"  # a byte-order mark some editors write at the start of UTF-8 text


@dataclass(slots=True)
class ReadStats:
    """What :func:`read_rows` read besides rows: blank or whitespace-only JSONL lines, and the
    file that broke part-way (:func:`tokenplan.runner.input.rows.until_broken`), if one did."""

    blank_lines: int = 0
    broken: InputError | None = None


def expand_inputs(patterns: Sequence[str]) -> list[Path]:
    """Files named by ``patterns`` (paths or globs), in the given order, each glob sorted.

    Raises:
        InputError: a pattern matches no file, a file's suffix is not a known format, or one file
            is named twice (``in.jsonl in.jsonl``, or by two overlapping globs: its rows were each
            read twice, the second copies rejected as duplicate ids, and the run said ``[ok]``).
    """
    files: list[Path] = []
    named: dict[tuple[int, int], str] = {}  # the file (device, inode: a link is the same file) → its first pattern
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise InputError("input", pattern, "existing files or globs that match files")
        for match in matches:
            if not match.endswith(SUFFIXES):
                raise InputError("input", match, SUFFIXES)
            st = os.stat(match)
            same = (st.st_dev, st.st_ino)
            if same in named:
                raise InputError("input", match, f"each file once (also named by {named[same]!r})")
            named[same] = pattern
            files.append(Path(match))
    return files


def file_name(path: Path) -> str:
    """``path`` as UTF-8 text: a name with bytes that are not UTF-8 (which Python keeps as lone
    surrogates) gets U+FFFD for them, so records naming the file can be written."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file raises: OS errors (pyarrow's decompressors raise ``OSError``:
    "Truncated compressed stream", "ZSTD decompress failed: ..."), Arrow errors."""
    import pyarrow as pa

    return (OSError, EOFError, ValueError, pa.ArrowException)


class InputBroken(InputError):
    """An input file that stops being readable part-way: the rows after ``line`` cannot be read.

    One line: the file, where it broke (``byte`` of ``size`` of the file as stored, i.e. the
    compressed bytes consumed; for Parquet the failing row group's offset), the last row read
    (``line``: 1-based line, array element or Parquet row; 0 when none) and why.
    """

    def __init__(self, path: Path, byte: int | None, size: int | None, line: int, problem: BaseException | str):
        self.field, self.value, self.line, self.byte = "input", file_name(path), line, byte
        where = "" if byte is None else f" at byte {byte:,}" + ("" if size is None else f" of {size:,}")
        last = f"line {line:,}" if line else "none"
        reason = problem if isinstance(problem, str) else why(problem)
        TokenplanError.__init__(
            self,
            f"input {self.value!r} is truncated or damaged{where} ({reason}); "
            f"last row read: {last}; the rest of the file cannot be read: repair or "
            "copy it again, then rerun",
        )


def why(problem: BaseException) -> str:
    """``"TypeName: message"`` on one line, at most 200 characters of message."""
    text = " ".join(str(problem).split())[:200]
    return f"{type(problem).__name__}: {text}" if text else type(problem).__name__


def check_readable(files: Sequence[Path]) -> None:
    """Open each file and read what shows it whole before anything is sent: a compressed file is
    decompressed to its end (pyarrow checks every frame; measured on the 2-core CI machine: 0.34 s
    for 82 MB of JSONL as zstd, 0.96 s as gzip, i.e. ~4 s and ~12 s per GB), so a truncated
    or corrupt one is refused up front; a Parquet file's footer and first batch; the first 64 KiB
    of any other file.

    Raises:
        InputError: naming the file and why it cannot be read at all.
        InputBroken: a compressed file whose stream breaks part-way (byte, last whole line).
    """
    for path in files:
        check_content_matches_name(path)
        try:
            if path.name.endswith(".parquet"):
                import pyarrow.parquet as pq

                parquet = pq.ParquetFile(path)
                if parquet.metadata.num_rows:
                    next(parquet.iter_batches(batch_size=1), None)
                continue
            with _Source(path) as source:
                if source.compressed:
                    _read_to_the_end(path, source)
                else:
                    source.reader.read(65536)
        except read_errors() as problem:
            raise InputError(
                "input",
                str(path),
                f"a readable JSONL (plain, .zst, .gz, .bz2 or .lz4) or Parquet file ({why(problem)})",
            ) from None


def _read_to_the_end(path: Path, source: _Source) -> None:
    """Decompress ``source`` to its end, counting whole lines; a stream that breaks (or is not
    in its codec at all) raises :class:`InputBroken` with the lines read before the break."""
    lines = 0
    while True:
        try:
            chunk = source.reader.read(1 << 16)
        except read_errors() as problem:
            raise InputBroken(path, source.offset(), source.size, lines, problem) from None
        if not chunk:
            return
        lines += chunk.count(b"\n")


def count_rows(files: Sequence[Path]) -> int:
    """Rows expected in ``files``: non-empty lines of JSONL, ``num_rows`` of Parquet (for ETA).

    Raises:
        InputBroken: a file breaks part-way; or one of :func:`read_errors`.
    """
    total = 0
    for path in files:
        if path.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            total += pq.ParquetFile(path).metadata.num_rows
            continue
        if _is_json_array(path):
            total += sum(1 for _ in _json_array_items(path))
            continue
        with _Source(path) as source:
            total += sum(1 for line in source.reader if line.strip())
    return total


def count_rows_or_none(files: Sequence[Path]) -> int | None:
    """:func:`count_rows`, or None when a file breaks part-way (the reader then stops the run at
    the break; the count only feeds the ETA)."""
    broken: tuple[type[BaseException], ...] = (InputBroken, *read_errors())
    try:
        return count_rows(files)
    except broken:
        return None


def raw_items(path: Path, stats: ReadStats) -> Iterator[tuple[int, Any]]:
    """``(line, item)`` for every item of ``path`` (see the module docstring); blank JSONL lines
    are counted in ``stats``, not yielded.

    Raises:
        InputBroken: the file stops being readable part-way (after the items before the break).
    """
    if path.name.endswith(".parquet"):
        yield from _parquet_items(path)
        return
    if _is_json_array(path):
        yield from _json_array_items(path)
        return
    line_no = 0
    with _Source(path) as source:
        lines = iter(source.reader)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except read_errors() as problem:
                raise InputBroken(path, source.offset(), source.size, line_no, problem) from None
            line_no += 1
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


def _plain_name(path: Path) -> str:
    """The file name without a compression suffix (``a.json.gz`` → ``a.json``)."""
    for suffix in CODECS:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name


def _is_json_array(path: Path) -> bool:
    """Whether a ``.json`` file (plain or compressed) holds one JSON array (its first non-blank
    byte is ``[``). A compressed file whose start does not decompress is not one (the JSONL
    reader then reports it)."""
    if not _plain_name(path).endswith(".json"):
        return False
    try:
        with _Source(path) as source:
            head = source.reader.read(4096).removeprefix(UTF8_BOM).lstrip(b" \t\r\n")
    except read_errors():
        return False
    return head.startswith(b"[")


def _json_array_items(path: Path) -> Iterator[tuple[int, Any]]:
    """The elements of a file holding one JSON array, streamed; "line" is the 1-based index.

    Raises:
        InputBroken: the array stops being valid JSON (a file cut short) after element ``index``.
    """
    import ijson

    index, errors = 0, (ijson.JSONError, *read_errors())  # evaluated here, not when the generator is closed
    with _Source(path) as source:
        try:
            # a UTF-8 byte-order mark before the array is no JSON (ijson: "lexical error"): a
            # break-it pass saw such a file called truncated; JSONL lines skip it likewise
            if cast(io.BufferedReader, source.reader).peek(3)[:3] == UTF8_BOM:
                source.reader.read(3)
            for index, item in enumerate(ijson.items(source.reader, "item", use_float=True), start=1):
                yield index, item
        except errors as problem:
            raise InputBroken(
                path,
                source.offset(),
                source.size,
                index,
                f"the JSON array stops being valid after element {index:,}: "
                f"{(str(problem).splitlines() or [''])[0][:160]}",
            ) from None


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
    """Every row of a Parquet file as a dict, ``arrow.json`` values decoded
    (:mod:`tokenplan.runner.json_columns`), read row group by row group, 1,024 rows at a time.

    Raises:
        InputBroken: a page that cannot be read (the offset of its row group, the last row read).
    """
    import pyarrow.parquet as pq

    from tokenplan.runner.json_columns import json_decoders

    parquet = pq.ParquetFile(path)
    decoders = json_decoders(parquet.schema_arrow)
    row_no = 0
    for group in range(parquet.num_row_groups):
        batches = parquet.iter_batches(batch_size=1024, row_groups=[group])
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except read_errors() as problem:
                column = parquet.metadata.row_group(group).column(0)
                raise InputBroken(
                    path, column.dictionary_page_offset or column.data_page_offset, path.stat().st_size, row_no, problem
                ) from None
            for item in batch.to_pylist():
                row_no += 1
                yield row_no, decode_row(item, decoders)


def decode_row(item: dict[str, Any], decoders: dict[str, Any]) -> Any:
    """``item`` with its ``arrow.json`` columns decoded; text that is not JSON makes the row a
    :class:`RowError` naming the column."""
    for name, decode in decoders.items():
        try:
            item[name] = decode(item.get(name))
        except ValueError as problem:
            return RowError(f"{name}: arrow.json value is not JSON ({' '.join(str(problem).split())[:120]})")
    return item


class _Source:
    """One input file opened for reading: ``reader`` gives its bytes, decompressed when its last
    suffix names a codec (:data:`CODECS`; ``pyarrow.CompressedInputStream``, read 64 KiB at a time:
    a read that meets the break loses what it decoded, so at most that much before the break);
    ``offset()`` is how far into the stored file reading has got (compressed bytes consumed)."""

    def __init__(self, path: Path):
        self.size = path.stat().st_size
        self.codec = next((codec for suffix, codec in CODECS.items() if path.name.endswith(suffix)), None)
        self.compressed = self.codec is not None
        self._raw = open(path, "rb")  # noqa: SIM115 - closed by __exit__
        if self.codec is None:
            self.reader: io.BufferedIOBase = self._raw
            return
        import pyarrow as pa

        stream = pa.CompressedInputStream(pa.PythonFile(self._raw, mode="r"), self.codec)
        self.reader = io.BufferedReader(stream, buffer_size=1 << 16)

    def offset(self) -> int:
        """Bytes of the stored (compressed) file consumed so far."""
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return self.size

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reader.close()
        self._raw.close()
