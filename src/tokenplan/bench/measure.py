"""A ``tokenplan bench`` sweep from what was asked to the bench JSON: the checks that need no
server (:func:`check_ask`), then the clients, the probe, the sweep and the result
(:func:`measure`). ``api.bench.BenchRequest`` is what is asked (:class:`BenchAsked`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from tokenplan.bench.acceptance_sweep import acceptance_notes
from tokenplan.bench.levels import LevelResult, level_dict
from tokenplan.bench.probe import WorkloadAsk, check_servers, probe_workload
from tokenplan.bench.result import BenchOutcome, SweepAsked, bench_result, short_answer_notes, token_count_notes
from tokenplan.bench.server_info import read_server_info
from tokenplan.bench.sweep import Sweep, SweepSettings
from tokenplan.bench.workload import dataset_workload
from tokenplan.client.auth import display_url
from tokenplan.client.openai import OpenAIClient
from tokenplan.errors import InputError

# Random prompts are generated word by word on this machine: 1 Mi tokens is beyond the longest
# context the catalog's models serve, and bounds the text a sweep generates.
MAX_LENGTH_TOKENS = 1_048_576

# Distinct random prompts generated per sweep at most; levels beyond reuse them round-robin
# (prompts stay distinct within any level of concurrency ≤ 512, so prefix caching cannot help).
MAX_DISTINCT_PROMPTS = 2048


class BenchAsked(SweepAsked, Protocol):
    """What a sweep is asked to measure (``api.bench.BenchRequest`` documents each field)."""

    @property
    def concurrencies(self) -> tuple[int, ...]: ...
    @property
    def num_prompts(self) -> int | None: ...
    @property
    def duration_s(self) -> float | None: ...
    @property
    def warmup_requests(self) -> int | None: ...
    @property
    def ignore_eos(self) -> bool: ...
    @property
    def deadline_s(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def metrics(self) -> bool: ...
    @property
    def api_key(self) -> str | None: ...


# A timed level shorter than this measures nothing a throughput can be read from: one decode step
# of a large batch takes 10–100 ms and the first token of a long prompt seconds.
MIN_DURATION_S = 1.0
# Gamma shape of the arrival gaps at most: coefficient of variation 1/sqrt(10^6) = 0.001, as even
# as arrivals get.
MAX_BURSTINESS = 1e6


# The slowest arrival rate a sweep takes: one request every 1,000 s, already a level of hours for
# the requests a level needs. 1e-300 slept 1e300 s between arrivals (a break-it pass: it hung).
MIN_REQUEST_RATE = 1e-3


def check_ask(req: BenchAsked, max_concurrency: int) -> None:
    """Refuse, in one line, a sweep that cannot run (``max_concurrency``: the most requests in
    flight a level may hold), before any server is contacted: a bad endpoint, level, rate,
    length, count or limit, or a dataset file that cannot be sent.

    Raises:
        InputError: naming the option, the value and what is allowed.
    """
    if not req.endpoints:
        raise InputError("endpoint", "", "at least one --endpoint URL")
    for url in req.endpoints:
        if not url.startswith(("http://", "https://")):
            raise InputError(
                "endpoint", display_url(url), "an http:// or https:// URL such as http://127.0.0.1:8000/v1"
            )
    if req.request_rates is not None:
        if not req.request_rates or any(not r >= MIN_REQUEST_RATE for r in req.request_rates):
            raise InputError(
                "request_rate",
                ",".join(map(str, req.request_rates)),
                f"rates ≥ {MIN_REQUEST_RATE:g} requests/s, or inf",
            )
        # finite and bounded: inf (or 1e308) made the gamma scale 0, a traceback after the probes
        if not 0 < req.burstiness <= MAX_BURSTINESS:
            raise InputError(
                "burstiness", req.burstiness, f"a number > 0 and ≤ {MAX_BURSTINESS:g} (1 = Poisson arrivals)"
            )
        if len(req.concurrencies) > 1:
            raise InputError(
                "max_concurrency",
                ",".join(map(str, req.concurrencies)),
                "one value with --request-rate (the most requests in flight)",
            )
    elif not req.concurrencies or any(not 1 <= c <= max_concurrency for c in req.concurrencies):
        raise InputError(
            "concurrency",
            ",".join(map(str, req.concurrencies)),
            f"integers from 1 to {max_concurrency:,}, e.g. 1,4,16,64",
        )
    if req.dataset is None:
        for name, tokens in (("isl", req.isl), ("osl", req.osl)):
            if not tokens or tokens < 1:  # named as typed (--isl 0), not as the pair
                raise InputError(name, tokens, "a token count ≥ 1 (or --dataset FILE)")
    for name, tokens in (("isl", req.isl), ("osl", req.osl)):
        if tokens is not None and tokens > MAX_LENGTH_TOKENS:
            raise InputError(name, tokens, f"at most {MAX_LENGTH_TOKENS:,} tokens (longer than any served context)")
    if req.dataset is not None:  # a bad file is refused before any server is contacted
        dataset_workload(req.dataset, req.osl, MAX_DISTINCT_PROMPTS)
    if req.num_prompts is not None and req.num_prompts < 1:
        raise InputError("num_prompts", req.num_prompts, "an integer ≥ 1")
    if req.duration_s is not None and not (math.isfinite(req.duration_s) and req.duration_s >= MIN_DURATION_S):
        raise InputError("duration", req.duration_s, f"a finite number of seconds ≥ {MIN_DURATION_S:g}")
    if req.num_prompts is not None and req.duration_s is not None:
        raise InputError("num_prompts", req.num_prompts, "either --num-prompts or --duration, not both")
    if req.num_gpus is not None and req.num_gpus < 1:
        raise InputError("num_gpus", req.num_gpus, "an integer ≥ 1")
    if req.warmup_requests is not None and req.warmup_requests < 0:
        raise InputError("warmup", req.warmup_requests, "an integer ≥ 0 (warm-up requests per level)")
    if not 0 < req.deadline_s < math.inf:
        raise InputError("request_timeout", req.deadline_s, "a finite number of seconds > 0")


async def measure(req: BenchAsked, on_level: Callable[[dict], None] | None = None) -> BenchOutcome:
    """Measure the servers at each level of ``req`` (checked by :func:`check_ask`, its key
    resolved): check that every endpoint serves the model, probe the prompts, read what the server
    says about itself, run the sweep (``on_level`` gets each level's dict as it ends) and build the
    bench JSON with its notes. The clients are closed however the sweep ends.

    Raises:
        ServerError: an endpoint is unreachable or does not serve the model before the sweep.
    """
    most = max(req.concurrencies) if req.concurrencies else (req.num_prompts or 1024)
    per_endpoint = -(-most // len(req.endpoints))
    clients = [OpenAIClient(u, max_connections=per_endpoint, api_key=req.api_key) for u in req.endpoints]
    notes: list[str] = []
    try:
        await check_servers(clients, req.model)
        n_prompts = max(req.num_prompts or 0, 4 * most, 16)
        ask = WorkloadAsk(
            req.model,
            req.isl,
            req.osl,
            req.dataset,
            min(n_prompts, MAX_DISTINCT_PROMPTS),
            req.seed,
            req.ignore_eos,
            req.api_key,
        )
        workload, ignore_eos = await probe_workload(ask, clients[0], req.endpoints[0], notes)
        info = await read_server_info(req.endpoints[0], api_key=req.api_key) if req.metrics else None
        settings = SweepSettings(
            tuple(req.concurrencies),
            req.num_prompts,
            req.duration_s,
            req.warmup_requests,
            req.deadline_s,
            req.stream,
            ignore_eos,
            request_rates=req.request_rates,
            burstiness=req.burstiness,
            max_concurrency=req.concurrencies[0] if req.concurrencies else None,
            seed=req.seed,
            return_meta_info=info is not None,
        )  # only SGLang serves /get_server_info
        sweep = Sweep(clients, req.endpoints, req.model, workload, settings, metrics=req.metrics, api_key=req.api_key)

        def report(level: LevelResult) -> None:
            if on_level is not None:
                on_level(level_dict(level))

        result = await sweep.run(report)
    finally:
        for client in clients:
            await client.aclose()
    levels = [level_dict(lv) for lv in result.levels]
    notes += token_count_notes(levels) + acceptance_notes(levels)
    notes += short_answer_notes(levels, req.osl if req.dataset is None else None, ignore_eos)
    data = bench_result(req, levels, info, workload, ignore_eos, notes, result.stopped).to_json()
    return BenchOutcome(data, result.stopped, notes)
