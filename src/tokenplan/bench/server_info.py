"""What a server says about itself: Prometheus ``/metrics`` (vLLM and SGLang; TensorRT-LLM's
``trtllm-serve`` serves it on ``/prometheus/metrics``, its ``/metrics`` being JSON iteration
stats), SGLang's ``/get_server_info``, and the concurrency cap a sweep reveals. Speculative
acceptance in the same text is read by :mod:`tokenplan.bench.acceptance`.

Metric names differ by engine and version; each quantity has a list of spellings, the first one
present wins. The text is parsed with ``prometheus_client``'s parser. One server may report a name
under several label sets — a vLLM server started with ``--data-parallel-size 8`` labels its gauges
``engine="0"`` … ``engine="7"`` — so values are aggregated by what they are: counts of requests and
counters (tokens, preemptions) are **summed** over label sets, fractions (KV-cache usage) take the
**max** (the fullest engine is the one that preempts; the mean is kept beside it as
``kv_usage_mean``), since summing eight engines at 0.9 would read 7.2.

=====================  ==========================================  ===============================
quantity               vLLM                                        SGLang
=====================  ==========================================  ===============================
running requests       ``vllm:num_requests_running``               ``sglang:num_running_reqs``
waiting requests       ``vllm:num_requests_waiting``               ``sglang:num_queue_reqs``
KV-cache usage (0–1)   ``vllm:kv_cache_usage_perc`` (older:        ``sglang:token_usage``
                       ``vllm:gpu_cache_usage_perc``)
preemptions            ``vllm:num_preemptions_total``              ``sglang:num_retracted_reqs``
generated tokens       ``vllm:generation_tokens_total``            ``sglang:generation_tokens_total``
prompt tokens          ``vllm:prompt_tokens_total``                ``sglang:prompt_tokens_total``
=====================  ==========================================  ===============================

TensorRT-LLM (``tensorrt_llm/metrics/collector.py``, NVIDIA/TensorRT-LLM@050f80d):
``trtllm_num_requests_running``, ``trtllm_num_requests_waiting``, ``trtllm_kv_cache_utilization``
(0–1), ``trtllm_generation_tokens_total``, ``trtllm_prompt_tokens_total``; no preemption count.

(vLLM's ``kv_cache_usage_perc`` is a fraction despite its name: 1.0 = full.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tokenplan.bench.acceptance import AcceptanceReading, AcceptanceWindow, acceptance_reading
from tokenplan.bench.http import SideRequestFailed, get_text, request_json, server_root
from tokenplan.bench.prometheus import labelled_samples

METRIC_NAMES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "trtllm_num_requests_running"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "trtllm_num_requests_waiting"),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "trtllm_kv_cache_utilization",
    ),
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_reqs"),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "trtllm_generation_tokens_total",
    ),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "trtllm_prompt_tokens_total"),
}
# Fractions (0–1): aggregated over label sets by max, never summed.
FRACTION_METRICS = frozenset(
    ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "trtllm_kv_cache_utilization")
)
# Where the Prometheus text is: vLLM and SGLang serve /metrics; trtllm-serve /prometheus/metrics
# (tensorrt_llm/serve/openai_server.py mounts the prometheus_client app there).
METRICS_ROUTES = ("/metrics", "/prometheus/metrics")


def prometheus_samples(text: str) -> dict[str, list[float]]:
    """Prometheus text exposition → sample name → its values, one per label set
    (:func:`labelled_samples` without the labels)."""
    return {name: [value for _, value in samples] for name, samples in labelled_samples(text).items()}


def aggregate(name: str, values: Sequence[float]) -> float:
    """One value for ``name`` over its label sets: max for a fraction, else the sum."""
    return max(values) if name in FRACTION_METRICS else sum(values)


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text → metric name → one value over its label sets (:func:`aggregate`), plus
    ``NAME:mean`` for each fraction (the mean over engines)."""
    out: dict[str, float] = {}
    for name, values in prometheus_samples(text).items():
        out[name] = aggregate(name, values)
        if name in FRACTION_METRICS:
            out[name + ":mean"] = sum(values) / len(values)
    return out


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    """One reading of ``/metrics``: ``time_s`` (``time.time()``, seconds) and the quantities of
    the module table (requests, fraction, counts, tokens); ``None`` where the server has no such metric."""

    time_s: float
    running: float | None
    waiting: float | None
    kv_usage: float | None
    preemptions: float | None
    generation_tokens: float | None
    prompt_tokens: float | None
    kv_usage_mean: float | None = None  # mean over engines (data-parallel servers); kv_usage is the max
    acceptance: AcceptanceReading | None = None  # speculative-decoding counters, where exposed


