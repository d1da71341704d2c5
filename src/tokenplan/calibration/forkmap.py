"""``map`` over forked copies of this process: the finite-difference Jacobian's evaluations
split over the CPUs.

scipy evaluates a Jacobian's perturbed points as ``workers(fun, points)`` with any map-like
callable (:func:`scipy.optimize._numdiff.approx_derivative`). :class:`ForkMap` forks
``workers − 1`` children at each call; child ``w`` evaluates points ``w, w + n, …`` and this
process points ``0, n, …``. A forked child sees the fit's closures, cases and
:class:`~tokenplan.calibration.memo.PredictionMemo` as they are at the call, so nothing is set up
or pickled but its results, which come back through a pipe with the predictions it made (merged
into this process's memo). A child that fails is not trusted: its points are evaluated here.
Results are in the order of ``points`` and bit for bit those of ``map``.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Iterable
from typing import Any

from tokenplan.calibration.memo import PredictionMemo


class ForkMap:
    """A map-like callable over this process and ``workers − 1`` forked children (see the
    module docstring); plain ``map`` where ``os.fork`` is missing or ``workers`` ≤ 1."""

    def __init__(self, workers: int, memo: PredictionMemo | None = None):
        self.workers = workers
        self.memo = memo

    def __call__(self, fun: Callable[[Any], Any], points: Iterable[Any]) -> list[Any]:
        xs = list(points)
        n = min(self.workers, len(xs))
        if n <= 1 or not hasattr(os, "fork"):
            return [fun(x) for x in xs]
        sys.stdout.flush()
        sys.stderr.flush()
        children = [(w, *self._spawn(fun, xs[w::n])) for w in range(1, n)]
        results: list[Any] = [None] * len(xs)
        results[0::n] = [fun(x) for x in xs[0::n]]
        for w, pid, fd in children:
            with os.fdopen(fd, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            if status != 0 or not data:
                results[w::n] = [fun(x) for x in xs[w::n]]
                continue
            out, journal = pickle.loads(data)
            results[w::n] = out
            if self.memo is not None and journal:
                self.memo.merge(journal)
        return results

    def _spawn(self, fun: Callable[[Any], Any], xs: list[Any]) -> tuple[int, int]:
        """Fork a child that evaluates ``xs`` and writes (results, memo journal) to a pipe:
        (its pid, the pipe's read end)."""
        read, write = os.pipe()
        pid = os.fork()
        if pid:
            os.close(write)
            return pid, read
        code = 1
        try:  # the child: never returns into the caller's frames
            os.close(read)
            if self.memo is not None:
                self.memo.journal = []
            out = [fun(x) for x in xs]
            data = pickle.dumps(
                (out, self.memo.journal if self.memo is not None else None), protocol=pickle.HIGHEST_PROTOCOL
            )
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
            code = 0
        finally:
            os._exit(code)
