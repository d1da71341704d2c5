"""The bench API: measure a live server (``tokenplan bench``), fit the planner to the measurement
(``--fit``), and fit it to a finished generate run (``tokenplan calibrate --from-run``).

The measuring half lives in :mod:`tokenplan.bench` (I/O column); the fitting half in
:mod:`tokenplan.calibration.from_runs` (performance column). They meet here: a bench level
becomes a :class:`~tokenplan.measurement.Measurement`, resolved to a
:class:`~tokenplan.calibration.validate.Case` with the same ``api.build_config`` as
``tokenplan predict``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenplan.api._common import PredictRequest, build_config
from tokenplan.calibration.bands import model_family
from tokenplan.bench.server_info import concurrency_cap, read_server_info, server_info_summary
from tokenplan.bench.sweep import LevelResult, Sweep, SweepSettings, level_dict
from tokenplan.bench.workload import (SideRequestFailed, Workload, calibrate_words, dataset_workload,
                                      probe_messages, random_workload_approx, random_workload_exact)
from tokenplan.calibration.fitted_range import fitted_on
from tokenplan.calibration.from_runs import RunFit, fit_run, linear_step_law, median_abs_error, predicted_step_s
from tokenplan.calibration.validate import Case
from tokenplan.client.auth import api_key_from_env
from tokenplan.client.openai import OpenAIClient, RequestFailed
from tokenplan.errors import ConfigError, InputError, ServerError
from tokenplan.job.workload import LengthDist
from tokenplan.measurement import Measurement


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

    endpoints: tuple[str, ...]
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
    api_key: str | None = None
    api_key_env: str | None = None
    request_rates: tuple[float, ...] | None = None  # open loop (vllm bench serve --request-rate)
    burstiness: float = 1.0  # gamma shape of arrival gaps (1 = Poisson)


@dataclass
class BenchOutcome:
    """The bench JSON (``data``) and why the sweep stopped early (None: every level ran)."""

    data: dict
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)


def _check(req: BenchRequest) -> None:
    if not req.endpoints:
        raise InputError("endpoint", "", "at least one --endpoint URL")
    for url in req.endpoints:
        if not url.startswith(("http://", "https://")):
            raise InputError("endpoint", url, "an http:// or https:// URL such as http://127.0.0.1:8000/v1")
    if req.request_rates is not None:
        if not req.request_rates or any(not r > 0 for r in req.request_rates):
            raise InputError("request_rate", ",".join(map(str, req.request_rates)), "rates > 0 in requests/s, or inf")
        if not req.burstiness > 0:
            raise InputError("burstiness", req.burstiness, "a number > 0 (1 = Poisson arrivals)")
        if len(req.concurrencies) > 1:
            raise InputError("max_concurrency", ",".join(map(str, req.concurrencies)),
                             "one value with --request-rate (the most requests in flight)")
    elif not req.concurrencies or any(c < 1 for c in req.concurrencies):
        raise InputError("concurrency", ",".join(map(str, req.concurrencies)), "integers ≥ 1, e.g. 1,4,16,64")
    if req.dataset is None and (not req.isl or req.isl < 1 or not req.osl or req.osl < 1):
        raise InputError("isl/osl", f"{req.isl}/{req.osl}", "token counts ≥ 1 (or --dataset FILE)")
    if req.num_prompts is not None and req.num_prompts < 1:
        raise InputError("num_prompts", req.num_prompts, "an integer ≥ 1")
    if req.duration_s is not None and req.duration_s <= 0:
        raise InputError("duration", req.duration_s, "seconds > 0")
    if req.num_prompts is not None and req.duration_s is not None:
        raise InputError("num_prompts", req.num_prompts, "either --num-prompts or --duration, not both")
    if req.num_gpus is not None and req.num_gpus < 1:
        raise InputError("num_gpus", req.num_gpus, "an integer ≥ 1")


# A health probe (GET /models) answers in milliseconds; 10 s tolerates a server still warming up.
PROBE_DEADLINE_S = 10.0
# A 1-token calibration request waits behind at most one prefill of a loaded server.
TOKEN_PROBE_DEADLINE_S = 120.0
# Distinct random prompts generated per sweep at most; levels beyond reuse them round-robin
# (prompts stay distinct within any level of concurrency ≤ 512, so prefix caching cannot help).
MAX_DISTINCT_PROMPTS = 2048


async def _check_servers(clients: list[OpenAIClient], urls: tuple[str, ...], model: str) -> None:
    for client, url in zip(clients, urls):
        try:
            served = await client.models(deadline_s=PROBE_DEADLINE_S)
        except RequestFailed as failure:
            raise ServerError(f"cannot reach {url}: {failure}") from None
        if model not in served:
            raise ServerError(f"{url} does not serve model {model!r} (it serves: {', '.join(served) or 'nothing'})")


async def _probe_tokens(client: OpenAIClient, model: str, messages: tuple[dict, ...], ignore_eos: bool) -> int:
    body = {"model": model, "messages": list(messages), "max_tokens": 1, "temperature": 0.0}
    if ignore_eos:
        body["ignore_eos"] = True
    done = await client.chat(body, deadline_s=TOKEN_PROBE_DEADLINE_S)
    if done.usage is None:
        raise ServerError("the server's answers carry no usage: token counts cannot be measured")
    return done.usage.prompt_tokens


async def _workload(req: BenchRequest, client: OpenAIClient, n: int, notes: list[str]) -> tuple[Workload, bool]:
    """The prompts and whether ``ignore_eos`` is accepted (tried once with a 1-token probe)."""
    short, long = probe_messages(req.seed)
    ignore_eos = req.ignore_eos
    try:
        short_tokens = await _probe_tokens(client, req.model, short, ignore_eos)
    except RequestFailed as failure:
        if not ignore_eos or failure.kind != "status" or failure.status not in (400, 422):
            raise ServerError(f"{req.endpoints[0]}: a 1-token probe request failed: {failure}") from None
        ignore_eos = False
        notes.append(f"the server refused ignore_eos ({failure}); output lengths are the model's own")
        short_tokens = await _probe_tokens(client, req.model, short, False)
    if req.dataset is not None:
        return dataset_workload(req.dataset, req.osl, None), ignore_eos
    try:
        return (await random_workload_exact(req.endpoints[0], req.model, req.isl, req.osl, n, req.seed,
                                            api_key=req.api_key), ignore_eos)
    except (SideRequestFailed, KeyError, TypeError, ValueError):
        pass
    long_tokens = await _probe_tokens(client, req.model, long, ignore_eos)
    overhead, per_word = calibrate_words(short_tokens, long_tokens)
    notes.append(f"no /tokenize endpoint: prompt lengths approximated ({per_word:.2f} tokens per word, "
                 f"{overhead:.0f} template tokens, from two probe requests)")
    return random_workload_approx(req.isl, req.osl, n, req.seed, overhead, per_word), ignore_eos


def bench(req: BenchRequest, on_level: Callable[[dict], None] | None = None) -> BenchOutcome:
    """Measure the servers at each concurrency level (see ``tokenplan bench``).

    Returns the bench JSON: ``model``, ``endpoints``, ``num_gpus``, ``levels`` (per level:
    ``concurrency``, ``achieved_concurrency``, ``requests``, ``errors``, ``duration_s``,
    ``request_throughput_per_s``, ``output_tok_s``, ``total_tok_s``, ``ttft_s``/``tpot_s``/
    ``itl_s``/``e2e_s`` as ``mean``/``p50``/``p90``/``p99`` seconds, ``server``), ``server``
    (what the servers say about themselves), ``cap`` (:func:`~tokenplan.bench.server_info.concurrency_cap`),
    ``workload`` and ``stopped``. A server that fails mid-sweep does not raise: the finished
    levels come back with ``stopped`` set.

    Raises:
        InputError: bad options.
        ServerError: an endpoint is unreachable or does not serve ``model`` before the sweep.
    """
    _check(req)
    if req.api_key is None:
        req = replace(req, api_key=api_key_from_env(req.api_key_env))
    return asyncio.run(_bench(req, on_level))


async def _bench(req: BenchRequest, on_level: Callable[[dict], None] | None) -> BenchOutcome:
    most = max(req.concurrencies) if req.concurrencies else (req.num_prompts or 1024)
    per_endpoint = -(-most // len(req.endpoints))
    clients = [OpenAIClient(u, max_connections=per_endpoint, api_key=req.api_key) for u in req.endpoints]
    notes: list[str] = []
    try:
        await _check_servers(clients, req.endpoints, req.model)
        n_prompts = max(req.num_prompts or 0, 4 * most, 16)
        workload, ignore_eos = await _workload(req, clients[0], min(n_prompts, MAX_DISTINCT_PROMPTS), notes)
        info = await read_server_info(req.endpoints[0], api_key=req.api_key) if req.metrics else None
        settings = SweepSettings(tuple(req.concurrencies), req.num_prompts, req.duration_s, req.warmup_requests,
                                 req.deadline_s, req.stream, ignore_eos, request_rates=req.request_rates,
                                 burstiness=req.burstiness,
                                 max_concurrency=req.concurrencies[0] if req.concurrencies else None, seed=req.seed)
        sweep = Sweep(clients, req.endpoints, req.model, workload, settings, metrics=req.metrics,
                      api_key=req.api_key)

        def report(level: LevelResult) -> None:
            if on_level is not None:
                on_level(level_dict(level))

        result = await sweep.run(report)
    finally:
        for client in clients:
            await client.aclose()
    levels = [level_dict(lv) for lv in result.levels]
    notes += token_count_notes(levels)
    has_metrics = any(lv["server"] for lv in levels)
    data = {
        "model": req.model, "endpoints": list(req.endpoints), "num_gpus": req.num_gpus, "levels": levels,
        "server": {"metrics": has_metrics, "server_info": server_info_summary(info) if info else None},
        "cap": concurrency_cap(levels),
        "workload": {"method": workload.method, "isl_tokens": req.isl if req.dataset is None else None,
                     "osl_tokens": req.osl, "dataset": req.dataset, "prompts": len(workload.prompts),
                     "exact_fraction": workload.exact_fraction, "ignore_eos": ignore_eos, "stream": req.stream,
                     "arrivals": "closed loop" if req.request_rates is None else
                     f"open loop, gamma gaps, burstiness {req.burstiness:g}"},
        "notes": notes, "stopped": result.stopped,
    }
    return BenchOutcome(data, result.stopped, notes)


def token_count_notes(levels: list[dict]) -> list[str]:
    """Say how tokens were counted where it was not from ``usage`` (see :mod:`tokenplan.client.metrics`)."""
    methods = {lv.get("token_count_method") for lv in levels if lv.get("requests")}
    notes = []
    if any(m and "stream chunks" in m for m in methods):
        notes.append("the server sent no usage in its streams: output tokens were counted from the streamed "
                     "chunks (one token per chunk; an undercount with speculative decoding), input tokens "
                     "are unknown")
    if None in methods:
        notes.append("the server sent no usage and the answers were not streamed: token throughput was not "
                     "measured (shown as –); rerun with --stream")
    return notes


# ---------------------------------------------------------------------------------------------
# Fitting


def _level_case(desc: PredictRequest, m: Measurement) -> Case:
    config, model, gpu = build_config(replace(desc, isl=m.isl_tokens, osl=m.osl_tokens, concurrency=m.concurrency))
    return Case(m, model, gpu, config, config.engine.name, gpu.architecture, model_family(m.model),
                LengthDist(m.isl_tokens), LengthDist(m.osl_tokens), m.concurrency / config.layout.dp)


def bench_measurements(data: dict, desc: PredictRequest) -> list[Measurement]:
    """One Measurement per bench level with answers: mean lengths from ``usage``, mean TPOT and
    TTFT (seconds), output tok/s per GPU over ``desc.num_gpus``."""
    out = []
    for i, lv in enumerate(data["levels"]):
        if not lv["requests"] or not lv.get("mean_output_tokens") or lv.get("mean_input_tokens") is None:
            continue
        out.append(Measurement(
            line=i + 1, row_id=f"c{lv['concurrency']}", engine=desc.engine, model=desc.model, gpu=desc.gpu,
            num_gpus=desc.num_gpus, tp=desc.tp, pp=desc.pp, ep=desc.ep, attention_dp=desc.attention_dp,
            weight_dtype=desc.weight_dtype, kv_dtype=desc.kv_dtype, isl_tokens=lv["mean_input_tokens"],
            osl_tokens=lv["mean_output_tokens"], concurrency=float(lv["concurrency"]),
            num_requests=float(lv["requests"]), output_tok_s_per_gpu=lv["output_tok_s"] / desc.num_gpus,
            ttft_s=lv["ttft_s"]["mean"], tpot_s=lv["tpot_s"]["mean"]))
    return out


POOR_FIT = 0.5  # median |predicted / measured − 1| of output tok/s per GPU above this: warn


def poor_fit_warning(error: float | None, levels: int) -> str | None:
    """The warning for a fit whose median |predicted / measured − 1| (output tok/s per GPU)
    over ``levels`` levels exceeds :data:`POOR_FIT`; None for a fit within it (or no figure)."""
    if error is None or error <= POOR_FIT:
        return None
    return (f"the fitted profile reproduces the measured throughput poorly: median |predicted/measured − 1| "
            f"= {error * 100:,.0f} % over {levels} level{'s' if levels != 1 else ''} (output tok/s per GPU); "
            "check --config, --gpu, --num-gpus, the layout and dtypes against the server. The profile is "
            "written anyway, its fitted_on.median_abs_error says so")


@dataclass
class FitOutcome:
    """A fit to measured levels: the cases, the fit, the profile JSON and the ``--json`` dict,
    and warnings (a fit that does not reproduce the levels it was fitted on)."""

    cases: list[Case]
    fit: RunFit
    profile: dict
    data: dict
    warnings: list[str] = field(default_factory=list)

    def model_step_s(self, batch: float) -> float:
        """The fitted model's decode step time (seconds) at ``batch`` running sequences."""
        return predicted_step_s(self.cases[0], self.fit.efficiency, batch)


