"""tokenplan.runner.blocking.run_blocking: a coroutine run from synchronous code, with or without a
running event loop (Jupyter runs every cell inside one)."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from tokenplan.runner.blocking import loop_running, run_blocking


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


async def _fail() -> None:
    raise ValueError("bad option")


def test_without_a_loop_it_is_asyncio_run() -> None:
    assert not loop_running()
    assert run_blocking(_answer) == 42


def test_inside_a_running_loop_it_runs_in_a_worker_thread() -> None:
    threads: list[str] = []

    async def where() -> int:
        threads.append(threading.current_thread().name)
        return await _answer()

    async def cell() -> int:
        assert loop_running()
        return run_blocking(where)

    assert asyncio.run(cell()) == 42
    assert threads == ["tokenplan-run"]


def test_the_coroutines_error_is_raised_unchanged_inside_a_loop() -> None:
    async def cell() -> None:
        run_blocking(_fail)

    with pytest.raises(ValueError, match="bad option"):
        asyncio.run(cell())


def test_an_interrupt_while_waiting_cancels_the_run_and_waits_for_it_to_unwind() -> None:
    started, unwound = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()  # the run's finally blocks (closing the run directory) ran

    def interrupt_when_started() -> None:
        started.wait()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # as a kernel interrupt does

    async def cell() -> None:
        run_blocking(forever)

    # A loop started as IPython's is (run_until_complete: SIGINT keeps Python's default handler,
    # which raises KeyboardInterrupt in the main thread; asyncio.run would install its own).
    loop = asyncio.new_event_loop()
    threading.Thread(target=interrupt_when_started, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        loop.close()
    assert unwound.is_set()
