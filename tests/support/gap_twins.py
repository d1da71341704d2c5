"""The gap-analysis rows of our copy of ``serving-dev.csv`` that are copies of an InferenceX run
in the same file: aiconfigurator's ``*-gap-analysis.csv`` files print TTFT and TPOT to 0.01 ms,
and 58 of their 682 rows equal a pinned run's point (model, GPU, precision, ISL/OSL, concurrency,
TP/PP/attention-DP/MoE-TP/MoE-EP) and both latencies at that rounding. Those rows carry their
twin's run columns (data/ground-truth/README.md, "Gap-analysis rows that copy an InferenceX run");
the rest stay blank."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

SERVING = Path(__file__).parents[2] / "data" / "ground-truth" / "serving-dev.csv"
# the columns a gap-analysis row takes from its twin: what the run's script and benchmark set
RUN_COLUMNS = (
    "scheduler_recv_interval",
    "spec_decode",
    "max_running",
    "launch_layout",
    "num_requests",
    "length_distribution",
    "memory_fraction",
    "chunked_prefill_size",
    "disable_radix_cache",
    "ssm_dtype",
)
POINT = ("model", "gpu", "precision", "isl", "osl", "concurrency", "tp", "pp")
POINT += ("attention_dp_size", "moe_tp_size", "moe_ep_size")


def is_gap(row: dict[str, str]) -> bool:
    """A row of aiconfigurator's gap-analysis files (``source_file=…-gap-analysis.csv``)."""
    return "gap-analysis" in row["source"]


def _key(row: dict[str, str]) -> tuple[str, ...]:
    # the gap-analysis files' rounding: two decimals of a millisecond
    return (*(row[k] for k in POINT), f"{float(row['ttft_ms']):.2f}", f"{float(row['tpot_ms']):.2f}")


def serving_rows() -> list[dict[str, str]]:
    with SERVING.open(newline="") as fh:
        return list(csv.DictReader(fh))


def twins(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    """Gap-analysis row id → the rows outside the gap-analysis files it copies (none: absent)."""
    pinned: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if not is_gap(r):
            pinned[_key(r)].append(r)
    return {r["id"]: pinned[_key(r)] for r in rows if is_gap(r) and _key(r) in pinned}