def _fit_cases(measurements: list[Measurement], desc: PredictRequest, source: str, command: str,
               step_points: list[tuple[float, float]]) -> FitOutcome:
    if not measurements:
        raise InputError("levels", 0, "at least one level with answers to fit")
    cases = [_level_case(desc, m) for m in measurements]
    try:
        run = fit_run(cases)
    except ValueError as exc:
        raise InputError("levels", len(cases), f"levels with TPOT or throughput ({exc})") from None
    eff, case0 = run.efficiency, cases[0]
    identity = {"engine": case0.engine, "gpu": case0.gpu.key, "architecture": case0.architecture, "model": case0.model.name,
                "num_gpus": desc.num_gpus, "tp": desc.tp, "pp": desc.pp, "ep": desc.ep,
                "weight_dtype": desc.weight_dtype, "kv_dtype": desc.kv_dtype, "max_running": desc.max_running}
    # concurrency per replica, as predict and plan see it
    ranges = [{"concurrency": c.concurrency_per_replica, "isl_tokens": c.measurement.isl_tokens,
               "osl_tokens": c.measurement.osl_tokens} for c in cases]
    provenance = (f"fit by `{command}` on {len(cases)} levels ({source}) of {case0.engine} serving {desc.model} "
                  f"on {desc.num_gpus}× {desc.gpu}")
    error = median_abs_error(run.levels)
    profile = {"default": eff.as_dict(), "groups": {case0.group: eff.as_dict()},
               "uncertainty": {f"{case0.group}.{k}": s for k, (_, s) in run.factors.items() if not math.isnan(s)},
               "provenance": provenance,
               "fitted_on": {**fitted_on(ranges, identity, source), "median_abs_error": error}}
    law = linear_step_law(step_points)
    warning = poor_fit_warning(error, len(run.levels))
    outcome = FitOutcome(cases, run, profile, {}, [] if warning is None else [warning])
    outcome.data = {
        "factors": {k: {"value": v, "uncertainty": None if math.isnan(s) else s} for k, (v, s) in run.factors.items()},
        "at_bound": list(run.at_bound), "converged": run.converged, "max_running": desc.max_running,
        "median_abs_error": error, "warnings": list(outcome.warnings),
        "levels": [{"concurrency": lf.concurrency, "batch": lf.batch,
                    "predicted_tpot_s": lf.tpot_s[0], "measured_tpot_s": lf.tpot_s[1],
                    "predicted_ttft_s": lf.ttft_s[0], "measured_ttft_s": lf.ttft_s[1],
                    "predicted_output_tok_s_per_gpu": lf.output_tok_s_per_gpu[0],
                    "measured_output_tok_s_per_gpu": lf.output_tok_s_per_gpu[1]} for lf in run.levels],
        "measured_step_law": None if law is None else {"a_s": law[0], "b_s_per_sequence": law[1],
                                                       "points": [list(p) for p in step_points]},
        "model_step_s": [{"batch": b, "measured_step_s": s, "model_step_s": outcome.model_step_s(b)}
                         for b, s in step_points],
        "profile": profile,
    }
    return outcome


