"""Running a command's coroutine from synchronous code, whether or not an event loop already runs.

``asyncio.run`` refuses to start inside a running loop ("asyncio.run() cannot be called from a
running event loop"), which is where Jupyter and IPython run every cell. :func:`run_blocking`
runs the coroutine there in a worker thread with a loop of its own and waits for it, so
``generate()`` and ``bench()`` work the same in a script and in a notebook; the ``*_async``
variants are what to ``await`` when the caller wants its loop free meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_running() -> bool:
    """Whether an event loop runs in this thread (a Jupyter cell, an async application)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """The result of the coroutine ``make()``, run to its end from synchronous code.

    Without a running loop in this thread: ``asyncio.run(make())``. With one (Jupyter): in a
    worker thread that runs its own loop, this thread waiting; the caller's loop is blocked for
    that time, as any synchronous call blocks it. A ``KeyboardInterrupt`` while waiting (Ctrl-C,
    a kernel interrupt) cancels the coroutine, waits until it has unwound (files closed) and is
    raised again.

    Raises:
        Whatever the coroutine raises, unchanged.
    """
    if not loop_running():
        return asyncio.run(make())
    box: dict[str, Any] = {}
    ready = threading.Event()  # set once the worker's loop and task are known (or it failed first)

    async def main() -> T:
        box["loop"], box["task"] = asyncio.get_running_loop(), asyncio.current_task()
        ready.set()
        return await make()

    def work() -> None:
        try:
            box["result"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, raised there
            box["error"] = exc
        finally:
            ready.set()

    worker = threading.Thread(target=work, name="tokenplan-run", daemon=True)
    worker.start()
    try:
        worker.join()
    except KeyboardInterrupt:
        ready.wait()
        loop, task = box.get("loop"), box.get("task")
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: it has finished
                loop.call_soon_threadsafe(task.cancel)
        worker.join()
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]
