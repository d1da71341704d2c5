"""``plan``: compare hardware options for a generation job — the Python API behind
``tokenplan plan``.

The default request answers the question tokenplan starts from: Qwen3.6-27B, 914,000
samples with thinking on (mean output 2,500 tokens), on 4× RTX PRO 6000 against 8× B200.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tokenplan.api import calibration_warnings, efficiency_table
from tokenplan.catalog import launch_info, load_engine, load_gpu, load_model
from tokenplan.errors import InputError
from tokenplan.job.workload import lognormal_with_mean
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.perf.engine import sglang_vision_cut
from tokenplan.perf.speculative import parse_spec
from tokenplan.planning.launch import client_concurrency, running_limit, sglang_command, vllm_command
from tokenplan.planning.rank import bottleneck_text, describe, explain, fastest
from tokenplan.planning.search import Job, OptionResult, best_with, search_option
from tokenplan.planning.space import HardwareOption, widest_tp
from tokenplan.units import KV_DTYPES, MS_PER_S, S_PER_DAY, WEIGHT_DTYPES, parse_dtype

# Assumptions of the default job, stated in the output:
# - outputs: SpecForge's Qwen3.6 recipe caps thinking answers at max_tokens 32,768
#   (docs/generation-jobs.md); thinking lengths are heavy-tailed: lognormal σ = 1.0;
# - inputs: chat prompts of ShareGPT/UltraChat-style data sets with the chat template and a
#   system prompt: mean 1,024 tokens, lognormal σ = 0.8, cap 16,384.
DEFAULT_GPUS = ("4xrtx-pro-6000", "8xb200")
DEFAULT_SPECS = ("none", "mtp:1", "mtp:3")

_GPU_OPTION = re.compile(r"^\s*(\d+)\s*[x×]\s*([a-z0-9.\-]+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class PlanRequest:
    """A job and the hardware options to compare.

    Attributes:
        model: catalog name or config.json path.
        gpus: options as ``COUNTxKEY`` (``8xb200``).
        samples: requests in the job.
        isl_mean/isl_sigma/isl_cap, osl_mean/osl_sigma/osl_cap: lognormal lengths (tokens).
        engine: sglang, vllm or trtllm.
        prices: GPU key → $ per GPU-hour (overrides the catalog's typical price).
        specs: speculative settings to try (``none``, ``mtp:K[:TAU]``).
        weight_dtypes, kv_dtypes: restrict the formats searched (None = all the chip runs).
        calibration: a calibration JSON (None = the shipped fit).
    """

    model: str = "qwen3.6-27b"
    gpus: tuple[str, ...] = DEFAULT_GPUS
    samples: int = 914_000
    isl_mean: float = 1024
    isl_sigma: float = 0.8
    isl_cap: float | None = 16384
    osl_mean: float = 2500
    osl_sigma: float = 1.0
    osl_cap: float | None = 32768
    engine: str = "sglang"
    prices: dict[str, float] = field(default_factory=dict)
    specs: tuple[str, ...] = DEFAULT_SPECS
    weight_dtypes: tuple[str, ...] | None = None
    kv_dtypes: tuple[str, ...] | None = None
    calibration: str | None = None


def parse_gpu_option(text: str) -> tuple[int, str]:
    """``8xb200`` → (8, "b200"). Raises InputError."""
    m = _GPU_OPTION.match(text)
    if not m or int(m.group(1)) < 1:
        raise InputError("gpu", text, "COUNTxKEY with COUNT ≥ 1, e.g. 8xb200")
    return int(m.group(1)), m.group(2).lower()


def _options(req: PlanRequest) -> list[HardwareOption]:
    from tokenplan.catalog import gpu_names

    for key in req.prices:
        if key not in gpu_names():
            raise InputError("price", key, gpu_names())
    out = []
    for text in dict.fromkeys(req.gpus):  # the same option twice is compared once
        count, key = parse_gpu_option(text)
        gpu = load_gpu(key)
        price = req.prices.get(key)
        if price is not None and not price > 0:
            raise InputError("price", price, "dollars per GPU-hour > 0")
        if price is None and gpu.price is not None:
            price = gpu.price.typical_usd_per_hour
        out.append(HardwareOption(gpu, count, price))
    return out


def plan(req: PlanRequest) -> dict:
    """Search every option and return the comparison (JSON-able dict).

    Keys: ``job`` (the assumptions), ``options`` (per option: best configuration, tok/s, days,
    $, $/Mtok, bottleneck, rejected reasons, launch commands), ``recommended`` (the fastest
    option's ``concurrency_per_endpoint``, ``output_tok_s_total``, ``num_replicas``), and
    ``answer`` (sentences).

    Raises:
        InputError, CatalogError, ConfigError: bad names, sizes or files.
    """
    model, engine, table, job, results = _searched(req)
    return _plan_dict(req, model, engine, table, job, results)


def _spec_notes(req: PlanRequest, model) -> list[str]:
    """Say so when asked-for MTP settings were not searched (the model ships no MTP layers)."""
    asked = [s for s in req.specs if s.strip().lower().startswith("mtp")]
    if asked and model.mtp_layers == 0:
        return [f"MTP was not searched: {model.name} ships no MTP layers (asked: {', '.join(asked)}); "
                "EAGLE or DFlash need a separate draft model (--spec eagle3:K[:TAU])."]
    return []


def _radix_notes(results: list[OptionResult], table: EfficiencyTable, job: Job) -> list[str]:
    """Why the fastest option's launch turns SGLang's radix (prefix) cache off, and what a
    multi-turn job gives up: with the cache on, a hybrid model's request holds 4–5 state slots
    (3 + ping-pong buffers, engine-facts §3), so the state pool caps the batch; with it off, one
    slot per request. A ``generate --mode regenerate`` job that resends each conversation's history
    would reuse that prefix from the cache and prefill only the new turn."""
    top = fastest(results)
    if top is None or not top.best.evaluation.config.lift_running_cap or not top.best.evaluation.deployment.spec.is_hybrid:
        return []
    on = best_with(top, table, job, lambda c: not c.lift_running_cap)
    lifted = top.best.evaluation
    if on is None:
        return []
    s = on.evaluation.steady
    return [f"--disable-radix-cache on {top.option.label}: {lifted.output_tok_s_total:,.0f} tok/s at "
            f"{lifted.steady.batch:.0f} running per replica, against {on.evaluation.output_tok_s_total:,.0f} tok/s "
            f"with the prefix cache on (batch {s.batch:.0f}/replica capped by {s.batch_reason}; with the cache on "
            f"each request holds 4–5 state slots). A multi-turn job (generate --mode regenerate) resends its history; the cache "
            f"would skip that prefill, so plan such a job with --isl-mean set to the new tokens per turn and keep "
            f"the cache on only if that option is then faster."]


def _check_lengths(req: PlanRequest) -> None:
    """Name the option of a bad length before the distribution is built."""
    for name in ("isl", "osl"):
        mean, sigma, cap = (getattr(req, f"{name}_{p}") for p in ("mean", "sigma", "cap"))
        if not mean > 0:
            raise InputError(f"{name}_mean", mean, "a number of tokens > 0")
        if not sigma >= 0:
            raise InputError(f"{name}_sigma", sigma, "a lognormal σ ≥ 0")
        if cap is not None and not cap > mean:
            raise InputError(f"{name}_cap", cap, f"a number of tokens above the mean {mean:g}")


def _plan_dict(req: PlanRequest, model, engine, table: EfficiencyTable, job: Job,
               results: list[OptionResult]) -> dict:
    """Rank the searched options into ``plan``'s dict."""
    all_tp = {r.option.label: best_with(r, table, job, lambda c, n=widest_tp(r.option): c.layout.tp == n)
              for r in results}
    repo, parsers = launch_info(model.name)
    options = [_option_dict(r, repo, model.native_weight_dtype, parsers) for r in results]
    for o in options:  # a profile fitted elsewhere is an extrapolation: say so beside the numbers
        if "warnings" in o:
            o["warnings"] += calibration_warnings(req.calibration, {
                "engine": engine.name, "gpu": o["gpu"], "model": model.name, "isl_tokens": job.isl.mean,
                "osl_tokens": job.osl.mean, "concurrency": o["concurrency_per_endpoint"]})
    top = fastest(results)
    recommended = None
    if top is not None:
        ev = top.best.evaluation
        recommended = {"option": top.option.label, "concurrency_per_endpoint": client_concurrency(ev),
                       "output_tok_s_total": ev.output_tok_s_total, "num_replicas": ev.config.layout.dp,
                       "configuration": describe(top.best)}
    return {
        "model": model.name, "engine": engine.name, "efficiency": table.provenance,
        "job": {"samples": req.samples, "isl": job.isl.describe(), "osl": job.osl.describe(),
                "isl_mean_tokens": job.isl.mean, "osl_mean_tokens": job.osl.mean,
                "osl_cap_tokens": job.osl.cap_tokens,  # generate --plan sends it as max_tokens
                "output_tokens": job.osl.mean * req.samples},
        "options": options, "recommended": recommended,
        "answer": explain(results, all_tp) + _spec_notes(req, model) + _radix_notes(results, table, job),
        "configurations_evaluated": sum(r.configurations for r in results),
    }


def _option_dict(r: OptionResult, repo: str, native: str, parsers: object) -> dict:
    out: dict = {"option": r.option.label, "gpu": r.option.gpu.key, "count": r.option.count,
                 "usd_per_gpu_hour": r.option.usd_per_gpu_hour, "rejected": r.rejected,
                 "configurations": r.configurations}
    b = r.best
    if b is None:
        return out
    ev, s = b.evaluation, b.evaluation.steady
    out.update({
        "best": describe(b), "layout": ev.config.layout.describe(),
        "weight_dtype": ev.config.weight_dtype.value, "kv_dtype": ev.config.kv_dtype.value,
        "spec": ev.config.spec.describe() if ev.config.spec else "none",
        "output_tok_s_total": ev.output_tok_s_total, "output_tok_s_per_gpu": ev.output_tok_s_per_gpu,
        "wall_days": b.wall_s / S_PER_DAY, "drain_hours": b.time.drain_s / 3600,
        "gpu_hours": b.cost.gpu_hours, "usd": b.cost.usd, "usd_per_mtok": b.cost.usd_per_mtok,
        "bottleneck": bottleneck_text(b), "batch_per_replica": s.batch, "batch_limit_reason": s.batch_reason,
        "tpot_ms": s.tpot_s * MS_PER_S, "ttft_ms": s.ttft_s * MS_PER_S,
        "weight_bytes_per_gpu": ev.memory.weight_bytes_per_gpu, "kv_capacity_tokens": ev.memory.kv_capacity_tokens,
        "warnings": list(ev.warnings), "non_default_settings": ev.config.lift_running_cap,
        "concurrency_per_endpoint": client_concurrency(ev), "max_running_requests": running_limit(ev),
        "memory_allocation": ev.memory.allocation(running_limit(ev)), "gpu_bytes": ev.memory.gpu_bytes,
        "launch": {"sglang": sglang_command(ev, repo, native, parsers), "vllm": vllm_command(ev, repo, native, parsers)},
        "alternatives": [{"configuration": describe(c), "output_tok_s_total": c.evaluation.output_tok_s_total,
                          "wall_days": c.wall_s / S_PER_DAY, "usd": c.cost.usd} for c in r.ranked[1:5]],
    })
    return out


REPORT_CHARTS = ("throughput", "cost_time", "memory", "speedup")  # sections plan_report_data computes


def _searched(req: PlanRequest) -> tuple:
    """(model spec, engine facts, efficiency table, job, every option searched) — what ``plan``
    computes before it ranks. Raises what ``plan`` raises."""
    if req.samples < 1:
        raise InputError("samples", req.samples, "an integer ≥ 1")
    _check_lengths(req)
    model = load_model(req.model)
    engine = load_engine(req.engine)
    table = efficiency_table(req.calibration)
    job = Job(req.samples, lognormal_with_mean(req.isl_mean, req.isl_sigma, req.isl_cap),
              lognormal_with_mean(req.osl_mean, req.osl_sigma, req.osl_cap))
    specs = [parse_spec(s) for s in req.specs]
    if model.mtp_layers == 0:
        specs = [s for s in specs if s is None or s.method != "mtp"] or [None]
    weights = tuple(parse_dtype(d, "weight_dtype", WEIGHT_DTYPES) for d in req.weight_dtypes) if req.weight_dtypes else None
    kvs = tuple(parse_dtype(d, "kv_dtype", KV_DTYPES) for d in req.kv_dtypes) if req.kv_dtypes else None
    cut = sglang_vision_cut(engine, model.vision_layers, model.vision_hidden)
    return model, engine, table, job, [search_option(model, opt, engine, table, job, specs, weights, kvs, cut)
                                       for opt in _options(req)]


def plan_report_data(req: PlanRequest, charts: tuple[str, ...] = REPORT_CHARTS) -> dict:
    """``plan(req)`` and the numbers behind its charts (JSON-able dict), for the HTML and PNG
    reports and the terminal chart.

    Keys: ``plan`` (exactly ``plan(req)``), ``assumptions`` (per option: GPU figures, price and
    its source, efficiency factors), and, for each name in ``charts``: ``throughput`` (per option
    and layout, output tok/s against concurrency with the memory-limited maximum; see
    :mod:`tokenplan.planning.curves`), ``cost_time`` (every configuration's job days and $,
    Pareto frontier marked), ``memory`` (bytes per GPU of each chosen configuration),
    ``speedup`` (speculative decoding against none, by concurrency). Units are in the key names
    (``_s``, ``_bytes``, ``_usd``); concurrency counts requests in flight over all replicas.

    Raises:
        InputError, CatalogError, ConfigError: as ``plan``.
    """
    from dataclasses import asdict

    from tokenplan.planning import curves

    unknown = set(charts) - set(REPORT_CHARTS)
    if unknown:
        raise InputError("chart", sorted(unknown)[0], REPORT_CHARTS)
    model, engine, table, job, results = _searched(req)
    out: dict = {"plan": _plan_dict(req, model, engine, table, job, results),
                 "assumptions": _assumptions(req, table, results)}
    if "throughput" in charts:
        out["throughput"] = [asdict(c) for r in results for c in curves.layout_curves(r, table, job)]
    if "cost_time" in charts:
        out["cost_time"] = [asdict(p) for p in curves.cost_points(results, table, job)]
    if "memory" in charts:
        out["memory"] = [asdict(m) for m in map(curves.memory_bars, results) if m is not None]
    if "speedup" in charts:
        out["speedup"] = [asdict(c) for r in results for c in curves.speedup_curves(r, table, job)]
    return out


def _assumptions(req: PlanRequest, table: EfficiencyTable, results: list[OptionResult]) -> dict:
    """What the plan assumed per option: datasheet figures, the price and where it comes from,
    and the efficiency factors applied (fractions of peak, seconds)."""
    options = []
    for r in results:
        gpu = r.option.gpu
        if gpu.key in req.prices:
            price_source = "given with --price / the job file"
        elif gpu.price is not None:
            price_source = f"catalog typical price ({gpu.price.source}, {gpu.price.as_of})"
        else:
            price_source = "no public price known"
        options.append({
            "option": r.option.label, "gpu": gpu.name, "count": r.option.count,
            "usd_per_gpu_hour": r.option.usd_per_gpu_hour, "price_source": price_source,
            "memory_bytes": gpu.memory_bytes, "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
            "dense_flops_per_s": dict(gpu.dense_flops_per_s), "scaleup": gpu.scaleup.name,
            "scaleup_bytes_per_s": gpu.scaleup.bytes_per_s,
            "efficiency": table.resolve(req.engine, gpu.architecture).as_dict()})
    return {"engine": req.engine, "efficiency_source": table.provenance, "options": options}
