"""One ``generate`` per run directory: an exclusive ``flock(2)`` on ``RUN_DIR/.lock``.

The lock file holds the owner's pid, so a refused process can say who holds it. The kernel
releases the lock when the owner's descriptor closes, however the process ends (``kill -9``
included), so a stale lock file never blocks a resume.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from tokenplan.errors import RunDirError


class RunLock:
    """An exclusive ``flock`` on ``RUN_DIR/.lock`` holding the owner's pid."""

    def __init__(self, fd: int):
        self._fd: int | None = fd

    @classmethod
    def take(cls, path: Path) -> RunLock:
        """Lock ``path`` for this process.

        Raises:
            RunDirError: another process holds the lock (its pid is named).
        """
        lock_path = path / ".lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as problem:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if problem.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RunDirError(f"{lock_path}: cannot lock the run directory ({problem.strerror})") from None
            raise RunDirError(
                f"{path} is in use by another tokenplan generate (pid {holder}); wait for it "
                "to finish, stop it, or use another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor releases the flock
            self._fd = None
