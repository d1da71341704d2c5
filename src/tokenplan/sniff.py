"""An input file's first bytes against its name: a file named as one format that holds another is
refused in one line saying what it holds (:func:`check_content_matches_name`). ``generate``'s
inputs and ``bench --dataset`` read the same formats and are checked alike.

Layer: bottom (no tokenplan import but the errors), so the runner and the bench both use it."""

from __future__ import annotations

from pathlib import Path

from tokenplan.errors import InputError

# The first bytes of each format read here (Parquet: "PAR1", Apache Parquet's file layout; the
# codecs' frame magics: gzip RFC 1952 §2.3.1, zstd RFC 8878 §3.1.1, bzip2 "BZh", LZ4 frame format
# §"General Structure") → (what it is, the suffix that names it).
_MAGIC = {
    b"PAR1": ("Parquet", ".parquet"),
    b"\x1f\x8b": ("gzip", ".gz"),
    b"\x28\xb5\x2f\xfd": ("zstd", ".zst"),
    b"BZh": ("bzip2", ".bz2"),
    b"\x04\x22\x4d\x18": ("LZ4", ".lz4"),
}


def check_content_matches_name(path: Path, field: str = "input") -> None:
    """Refuse a file whose first bytes are another format than its name says: a Parquet or gzip
    file named ``.jsonl`` had every row rejected as "'utf-8' codec can't decode…", and a plain
    JSONL named ``.jsonl.gz`` was "truncated or damaged at byte N of N (incorrect header check)"
    (a new-user pass). An empty or unreadable file is left to the reader's own message.

    Raises:
        InputError: ``field`` (the option: ``input``, ``dataset``), the file, what its first bytes
            say it holds and the name to give it.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return
    if not head:
        return
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # a UTF-16 byte-order mark: lines split mid-character
        raise InputError(field, str(path), "UTF-8 text (this file is UTF-16: save it as UTF-8)")
    found = next((what for magic, what in _MAGIC.items() if head.startswith(magic)), None)
    named = next(((what, suffix) for what, suffix in _MAGIC.values() if path.name.endswith(suffix)), None)
    if named is None and path.name.endswith(".zstd"):
        named = _MAGIC[b"\x28\xb5\x2f\xfd"]
    if found == named:
        return
    holds = f"{found[0]} data" if found else "uncompressed text"
    says = f"{named[0]}" if named else "uncompressed JSON or JSONL"
    if found is not None:
        fix = f"rename it to end in {found[1] if found[1] == '.parquet' else '.jsonl' + found[1]}"
    else:
        fix = f"rename it without {named[1] if named else 'its suffix'}"
    raise InputError(
        field, str(path), f"a file whose name says its format: this one holds {holds}, its name says {says} ({fix})"
    )
