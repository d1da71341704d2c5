"""``tokenplan bench``'s result: what a sweep returns (:class:`BenchOutcome`) and the bench JSON it
writes (:func:`bench_result`, then ``to_json()``), from what was asked (:class:`SweepAsked`,
``api.bench.BenchRequest``'s fields) and what was measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tokenplan.bench.acceptance_sweep import sweep_acceptance
from tokenplan.bench.server_info import concurrency_cap, server_info_summary
from tokenplan.bench.workload import Workload
from tokenplan.bench_schema import (
    BenchCap,
    BenchLevel,
    BenchResult,
    BenchServer,
    BenchWorkload,
    SweepAcceptance,
)
from tokenplan.client.auth import display_url
from tokenplan.results import Reading


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

    @property
    def result(self) -> BenchResult:
        """``data`` read back into :class:`~tokenplan.bench_schema.BenchResult` (what ``report/`` draws)."""
        return BenchResult.from_json(self.data, "bench JSON")


def bench_result(
    req: SweepAsked,
    levels: list[dict],
    info: dict | None,
    workload: Workload,
    ignore_eos: bool,
    notes: list[str],
    stopped: str | None,
) -> BenchResult:
    """The sweep as :class:`~tokenplan.bench_schema.BenchResult`, from what was asked and the
    levels' dicts (:func:`~tokenplan.bench.levels.level_dict`). Raises ConfigError (a level figure
    outside its field's type: a defect here, never a user's input)."""
    has_metrics = any(lv["server"] for lv in levels)
    return BenchResult(
        model=req.model,
        endpoints=tuple(display_url(u) for u in req.endpoints),
        num_gpus=req.num_gpus,
        levels=tuple(BenchLevel.read(lv, Reading("bench level").at(i)) for i, lv in enumerate(levels)),
        server=BenchServer(metrics=has_metrics, server_info=server_info_summary(info) if info else None),
        cap=BenchCap(**concurrency_cap(levels)),
        acceptance=_sweep_acceptance(levels),
        workload=BenchWorkload(
            method=workload.method,
            isl_tokens=req.isl if req.dataset is None else None,
            osl_tokens=req.osl,
            dataset=req.dataset,
            prompts=len(workload.prompts),
            exact_fraction=workload.exact_fraction,
            ignore_eos=ignore_eos,
            stream=req.stream,
            arrivals="closed loop"
            if req.request_rates is None
            else f"open loop, gamma gaps, burstiness {req.burstiness:g}",
        ),
        notes=tuple(notes),
        stopped=stopped,
    )


def _sweep_acceptance(levels: list[dict]) -> SweepAcceptance | None:
    pooled = sweep_acceptance(levels)
    return None if pooled is None else SweepAcceptance.from_json(pooled, "sweep acceptance")


SHORT_ANSWERS = 0.95  # answers averaging under this share of --osl are said to be short


def short_answer_notes(levels: list[dict], osl: int | None, ignore_eos: bool) -> list[str]:
    """Say where answers came back shorter than ``osl`` although ``ignore_eos`` was sent: the
    server stopped them early (it does not honour ``ignore_eos``, or a context limit cut them), so
    each level's tok/s is for shorter answers than asked. None said for a dataset's own lengths
    (``osl`` None) or without ``ignore_eos`` (the model's own lengths are expected to vary)."""
    if osl is None or not ignore_eos:
        return []
    short = [
        f"{lv['mean_output_tokens']:,.1f} at concurrency {lv['concurrency']}"
        for lv in levels
        if lv.get("requests")
        and lv.get("mean_output_tokens") is not None
        and lv["mean_output_tokens"] < SHORT_ANSWERS * osl
    ]
    if not short:
        return []
    return [
        f"answers averaged fewer output tokens than --osl {osl:,} asked ({'; '.join(short)}) although "
        "ignore_eos was sent: the server stops them early (it does not honour ignore_eos, or a context "
        "limit cuts them), so those levels measure shorter answers than asked"
    ]


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
