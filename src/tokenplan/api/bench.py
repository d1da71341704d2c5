"""The bench API: measure a live server (``tokenplan bench``), fit the planner to the measurement
(``--fit``), and fit it to a finished generate run (``tokenplan calibrate --from-run``).

Request in, typed result out (:class:`~tokenplan.bench.result.BenchOutcome`,
:class:`~tokenplan.calibration.run_profile.FitOutcome`, each with ``to_json()``). The work lives on
the floors below: probing the servers and choosing the prompts in :mod:`tokenplan.bench.probe`, the
sweep in :mod:`tokenplan.bench.sweep`, the bench JSON in :mod:`tokenplan.bench.result`, a run
directory's figures in :mod:`tokenplan.runner.store.summary`, the fits in
:mod:`tokenplan.calibration.bench_fit`. Here the names are resolved: a level (or a run) becomes a
:class:`~tokenplan.measurement.Measurement`, resolved to a :class:`~tokenplan.calibration.validate.Case`
with the same ``api.resolve.resolve`` as ``tokenplan predict``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenplan.api.resolve import PredictRequest, check_server_description, read_profile, resolve
from tokenplan.bench.acceptance_sweep import acceptance_notes
from tokenplan.bench.levels import LevelResult, level_dict
from tokenplan.bench.probe import WorkloadAsk, check_servers, probe_workload
from tokenplan.bench.result import BenchOutcome, bench_json, token_count_notes
from tokenplan.bench.server_info import read_server_info
from tokenplan.bench.sweep import Sweep, SweepSettings
from tokenplan.bench.workload import dataset_workload
from tokenplan.calibration.bands import model_family
from tokenplan.calibration.bench_fit import RunTotals, Served, fit_served, step_points
from tokenplan.calibration.bench_fit import bench_measurements as fit_levels
from tokenplan.calibration.bench_fit import run_measurement as measure_run
from tokenplan.calibration.run_profile import FitOutcome
from tokenplan.calibration.validate import Case
from tokenplan.client.auth import api_key_from_env, display_url
from tokenplan.client.openai import OpenAIClient
from tokenplan.errors import InputError
from tokenplan.files.reports import read_bench_file
from tokenplan.job.workload import LengthDist
from tokenplan.measurement import Measurement
from tokenplan.runner.blocking import run_blocking
from tokenplan.runner.limits import MAX_CONCURRENCY  # bench's per-level bound is generate's
from tokenplan.runner.store.summary import mean_prompt_tokens, read_run_summary


@dataclass(frozen=True)
class BenchRequest:
    """What ``tokenplan bench`` measures.

    Attributes:
        endpoints: API roots (``http://host:8000/v1``).
        model: the name the servers serve.
        concurrencies: levels (requests in flight over all endpoints).
        isl, osl: random-prompt input and output lengths (tokens); ``osl`` also caps dataset answers.
        dataset: JSONL/ShareGPT file of real prompts instead of random ones.
        num_prompts, duration_s: measured requests (or seconds) per level.
        warmup_requests: warm-up requests per level (None = min(C, 32)).
        num_gpus: GPUs behind the endpoints (for tok/s per GPU; None = unknown).
        ignore_eos: ask for exact output lengths.
        stream: stream answers (TTFT, ITL).
        deadline_s: limit on one request (seconds).
        seed: prompt RNG seed.
        metrics: read ``/metrics`` during each level.
        api_key: sent as ``Authorization: Bearer`` to every endpoint (chat, ``/v1/models``,
            ``/tokenize``, ``/detokenize``, ``/metrics``, ``/get_server_info``); never logged or saved.
        api_key_env: the environment variable holding the key when ``api_key`` is None
            (``--api-key-env``); None reads ``$OPENAI_API_KEY`` if set, as ``generate`` does.
        request_rates: open-loop levels, requests/s (``inf`` = all at once); then
            ``concurrencies`` must hold one value, the most in flight (``--max-concurrency``),
            or be empty for no limit.
        burstiness: gamma shape of the arrival gaps (1 = Poisson; lower = burstier).
    """

    endpoints: tuple[str, ...] = field(repr=False)  # may hold user:password@ or ?key=: not in a repr
    model: str
    concurrencies: tuple[int, ...] = (1, 4, 16, 64)
    isl: int | None = 1024
    osl: int | None = 256
    dataset: str | None = None
    num_prompts: int | None = None
    duration_s: float | None = None
    warmup_requests: int | None = None
    num_gpus: int | None = None
    ignore_eos: bool = True
    stream: bool = True
    deadline_s: float = 600.0
    seed: int = 0
    metrics: bool = True
    api_key: str | None = field(default=None, repr=False)  # never printed, not even in a repr
    api_key_env: str | None = None
    request_rates: tuple[float, ...] | None = None  # open loop (vllm bench serve --request-rate)
    burstiness: float = 1.0  # gamma shape of arrival gaps (1 = Poisson)


def _check(req: BenchRequest) -> None:
    if not req.endpoints:
        raise InputError("endpoint", "", "at least one --endpoint URL")
    for url in req.endpoints:
        if not url.startswith(("http://", "https://")):
            raise InputError(
                "endpoint", display_url(url), "an http:// or https:// URL such as http://127.0.0.1:8000/v1"
            )
    if req.request_rates is not None:
        if not req.request_rates or any(not r > 0 for r in req.request_rates):
            raise InputError("request_rate", ",".join(map(str, req.request_rates)), "rates > 0 in requests/s, or inf")
        if not req.burstiness > 0:
            raise InputError("burstiness", req.burstiness, "a number > 0 (1 = Poisson arrivals)")
        if len(req.concurrencies) > 1:
            raise InputError(
                "max_concurrency",
                ",".join(map(str, req.concurrencies)),
                "one value with --request-rate (the most requests in flight)",
            )
    elif not req.concurrencies or any(not 1 <= c <= MAX_CONCURRENCY for c in req.concurrencies):
        raise InputError(
            "concurrency",
            ",".join(map(str, req.concurrencies)),
            f"integers from 1 to {MAX_CONCURRENCY:,}, e.g. 1,4,16,64",
        )
    if req.dataset is None and (not req.isl or req.isl < 1 or not req.osl or req.osl < 1):
        raise InputError("isl/osl", f"{req.isl}/{req.osl}", "token counts ≥ 1 (or --dataset FILE)")
    for name, tokens in (("isl", req.isl), ("osl", req.osl)):
        if tokens is not None and tokens > MAX_LENGTH_TOKENS:
            raise InputError(name, tokens, f"at most {MAX_LENGTH_TOKENS:,} tokens (longer than any served context)")
    if req.dataset is not None:  # a bad file is refused before any server is contacted
        dataset_workload(req.dataset, req.osl, MAX_DISTINCT_PROMPTS)
    if req.num_prompts is not None and req.num_prompts < 1:
        raise InputError("num_prompts", req.num_prompts, "an integer ≥ 1")
    if req.duration_s is not None and req.duration_s <= 0:
        raise InputError("duration", req.duration_s, "seconds > 0")
    if req.num_prompts is not None and req.duration_s is not None:
        raise InputError("num_prompts", req.num_prompts, "either --num-prompts or --duration, not both")
    if req.num_gpus is not None and req.num_gpus < 1:
        raise InputError("num_gpus", req.num_gpus, "an integer ≥ 1")
    if req.warmup_requests is not None and req.warmup_requests < 0:
        raise InputError("warmup", req.warmup_requests, "an integer ≥ 0 (warm-up requests per level)")
    if not 0 < req.deadline_s < math.inf:
        raise InputError("request_timeout", req.deadline_s, "a finite number of seconds > 0")


# Random prompts are generated word by word on this machine: 1 Mi tokens is beyond the longest
# context the catalog's models serve, and bounds the text a sweep generates.
MAX_LENGTH_TOKENS = 1_048_576

# Distinct random prompts generated per sweep at most; levels beyond reuse them round-robin
# (prompts stay distinct within any level of concurrency ≤ 512, so prefix caching cannot help).
MAX_DISTINCT_PROMPTS = 2048


def bench(req: BenchRequest, on_level: Callable[[dict], None] | None = None) -> BenchOutcome:
    """Measure the servers at each concurrency level (see ``tokenplan bench``).

    Returns the bench JSON: ``model``, ``endpoints``, ``num_gpus``, ``levels`` (per level:
    ``concurrency``, ``achieved_concurrency``, ``requests``, ``errors``, ``duration_s``,
    ``request_throughput_per_s``, ``output_tok_s``, ``total_tok_s``, ``ttft_s``/``tpot_s``/
    ``itl_s``/``e2e_s`` as ``mean``/``p50``/``p90``/``p99`` seconds, ``server``), ``server``
    (what the servers say about themselves), ``cap`` (:func:`~tokenplan.bench.server_info.concurrency_cap`),
    ``acceptance`` (speculative decoding over the sweep: :func:`~tokenplan.bench.acceptance_sweep.sweep_acceptance`;
    per level in ``levels[i].acceptance``; None without speculative decoding),
    ``workload`` and ``stopped``. A server that fails mid-sweep does not raise: the finished
    levels come back with ``stopped`` set.

    Endpoints are stored as :func:`~tokenplan.client.auth.display_url` shows them (no
    ``user:password@``, query values masked); no key, password or token reaches the JSON. In a
    running event loop (a Jupyter cell) the sweep goes to a worker thread and this call waits
    (:func:`~tokenplan.runner.blocking.run_blocking`); :func:`bench_async` is the variant to ``await``.

    Raises:
        InputError: bad options.
        ServerError: an endpoint is unreachable or does not serve ``model`` before the sweep.
    """
    return run_blocking(lambda: bench_async(req, on_level))


async def bench_async(req: BenchRequest, on_level: Callable[[dict], None] | None = None) -> BenchOutcome:
    """:func:`bench` on the running event loop (``await bench_async(req)`` in a notebook): the same
    outcome and errors; the sweep's requests are sent from this loop, which stays free meanwhile.
    Cancelling the awaiting task stops the sweep and closes its connections."""
    _check(req)
    if req.api_key is None:
        req = replace(req, api_key=api_key_from_env(req.api_key_env))
    return await _bench(req, on_level)


async def _bench(req: BenchRequest, on_level: Callable[[dict], None] | None) -> BenchOutcome:
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
    data = bench_json(req, levels, info, workload, ignore_eos, notes, result.stopped)
    return BenchOutcome(data, result.stopped, notes)


# ---------------------------------------------------------------------------------------------
# Fitting: the fits are calibration's (:mod:`tokenplan.calibration.bench_fit`); here the names
# are resolved and the files read.


def _served(desc: PredictRequest) -> Served:
    return Served(
        engine=desc.engine,
        model=desc.model,
        gpu=desc.gpu,
        num_gpus=desc.num_gpus,
        tp=desc.tp,
        pp=desc.pp,
        ep=desc.ep,
        attention_dp=desc.attention_dp,
        weight_dtype=desc.weight_dtype,
        kv_dtype=desc.kv_dtype,
        max_running=desc.max_running,
    )


def _level_case(desc: PredictRequest, m: Measurement) -> Case:
    # bench_measurements and run_measurement state every level's lengths and concurrency
    assert m.isl_tokens is not None and m.osl_tokens is not None and m.concurrency is not None
    s = resolve(replace(desc, isl=m.isl_tokens, osl=m.osl_tokens, concurrency=m.concurrency))
    return Case(
        m,
        s.model,
        s.gpu,
        s.config,
        s.config.engine.name,
        s.gpu.architecture,
        model_family(m.model),
        LengthDist(m.isl_tokens),
        LengthDist(m.osl_tokens),
        m.concurrency / s.config.layout.dp,
    )


def _fit(
    measurements: list[Measurement],
    desc: PredictRequest,
    origin: tuple[str, str, list[dict] | None],
    points: list[tuple[float, float]],
) -> FitOutcome:
    def level_case(m: Measurement) -> Case:
        return _level_case(desc, m)

    return fit_served(measurements, _served(desc), level_case, read_profile(None).table.resolve, origin, points)


def bench_measurements(data: dict, desc: PredictRequest) -> list[Measurement]:
    """One Measurement per bench level with answers (:func:`~tokenplan.calibration.bench_fit.bench_measurements`)."""
    return fit_levels(data["levels"], _served(desc))


def fit_bench(
    data: dict, desc: PredictRequest, command: str = "tokenplan bench --fit", sources: list[dict] | None = None
) -> FitOutcome:
    """Fit the efficiency factors to a bench result (see :mod:`tokenplan.calibration.from_runs`).

    ``desc`` describes what the server runs (model config, GPU, GPUs, layout, dtypes, engine);
    its ``max_running`` defaults to the running-request cap the sweep observed.

    Raises:
        InputError, CatalogError, ConfigError: a bad description, or no level to fit.
    """
    check_server_description(desc)
    cap = (data.get("cap") or {}).get("max_running_requests")
    if desc.max_running is None and cap:
        desc = replace(desc, max_running=int(cap))
    points = step_points(data["levels"], desc.max_running)
    return _fit(bench_measurements(data, desc), desc, ("bench sweep", command, sources), points)


def calibrate_from_results(
    paths: list[str], desc: PredictRequest, command: str = "tokenplan calibrate --from-bench"
) -> FitOutcome:
    """Fit the efficiency factors to result files of ``vllm bench serve``, ``sglang.bench_serving``,
    AIPerf or GuideLLM (:mod:`tokenplan.files.bench_results`); ``desc`` says what the server ran.
    The result's ``data["sources"]`` names each file's format and level count.

    Raises:
        InputError, ConfigError, CatalogError: a missing or unknown file, a bad description.
    """
    from tokenplan.files.bench_results import read_bench_results

    check_server_description(desc)
    levels, sources = [], []
    for path in paths:
        kind, found = read_bench_results(path)
        levels += found
        sources.append({"path": path, "format": kind, "levels": len(found)})
    return fit_bench({"levels": levels, "cap": {}}, desc, command, sources)


def read_bench_json(path: str) -> BenchOutcome:
    """A bench ``--json`` file, as the sweep that wrote it returned it
    (:func:`~tokenplan.files.reports.read_bench_file`: InputError, ConfigError)."""
    data = read_bench_file(path)
    return BenchOutcome(data, data.get("stopped"), list(data.get("notes") or ()))


def run_measurement(run_dir: str, desc: PredictRequest) -> Measurement:
    """The one measured point of a generate run (:func:`~tokenplan.calibration.bench_fit.run_measurement`):
    ``summary.json``'s totals at ``desc.concurrency`` requests in flight, prompts of ``desc.isl``
    tokens if given as > 0, else the records' ``usage.prompt_tokens``.

    Raises:
        InputError: not a run directory, no concurrency, or no prompt length.
        ConfigError: a malformed summary.json or manifest.json.
    """
    path = Path(run_dir)
    run = read_run_summary(path)
    given = desc.isl if desc.isl and desc.isl > 0 else None
    totals = RunTotals(
        f"{path.name}:{run.model}",
        str(path / "summary.json"),
        run.requests,
        run.output_tokens,
        run.output_tok_s,
        run.ttft_mean_ms,
        None if given is not None or desc.concurrency is None else mean_prompt_tokens(path),
    )
    return measure_run(totals, _served(desc), desc.concurrency, given)


def calibrate_from_run(
    run_dir: str, desc: PredictRequest, command: str = "tokenplan calibrate --from-run"
) -> FitOutcome:
    """Fit the efficiency factors to a generate run's summary (one throughput point: the priors
    decide how the error splits between factors; see :mod:`tokenplan.calibration.from_runs`).

    Raises:
        InputError, ConfigError, CatalogError: see :func:`run_measurement` and ``api.resolve.resolve``.
    """
    check_server_description(desc)
    m = run_measurement(run_dir, desc)
    assert m.isl_tokens is not None and m.osl_tokens is not None  # run_measurement states both
    return _fit([m], replace(desc, isl=m.isl_tokens, osl=m.osl_tokens), ("generate run", command, None), [])
