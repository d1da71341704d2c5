"""The Ray driver's stop signals: the first SIGINT/SIGTERM asks the run to stop (every unit in
flight is settled, a rerun resumes), a second one stops at once."""

from __future__ import annotations

import signal
import threading
from typing import Any


class StopOnSignals:
    """SIGINT/SIGTERM → ``stop``; a second one raises KeyboardInterrupt (main thread only); the
    previous handlers come back on exit."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.active = threading.current_thread() is threading.main_thread()
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        if self.active:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, *_: object) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt  # the second signal: stop at once (the actors end with the driver)
        self.stop.set()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