def snapshot_from_metrics(metrics: dict[str, float], time_s: float) -> ServerSnapshot:
    """Pick each quantity's first spelling present in ``metrics`` (from :func:`parse_prometheus`)."""
    values: dict[str, Any] = {}
    for quantity, names in METRIC_NAMES.items():
        values[quantity] = next((metrics[n] for n in names if n in metrics), None)
    kv_name = next((n for n in METRIC_NAMES["kv_usage"] if n in metrics), None)
    kv_mean = metrics.get(kv_name + ":mean", metrics.get(kv_name)) if kv_name else None
    return ServerSnapshot(time_s, **values, kv_usage_mean=kv_mean)


_ROUTE_FOUND: dict[str, str] = {}  # server root → the route of METRICS_ROUTES that answered


async def read_snapshot(base_url: str, *, timeout_s: float = 5.0, api_key: str | None = None) -> ServerSnapshot | None:
    """``GET {root}/metrics`` (with ``api_key`` as a bearer token), else ``{root}/prometheus/metrics``
    (TensorRT-LLM) → a snapshot, or ``None`` when the server exposes no metrics on either. The
    route that answered is kept per server, so later readings ask it alone."""
    root = server_root(base_url)
    routes = (_ROUTE_FOUND[root],) if root in _ROUTE_FOUND else METRICS_ROUTES
    for route in routes:
        try:
            text = await get_text(root + route, timeout_s=timeout_s, api_key=api_key)
        except SideRequestFailed:
            continue
        if text.lstrip().startswith(("[", "{")):  # JSON (trtllm-serve's /metrics): not Prometheus text
            continue
        snap = snapshot_from_metrics(parse_prometheus(text), time.time())
        snap = replace(snap, acceptance=acceptance_reading(text))
        if any(v is not None for v in (snap.running, snap.generation_tokens, snap.acceptance)):
            _ROUTE_FOUND[root] = route
            return snap
    return None


async def read_server_info(base_url: str, *, timeout_s: float = 5.0, api_key: str | None = None) -> dict | None:
    """SGLang's ``/get_server_info`` (older: ``/server_info``) as a dict, or ``None``; ``api_key``
    is sent as a bearer token."""
    root = server_root(base_url)
    for path in ("/get_server_info", "/server_info"):
        try:
            info = await request_json(root + path, timeout_s=timeout_s, api_key=api_key)
        except SideRequestFailed:
            continue
        if isinstance(info, dict):
            return info
    return None


SERVER_INFO_KEYS = (
    "max_running_requests",
    "max_total_num_tokens",
    "chunked_prefill_size",
    "context_length",
    "mem_fraction_static",
    "tp_size",
    "dp_size",
    "page_size",
    "schedule_policy",
    "version",
)


def server_info_summary(info: dict) -> dict:
    """The fields of ``/get_server_info`` that bound concurrency (top level, or under
    ``internal_states[0]`` where recent SGLang puts the live ones)."""
    out = {k: info[k] for k in SERVER_INFO_KEYS if k in info}
    states = info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        out.update({k: states[0][k] for k in SERVER_INFO_KEYS if k in states[0]})
    return out


