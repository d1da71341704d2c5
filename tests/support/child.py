"""A test server in a child process: start it, learn its port, stop it with a grace period.

Every test server here (the fault injector, the simulated engine, ``transformers serve``,
vLLM) is a :class:`ChildProcess`: ``stop()`` sends SIGTERM, waits ``grace_s`` seconds, then
SIGKILLs; it is a context manager that stops on exit. The two servers written for the tests
write the port they bound to a file, which :func:`spawn_with_port_file` waits for.
"""

from __future__ import annotations

import os
import subprocess
import time


class ChildProcess:
    """Lifecycle shared by the test servers. Subclasses set ``proc`` and may set ``grace_s``
    (seconds SIGTERM is given before SIGKILL) and override :meth:`after_stop`."""

    proc: subprocess.Popen[bytes] | None = None
    grace_s: float = 5.0

    def kill(self) -> None:
        """SIGKILL the child, if it runs, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM, ``grace_s`` seconds to exit, then SIGKILL; then :meth:`after_stop`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.after_stop()

    def after_stop(self) -> None:
        """Release what the child used (log files); nothing by default."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn_with_port_file(
    args: list[str], port_file: str, name: str, timeout_s: float = 15.0
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``args`` (a server that writes its bound port to ``port_file``) and wait for the file.

    Returns:
        (the process, the port).

    Raises:
        RuntimeError: the child exited, or wrote no port within ``timeout_s`` seconds.
    """
    if os.path.exists(port_file):
        os.unlink(port_file)
    proc = subprocess.Popen(args)
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise RuntimeError(f"{name} did not start (exit {proc.returncode})")
        time.sleep(0.02)
    with open(port_file) as fh:
        return proc, int(fh.read())
