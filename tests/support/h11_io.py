"""HTTP/1.1 plumbing shared by the test servers (fault injector, simulated engine) on h11."""

from __future__ import annotations

import asyncio

import h11


async def read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[h11.Request | None, bytes]:
    """The next request and its whole body; (None, b"") when the peer closed the connection."""
    request, chunks = None, []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data and request is None:
                return None, b""
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            chunks.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return request, b"".join(chunks)
        elif isinstance(event, h11.ConnectionClosed):
            return None, b""


async def send_bytes(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, data: bytes,
                     content_type: str = "application/json", extra: tuple = ()) -> None:
    """One complete response with a Content-Length body."""
    headers = [("content-type", content_type), ("content-length", str(len(data))), *extra]
    writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
    writer.write(conn.send(h11.Data(data=data)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()