@dataclass(slots=True)
class WindowStats:
    """What the server reported over one level's window.

    Attributes:
        start, end: snapshots at the window's edges (None without metrics).
        samples: snapshots taken while the level ran.
    """

    start: ServerSnapshot | None
    end: ServerSnapshot | None = None
    samples: list[ServerSnapshot] = field(default_factory=list)

    def acceptance(self) -> AcceptanceWindow | None:
        """The speculative acceptance over the window (counters between the edges, the τ gauge's
        readings during it), or None where the server reports none."""
        return AcceptanceWindow.between(
            self.start.acceptance if self.start is not None else None,
            self.end.acceptance if self.end is not None else None,
            (s.acceptance for s in self.samples),
        )

    def _series(self, name: str) -> list[float]:
        return [v for s in self.samples if (v := getattr(s, name)) is not None]

    def to_dict(self) -> dict:
        """JSON form: ``output_tok_s`` (Δ generated tokens / Δ time between the edge snapshots,
        tokens/s), ``generation_tokens``, ``running_mean``/``running_max``, ``waiting_mean``/
        ``waiting_max`` (requests), ``kv_usage_max`` (fraction), ``preemptions`` (count in the
        window), ``samples`` and ``queued_samples`` (the snapshots after the first in which a
        request waited: :func:`concurrency_cap`'s evidence of a queue); None where the server
        does not report it."""
        out: dict = {"samples": len(self.samples)}
        # the first snapshot is read as the level's requests arrive, when any server has some
        # waiting for its next step: only the later ones can show a queue that stays
        waits = [s.waiting for s in self.samples[1:] if s.waiting is not None]
        out["queued_samples"] = sum(w > QUEUE_REQUESTS for w in waits) if waits else None
        a, b = self.start, self.end
        tokens = None
        if a and b and a.generation_tokens is not None and b.generation_tokens is not None:
            tokens = b.generation_tokens - a.generation_tokens
        out["generation_tokens"] = tokens
        out["output_tok_s"] = (
            tokens / (b.time_s - a.time_s) if tokens is not None and a and b and b.time_s > a.time_s else None
        )
        out["preemptions"] = (
            b.preemptions - a.preemptions
            if a and b and a.preemptions is not None and b.preemptions is not None
            else None
        )
        for name in ("running", "waiting"):
            s = self._series(name)
            out[f"{name}_mean"] = sum(s) / len(s) if s else None
            out[f"{name}_max"] = max(s) if s else None
        kv = self._series("kv_usage")
        out["kv_usage_max"] = max(kv) if kv else None
        return out


async def poll_window(
    base_url: str, stats: WindowStats, stop: asyncio.Event, interval_s: float, api_key: str | None = None
) -> None:
    """Append a snapshot to ``stats.samples`` every ``interval_s`` seconds until ``stop`` is set."""
    while not stop.is_set():
        snap = await read_snapshot(base_url, api_key=api_key)
        if snap is not None:
            stats.samples.append(snap)
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
        except TimeoutError:
            pass


FLAT_GAIN = 0.10  # a level whose throughput gains less than this over the previous one is flat
QUEUE_REQUESTS = 0.5  # mean waiting requests above which the queue counts as growing
# A level whose server ran at most this share fewer than its requests at once was not capped:
# on a loaded machine the client resubmits a finished request a step or two late, so a server
# at exactly its cap runs 31 of 32 while the next arrival waits (seen in the bench simulation
# test under load). A real cap leaves a whole level's surplus waiting (32 of 64). The same
# share bounds the queue: a capped level holds its surplus waiting, so a level whose mean waiting
# is under ADMISSION_SLACK of its requests shows admission lag, not a queue (a starved 2-core CI
# machine sampled 28 running and one waiting at 32 in flight on a server capped at 32).
ADMISSION_SLACK = 0.10
# Snapshots after a level's first in which requests waited (``queued_samples``) before its
# queue counts as a cap; see concurrency_cap.
QUEUE_SAMPLES = 2


