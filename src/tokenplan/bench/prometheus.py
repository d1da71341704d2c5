"""The Prometheus text exposition a server's ``/metrics`` route returns, parsed once for every reader
(the server snapshot, :mod:`tokenplan.bench.server_info`; the acceptance counters,
:mod:`tokenplan.bench.acceptance`)."""

from __future__ import annotations

import math


def labelled_samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text exposition → sample name → (labels, value), one per label set.

    Parsed with ``prometheus_client.parser.text_string_to_metric_families``; a text the parser
    refuses as a whole is parsed line by line and the lines it refuses are skipped. ``NaN``
    samples and ``*_created`` timestamps are left out.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict[str, str], float]]] = {}

    def add(chunk: str) -> None:
        for family in text_string_to_metric_families(chunk):
            for sample in family.samples:
                if sample.name.endswith("_created") or math.isnan(sample.value):
                    continue
                out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))

    try:
        add(text)
    except ValueError:
        out.clear()
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                try:
                    add(line + "\n")
                except ValueError:
                    continue
    return out
