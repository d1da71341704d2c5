"""Server-Sent Events framing: the ``data:`` payloads of a byte stream (moved out of
:mod:`tokenplan.client.answers`, which re-exports it)."""

from __future__ import annotations


class SSELines:
    """Splits a Server-Sent Events byte stream into the payloads of its ``data:`` lines.

    Lines end with LF, CRLF or CR; reads may cut a line anywhere, so the unfinished tail is kept
    for the next block. Comment (``:``), ``event:``, ``id:`` and blank lines are skipped.
    """

    def __init__(self) -> None:
        self._tail = b""
        self._after_cr = False  # the last block ended with CR: a leading LF completes a CRLF

    def feed(self, block: bytes) -> list[bytes]:
        """The ``data:`` payloads completed by ``block``, in order."""
        if not block:
            return []
        if self._after_cr and block.startswith(b"\n"):
            block = block[1:]
        self._after_cr = block.endswith(b"\r")
        buffer = self._tail + block if self._tail else block
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._tail = lines.pop()
        return self._payloads(lines)

    def close(self) -> list[bytes]:
        """The payload of a last line that the stream ended without terminating."""
        tail, self._tail = self._tail, b""
        return self._payloads([tail]) if tail else []

    @staticmethod
    def _payloads(lines: list[bytes]) -> list[bytes]:
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]