def fit_bench(data: dict, desc: PredictRequest, command: str = "tokenplan bench --fit") -> FitOutcome:
    """Fit the efficiency factors to a bench result (see :mod:`tokenplan.calibration.from_runs`).

    ``desc`` describes what the server runs (model config, GPU, GPUs, layout, dtypes, engine);
    its ``max_running`` defaults to the running-request cap the sweep observed.

    Raises:
        InputError, CatalogError, ConfigError: a bad description, or no level to fit.
    """
    cap = (data.get("cap") or {}).get("max_running_requests")
    if desc.max_running is None and cap:
        desc = replace(desc, max_running=int(cap))
    measurements = bench_measurements(data, desc)
    points = []
    for lv in data["levels"]:
        tpot = lv["tpot_s"]["mean"]
        if not lv["requests"] or tpot is None:
            continue
        running = (lv.get("server") or {}).get("running_mean")
        batch = running if running else min(lv["achieved_concurrency"], desc.max_running or math.inf)
        points.append((float(batch), float(tpot)))
    return _fit_cases(measurements, desc, "bench sweep", command, points)


def calibrate_from_results(paths: list[str], desc: PredictRequest,
                           command: str = "tokenplan calibrate --from-bench") -> FitOutcome:
    """Fit the efficiency factors to result files of ``vllm bench serve``, ``sglang.bench_serving``,
    AIPerf or GuideLLM (:mod:`tokenplan.files.bench_results`); ``desc`` says what the server ran.
    The result's ``data["sources"]`` names each file's format and level count.

    Raises:
        InputError, ConfigError, CatalogError: a missing or unknown file, a bad description.
    """
    from tokenplan.files.bench_results import read_bench_results

    levels, sources = [], []
    for path in paths:
        kind, found = read_bench_results(path)
        levels += found
        sources.append({"path": path, "format": kind, "levels": len(found)})
    outcome = fit_bench({"levels": levels, "cap": {}}, desc, command)
    outcome.data["sources"] = sources
    return outcome


