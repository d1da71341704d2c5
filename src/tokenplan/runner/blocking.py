"""Running a command's coroutine from synchronous code, whether or not an event loop already runs
(the driver ``generate`` and ``bench`` share).

``asyncio.run`` refuses to start inside a running loop ("asyncio.run() cannot be called from a
running event loop"), which is where Jupyter and IPython run every cell. :func:`run_blocking`
runs the coroutine there in a worker thread with a loop of its own and waits for it, so
``generate()`` and ``bench()`` work the same in a script and in a notebook; the ``*_async``
variants are what to ``await`` when the caller wants its loop free meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
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
    # The worker's answer comes back through a SimpleQueue: its blocking get is one C-level lock
    # wait that a KeyboardInterrupt leaves intact. (threading.Event.wait can be interrupted while
    # it holds its condition's lock, and the worker's set() then waits forever; Thread.join, once
    # interrupted, returns at once when called again on CPython 3.11, before the thread has ended.)
    answers: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    state: dict[str, Any] = {"cancel": False}

    async def main() -> T:
        state["loop"], state["task"] = asyncio.get_running_loop(), asyncio.current_task()
        if state["cancel"]:  # interrupted before this task existed
            raise asyncio.CancelledError
        return await make()

    def work() -> None:
        try:
            answers.put((True, asyncio.run(main())))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, raised there
            answers.put((False, exc))

    worker = threading.Thread(target=work, name="tokenplan-run", daemon=True)
    try:  # the start inside the try: an interrupt just after it must still wait for the unwinding
        worker.start()
        ok, value = answers.get()
    except KeyboardInterrupt:
        if worker.ident is None:  # interrupted before the worker existed: nothing runs to unwind
            raise
        state["cancel"] = True
        loop, task = state.get("loop"), state.get("task")
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: it has finished
                loop.call_soon_threadsafe(task.cancel)
        answers.get()  # wait until it has unwound
        raise
    if not ok:
        raise value
    return value
