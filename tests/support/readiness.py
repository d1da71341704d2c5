"""Readiness waits for tests that signal a running ``tokenplan generate``: instead of a fixed
sleep (which lands before the process installed its handlers on a loaded machine), wait until
the run has stored records — the runner stores only inside its dispatch loop, after its SIGINT /
SIGTERM handlers are installed."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.02


def stored_lines(run_dir: Path) -> int:
    """Complete lines in the run's shards (a torn last line is not counted)."""
    return sum(p.read_bytes().count(b"\n") for p in (run_dir / "shards").glob("part-*.jsonl"))


def wait_for_stored(run_dir: Path, more_than: int, proc: subprocess.Popen, timeout_s: float = 120.0) -> int:
    """Block until the run holds more than ``more_than`` stored lines; return how many.

    Raises:
        AssertionError: the process exited first, or ``timeout_s`` passed (a hung runner).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        n = stored_lines(run_dir) if (run_dir / "shards").is_dir() else 0
        if n > more_than:
            return n
        if proc.poll() is not None:
            raise AssertionError(f"the runner exited ({proc.returncode}) before storing more than {more_than} lines")
        if time.monotonic() > deadline:
            raise AssertionError(f"no stored line beyond {more_than} within {timeout_s:.0f} s")
        time.sleep(POLL_S)


def wait_for_file(path: Path, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    """Block until ``path`` exists (a checkpoint the runner writes while it sends).

    Raises:
        AssertionError: the process exited first, or ``timeout_s`` passed.
    """
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the runner exited ({proc.returncode}) before {path.name} appeared")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear within {timeout_s:.0f} s")
        time.sleep(POLL_S)


def wait_for_logged(log: Path, sent: Callable[[str], bool], proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    """Block until the fault server's request log (``log_bodies``) shows the request ``sent``
    looks for (a predicate on the log's text): the request is out and the runner is in its loop.

    Raises:
        AssertionError: the process exited first (its stderr in the message), or ``timeout_s`` passed.
    """
    deadline = time.monotonic() + timeout_s
    while not (log.exists() and sent(log.read_text())):
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the runner exited ({proc.returncode}) before the request was logged: {err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no such request in {log.name} within {timeout_s:.0f} s")
        time.sleep(POLL_S)


def interrupt_when_logged(
    command: list[str], log: Path, sent: Callable[[str], bool], timeout_s: float = 90.0
) -> tuple[int, str, float]:
    """Start ``command``, send it SIGINT once the fault server's request log shows the request
    ``sent`` looks for (:func:`wait_for_logged`), and wait for it to exit.

    Returns:
        (exit status, stderr, seconds from the SIGINT to the exit).
    """
    import signal

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_logged(log, sent, proc)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, err, time.monotonic() - started