def read_bench_json(path: str) -> dict:
    """A bench ``--json`` file. Raises InputError (missing) or ConfigError (not a bench JSON)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("bench file", path, "an existing JSON file written by tokenplan bench --json")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(path, "<root>", f"not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("levels"), list):
        raise ConfigError(path, "levels", "expected the bench JSON with a 'levels' list")
    return data


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise InputError("run directory", str(path.parent), f"a generate run directory with {path.name}") from None
    except ValueError as exc:
        raise ConfigError(str(path), "<root>", f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "<root>", "expected a JSON object")
    return data


def _mean_prompt_tokens(run_dir: Path) -> float | None:
    total = count = 0
    for shard in sorted((run_dir / "shards").glob("*.jsonl")):
        with shard.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                for turn in record.get("turns") or ():
                    usage = turn.get("usage") or {}
                    if isinstance(usage.get("prompt_tokens"), int):
                        total, count = total + usage["prompt_tokens"], count + 1
    return total / count if count else None


def run_measurement(run_dir: str, desc: PredictRequest) -> Measurement:
    """The one measured point of a generate run: output tok/s over the run (``summary.json``),
    mean output length (output tokens / requests), mean prompt length (``desc.isl`` if given
    as > 0, else the records' ``usage.prompt_tokens``), mean TTFT where streamed, and the
    concurrency ``desc.concurrency`` (total requests in flight).

    Raises:
        InputError: not a run directory, no concurrency, or no prompt length.
        ConfigError: a malformed summary.json or manifest.json.
    """
    path = Path(run_dir)
    summary, manifest = _read_json(path / "summary.json"), _read_json(path / "manifest.json")
    if desc.concurrency is None:
        raise InputError("concurrency", None, "the run's total requests in flight (--concurrency N)")
    requests, tokens, tok_s = summary.get("requests"), summary.get("output_tokens"), summary.get("output_tok_s")
    if not all(isinstance(v, (int, float)) and v > 0 for v in (requests, tokens, tok_s)):
        raise ConfigError(str(path / "summary.json"), "requests/output_tokens/output_tok_s",
                          "positive numbers (a run that finished requests)")
    isl = desc.isl if desc.isl and desc.isl > 0 else _mean_prompt_tokens(path)
    if isl is None:
        raise InputError("isl", None, "the mean prompt length (--isl), since the records carry no usage")
    ttft = (summary.get("latency_ttft") or {}).get("mean_ms")
    model = (manifest.get("job") or {}).get("model", "?")
    return Measurement(line=1, row_id=f"run:{path.name}:{model}", engine=desc.engine, model=desc.model, gpu=desc.gpu,
                       num_gpus=desc.num_gpus, tp=desc.tp, pp=desc.pp, ep=desc.ep, attention_dp=desc.attention_dp,
                       weight_dtype=desc.weight_dtype, kv_dtype=desc.kv_dtype, isl_tokens=float(isl),
                       osl_tokens=tokens / requests, concurrency=float(desc.concurrency),
                       num_requests=float(requests), output_tok_s_per_gpu=tok_s / desc.num_gpus,
                       ttft_s=None if ttft is None else ttft / 1e3)


def calibrate_from_run(run_dir: str, desc: PredictRequest, command: str = "tokenplan calibrate --from-run") -> FitOutcome:
    """Fit the efficiency factors to a generate run's summary (one throughput point: the priors
    decide how the error splits between factors; see :mod:`tokenplan.calibration.from_runs`).

    Raises:
        InputError, ConfigError, CatalogError: see :func:`run_measurement` and ``build_config``.
    """
    m = run_measurement(run_dir, desc)
    return _fit_cases([m], replace(desc, isl=m.isl_tokens, osl=m.osl_tokens), "generate run", command, [])
