"""``tokenplan bench``'s result: what a sweep returns (:class:`BenchOutcome`) and the bench JSON it
writes (:func:`bench_json`), from what was asked (:class:`SweepAsked`, ``api.bench.BenchRequest``'s
fields) and what was measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tokenplan.bench.acceptance_sweep import sweep_acceptance
from tokenplan.bench.server_info import concurrency_cap, server_info_summary
from tokenplan.bench.workload import Workload
from tokenplan.client.auth import display_url
from tokenplan.results import BENCH_SCHEMA_VERSION


class SweepAsked(Protocol):
    """What the bench JSON states about the sweep that was asked for (``api.bench.BenchRequest``)."""

    @property
    def endpoints(self) -> tuple[str, ...]: ...
    @property
    def model(self) -> str: ...
    @property
    def num_gpus(self) -> int | None: ...
    @property
    def isl(self) -> int | None: ...
    @property
    def osl(self) -> int | None: ...
    @property
    def dataset(self) -> str | None: ...
    @property
    def stream(self) -> bool: ...
    @property
    def request_rates(self) -> tuple[float, ...] | None: ...
    @property
    def burstiness(self) -> float: ...


@dataclass(frozen=True)
class BenchOutcome:
    """What :func:`bench` measured: the bench JSON (``data``), why the sweep stopped early (None:
    every level ran) and the notes (also in ``data["notes"]``)."""

    data: dict[str, Any]
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The bench JSON object as ``bench --json`` prints it (like every api result's ``to_json``)."""
        return self.data


def bench_json(
    req: SweepAsked,
    levels: list[dict],
    info: dict | None,
    workload: Workload,
    ignore_eos: bool,
    notes: list[str],
    stopped: str | None,
) -> dict[str, Any]:
    """The bench JSON (see :func:`bench`), keys in the order ``--json`` prints them."""
    has_metrics = any(lv["server"] for lv in levels)
    return {
        "schema_version": BENCH_SCHEMA_VERSION,
        "model": req.model,
        "endpoints": [display_url(u) for u in req.endpoints],
        "num_gpus": req.num_gpus,
        "levels": levels,
        "server": {"metrics": has_metrics, "server_info": server_info_summary(info) if info else None},
        "cap": concurrency_cap(levels),
        "acceptance": sweep_acceptance(levels),
        "workload": {
            "method": workload.method,
            "isl_tokens": req.isl if req.dataset is None else None,
            "osl_tokens": req.osl,
            "dataset": req.dataset,
            "prompts": len(workload.prompts),
            "exact_fraction": workload.exact_fraction,
            "ignore_eos": ignore_eos,
            "stream": req.stream,
            "arrivals": "closed loop"
            if req.request_rates is None
            else f"open loop, gamma gaps, burstiness {req.burstiness:g}",
        },
        "notes": notes,
        "stopped": stopped,
    }


def token_count_notes(levels: list[dict]) -> list[str]:
    """Say how tokens were counted where it was not from ``usage`` (see :mod:`tokenplan.client.metrics`)."""
    methods = {lv.get("token_count_method") for lv in levels if lv.get("requests")}
    notes = []
    if any(m and "stream chunks" in m for m in methods):
        notes.append(
            "the server sent no usage in its streams: output tokens were counted from the streamed "
            "chunks (one token per chunk; an undercount with speculative decoding), input tokens "
            "are unknown"
        )
    if None in methods:
        notes.append(
            "the server sent no usage and the answers were not streamed: token throughput was not "
            "measured (shown as –); rerun with --stream"
        )
    return notes
