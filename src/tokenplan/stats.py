"""Order statistics shared by the fit (``calibration``) and the client's latency metrics.

Percentiles interpolate linearly between order statistics: Hyndman & Fan (1996), "Sample
quantiles in statistical packages", definition 7 — numpy's and R's default. The ``q``-th
percentile of ``n`` sorted values sits at position ``(n − 1)·q/100`` (0-based).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile_of_sorted(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of ``ordered`` (sorted ascending, not empty).

    Raises:
        IndexError: ``ordered`` is empty.
    """
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of ``values`` in any order; NaN for no values."""
    ordered = sorted(values)
    return percentile_of_sorted(ordered, q) if ordered else math.nan
