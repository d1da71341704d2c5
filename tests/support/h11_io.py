"""HTTP/1.1 plumbing shared by the test servers (fault injector, simulated engine) on h11."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable

import h11

# Answers one request; returns False to close the connection (None or True keeps it open).
Responder = Callable[[h11.Connection, asyncio.StreamWriter, h11.Request, bytes], Awaitable[bool | None]]


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


async def send_bytes(
    conn: h11.Connection,
    writer: asyncio.StreamWriter,
    status: int,
    data: bytes,
    content_type: str = "application/json",
    extra: tuple = (),
) -> None:
    """One complete response with a Content-Length body."""
    headers = [("content-type", content_type), ("content-length", str(len(data))), *extra]
    writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
    writer.write(conn.send(h11.Data(data=data)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()


async def handle_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, respond: Responder) -> None:
    """Serve one keep-alive connection: each request goes to ``respond`` until the peer closes,
    ``respond`` returns False, or h11 says the connection must close. A client that goes away
    mid-request, or the server stopping, ends it quietly."""
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request, body = await read_request(conn, reader)
            if request is None:
                return
            keep = await respond(conn, writer, request, body)
            if keep is False or conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError, asyncio.CancelledError):
        return
    finally:
        writer.close()


async def listen_until_signal(respond: Responder, port: int, port_file: str | None, backlog: int) -> None:
    """Listen on 127.0.0.1:``port`` (0 = any free port), write the bound port to ``port_file``
    atomically (the parent waits for that file), and serve until SIGTERM or SIGINT."""
    listener = await asyncio.start_server(
        lambda r, w: handle_connection(r, w, respond), "127.0.0.1", port, backlog=backlog, reuse_address=True
    )
    bound = listener.sockets[0].getsockname()[1]
    if port_file:
        with open(port_file + ".tmp", "w") as fh:
            fh.write(str(bound))
        os.replace(port_file + ".tmp", port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with listener:
        await stop.wait()
