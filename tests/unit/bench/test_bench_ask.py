"""What ``bench`` refuses before it opens a connection: a timed level that cannot end or cannot
measure (``--duration`` NaN, inf, or below one second)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenplan.api.bench import BenchRequest, bench
from tokenplan.errors import InputError

# Port 9 (discard) on localhost: nothing is contacted, the ask is refused first.
ASK = BenchRequest(("http://127.0.0.1:9/v1",), "m", (1,), 16, 4)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, 1e-9, 0.5, 0.0, -3.0])
def test_a_duration_that_cannot_end_or_measure_is_refused(seconds):
    with pytest.raises(InputError, match=r"duration.*a finite number of seconds ≥ 1"):
        bench(replace(ASK, duration_s=seconds))