def concurrency_cap(levels: Sequence[dict]) -> dict:
    """The server's real concurrency cap from a sweep's levels.

    Each level is a bench level dict (``concurrency``, ``output_tok_s``, and ``server`` with
    ``running_max``/``waiting_mean`` where the server reports them). The cap is where throughput
    flattens — the first level that no later level beats by ``FLAT_GAIN`` or more (a sweep of 29,
    36, 39 and 77 tok/s at 1, 4, 16 and 64 in flight does not flatten at 4, where 39 is only 8 %
    over 36) — and, where the server reports its queue, the most requests it ran at a level whose
    queue grew (mean waiting above both ``QUEUE_REQUESTS`` and ``ADMISSION_SLACK`` of the level's
    requests, while at no level of the sweep did it run more than ``1 − ADMISSION_SLACK`` of them
    at once): that is the batch it will not exceed.

    A queue must also stay: requests waiting in at least :data:`QUEUE_SAMPLES` (2) of the level's
    ``/metrics`` snapshots after its first (``server.queued_samples``). Snapshots come every
    ``metrics_interval_s`` (0.5 s by default) from the level's start, and the first is read as
    the level's requests arrive, when any server has some waiting for its next step (a server
    capped at 16 showed 1 running and 2 waiting at 4 in flight in a level of 0.11 s, its only
    snapshot, and the cap line said "server runs at most 1", which ``--fit`` then used). Two
    later snapshots with a queue mean it lasted at least one interval (0.5 s, hundreds of decode
    steps), so a level must run for at least two intervals (1 s) to show a cap from metrics;
    a shorter one says nothing about the queue, and the cap comes from throughput alone.

    Returns ``{"flattens_at_concurrency", "saturated_output_tok_s", "queue_grows_at_concurrency",
    "max_running_requests", "source"}``; values are None where the sweep does not show them.
    """
    ordered = sorted(
        (lv for lv in levels if lv.get("requests") and lv.get("output_tok_s") is not None),
        key=lambda lv: lv["concurrency"],
    )
    # Throughput flattens along concurrency: an open-loop level (a finite request rate) holds what
    # its arrivals bring, and its "concurrency" is only the requests it sent, so it is left out.
    closed = [lv for lv in ordered if str(lv.get("request_rate", "inf")).lower() == "inf"]
    flat_at = saturated = None
    for i, prev in enumerate(closed[:-1]):
        best_later = max(lv["output_tok_s"] for lv in closed[i + 1 :])
        if best_later < prev["output_tok_s"] * (1.0 + FLAT_GAIN):
            flat_at, saturated = prev["concurrency"], max(prev["output_tok_s"], best_later)
            break
    queue_at = max_running = None
    # The most the server ran at once anywhere in the sweep: a level it could have run whole
    # (its requests within ADMISSION_SLACK of that) was not capped, even where a starved client
    # kept it below (CI sampled at most 28 running and 4 waiting at 32 in flight, then 32 running
    # at 64, on a server capped at 32).
    ran = [s["running_max"] for lv in ordered if (s := lv.get("server") or {}).get("running_max") is not None]
    sweep_running_max = max(ran, default=None)
    for lv in ordered:
        server = lv.get("server") or {}
        # A server that ran every request in flight at once has no cap below that: its waiting
        # requests were only arrivals between two steps (admission latency), not a queue.
        if (
            (server.get("waiting_mean") or 0.0) > max(QUEUE_REQUESTS, ADMISSION_SLACK * lv["concurrency"])
            and server.get("running_max") is not None
            and sweep_running_max is not None
            and sweep_running_max < (1.0 - ADMISSION_SLACK) * lv["concurrency"]
            and (server.get("queued_samples") or 0) >= QUEUE_SAMPLES
        ):
            queue_at = lv["concurrency"] if queue_at is None else queue_at
            max_running = max(max_running or 0.0, server["running_max"])
    source = "metrics" if max_running is not None else ("throughput" if flat_at is not None else None)
    return {
        "flattens_at_concurrency": flat_at,
        "saturated_output_tok_s": saturated,
        "queue_grows_at_concurrency": queue_at,
        "max_running_requests": None if max_running is None else int(max_running),
        "source": source,
    }
