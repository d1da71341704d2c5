"""Result files of other serving benchmarks, read as tokenplan bench levels for ``calibrate``.

Each reader turns one run (one concurrency or request-rate point) into the level fields the fit
uses — ``concurrency`` (requests in flight the tool held: its ``max_concurrency``, else Little's
law), ``achieved_concurrency`` (Little's law: request throughput × mean end-to-end latency),
``requests``, ``mean_input_tokens`` / ``mean_output_tokens`` (tokens), ``output_tok_s`` (tokens/s),
``ttft_s`` / ``tpot_s`` / ``e2e_s`` (``mean``/``p50``/``p99`` in seconds). The tools write no model,
GPU or layout the planner can resolve, so those come from the command line.

Formats and the fields read, from each tool's source:

- ``vllm bench serve --save-result`` (``vllm/benchmarks/serve.py``): one JSON object per run (or
  JSON lines with ``--append-result``): ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``duration`` (s), ``request_throughput`` (req/s), ``output_throughput``
  (tok/s), ``mean/median/p99_{ttft,tpot,e2el}_ms``, ``max_concurrency`` (null without a limit).
- ``python -m sglang.bench_serving --output-file`` (``python/sglang/bench_serving.py``): JSON
  lines, one per run: the same token and throughput names, latencies as ``mean/median/p99_ttft_ms``,
  ``…_tpot_ms`` and ``mean/median/p99_e2e_latency_ms``, ``max_concurrency``.
- AIPerf ``profile_export_aiperf.json`` (ai-dynamo/aiperf, docs/tutorials/working-with-profile-
  exports.md): metrics as ``{"unit", "avg", "p50", "p99", …}`` objects: ``request_throughput``
  (requests/sec), ``output_token_throughput`` (tokens/sec), ``time_to_first_token``,
  ``inter_token_latency`` (ms; AIPerf's ITL is (latency − TTFT)/(OSL − 1), vLLM's TPOT),
  ``request_latency`` (ms), ``input_sequence_length``, ``output_sequence_length`` (tokens),
  ``request_count``; the concurrency in ``input_config.loadgen.concurrency``.
- tokenplan's own ``bench --save``/``--json`` file (:func:`tokenplan.files.reports.read_bench_file`):
  its ``levels`` as they are, with the running-request cap the sweep observed (``cap``) and its
  ``num_gpus`` for the fit (the same file ``bench --from-json FILE --fit`` reads).
- GuideLLM ``benchmarks.json`` (vllm-project/guidellm, ``benchmark/schemas/generative/metrics.py``):
  ``benchmarks[*].metrics`` with ``{"successful": {"mean", "median", "percentiles": {"p99"}}}``
  summaries: ``requests_per_second``, ``request_concurrency``, ``request_latency`` (s),
  ``prompt_token_count``, ``output_token_count``, ``time_to_first_token_ms``,
  ``time_per_output_token_ms``, ``output_tokens_per_second``; ``request_totals.successful``; the
  concurrency of a ``concurrent`` strategy in ``streams`` (``config.strategy`` or ``args.strategy``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal, overload

from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import parse_json, read_text

FORMATS = ("tokenplan bench", "vllm", "sglang", "aiperf", "guidellm")


def read_bench_results(path: str) -> tuple[str, list[dict[str, Any]]]:
    """``(format, levels)`` from a result file of one of :data:`FORMATS` (:func:`read_bench_source`)."""
    kind, levels, _ = read_bench_source(path)
    return kind, levels


def read_bench_source(path: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """``(format, levels, sweep)`` from a result file of one of :data:`FORMATS` (detected by its
    fields); ``sweep`` holds a tokenplan bench file's observed ``cap`` and ``num_gpus`` ({} for
    the other tools, whose files state neither).

    Raises:
        InputError: the file does not exist.
        ConfigError: not UTF-8 JSON/JSON lines (or nested too deep, a key twice), or no known format
            (the message names what was found).
    """
    kind, levels, sweep = _read_source(path)
    for n, level in enumerate(levels):  # levels[0] is the first, as the file's JSON path reads
        check_measured(level, path, f"levels[{n}]")
    return kind, levels, sweep


# A level's measured quantities: counts, tokens, tokens/s and seconds, none of them negative.
_MEASURED = (
    "concurrency",
    "achieved_concurrency",
    "requests",
    "request_throughput_per_s",
    "mean_input_tokens",
    "mean_output_tokens",
)


def check_measured(level: dict[str, Any], path: str, where: str, latencies: bool = True) -> None:
    """Raise ConfigError naming the file, the level's field and its value where a measured
    quantity (:data:`_MEASURED`, ``output_tok_s``, the server's ``/metrics`` counts, each latency
    statistic) is negative or not finite: a fit on it would write a profile from impossible figures."""
    fields = [(k, level.get(k)) for k in (*_MEASURED, "output_tok_s")]
    server = level.get("server")  # the server's own counts (/metrics): the step fit's batch
    if isinstance(server, dict):
        fields += [(f"server.{k}", server.get(k)) for k in ("output_tok_s", "running_mean", "waiting_mean")]
    for latency in ("ttft_s", "tpot_s", "e2e_s") if latencies else ():
        stats = level.get(latency)
        if isinstance(stats, dict):
            fields += [(f"{latency}.{k}", v) for k, v in stats.items()]
    for field, value in fields:
        if isinstance(value, int | float) and not isinstance(value, bool) and not (0 <= value < math.inf):
            raise ConfigError(path, f"{where}.{field}", f"{value!r} is not allowed (allowed: a finite number ≥ 0)")


def _read_source(path: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise InputError("bench result", path, f"an existing result file of {', '.join(FORMATS)}")
    text = read_text(p)  # ConfigError: byte N, not UTF-8
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    try:
        items = [parse_json(text, path)]
    except ConfigError:
        if len(lines) < 2:  # one JSON value that does not parse: its own message says where
            raise
        # JSON lines (--append-result, sglang's --output-file): each line its own value
        items = [parse_json(line, path, line=n) for n, line in lines]
    if len(items) == 1 and isinstance(items[0], dict) and isinstance(items[0].get("levels"), list):
        from tokenplan.files.reports import read_bench_file  # checks the schema version and every level

        data = read_bench_file(path)
        return "tokenplan bench", data["levels"], {k: data[k] for k in ("cap", "num_gpus") if data.get(k)}
    if len(items) == 1 and isinstance(items[0], dict) and isinstance(items[0].get("benchmarks"), list):
        return "guidellm", [_guidellm(b, path, i) for i, b in enumerate(items[0]["benchmarks"])], {}
    if len(items) == 1 and isinstance(items[0], dict) and isinstance(items[0].get("request_throughput"), dict):
        return "aiperf", [_aiperf(items[0], path)], {}
    if not items or not all(isinstance(i, dict) and "completed" in i and "output_throughput" in i for i in items):
        keys = sorted(items[0])[:8] if items and isinstance(items[0], dict) else []
        raise ConfigError(path, "<root>", f"not a result of {', '.join(FORMATS)} (keys {keys})")
    kind = "sglang" if any("mean_e2e_latency_ms" in i for i in items) else "vllm"
    return kind, [_vllm_like(i, path, n, kind) for n, i in enumerate(items, start=1)], {}


@overload
def _num(value: Any, path: str, field: str, required: Literal[True] = ...) -> float: ...
@overload
def _num(value: Any, path: str, field: str, required: bool) -> float | None: ...
def _num(value: Any, path: str, field: str, required: bool = True) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if required:
        raise ConfigError(
            path, field, "missing (a number is required)" if value is None else f"{value!r} is not a number"
        )
    return None


def _ms(value: Any, path: str, field: str) -> float | None:
    seconds = _num(value, path, field, required=False)
    return None if seconds is None else seconds / 1e3


def _level(
    path: str,
    concurrency: float | None,
    requests: float,
    req_s: float,
    in_tokens: float,
    out_tokens: float,
    out_tok_s: float,
    ttft: dict,
    tpot: dict,
    e2e: dict,
    closed_loop: bool = True,
) -> dict[str, Any]:
    achieved = req_s * e2e["mean"] if e2e.get("mean") is not None else None  # Little's law: L = λ·W
    conc = concurrency if concurrency is not None else achieved
    if conc is None:
        raise ConfigError(
            path, "max_concurrency", "absent, and no end-to-end latency to infer the concurrency from (Little's law)"
        )
    return {
        "concurrency": conc,
        "achieved_concurrency": achieved if achieved is not None else conc,
        "requests": int(requests),
        "errors": 0,
        "request_throughput_per_s": req_s,
        "mean_input_tokens": in_tokens,
        "mean_output_tokens": out_tokens,
        "output_tok_s": out_tok_s,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "server": None,
        "closed_loop": closed_loop,  # requests sent as others end (no finite request rate): an opening wave
    }


def _vllm_like(item: dict, path: str, line: int, kind: str) -> dict[str, Any]:
    where = f"line {line}"
    n = _num(item.get("completed"), path, f"{where}: completed")
    if not n:
        raise ConfigError(path, f"{where}: completed", "0 completed requests: nothing to fit")
    e2e_name = "e2e_latency" if kind == "sglang" else "e2el"
    stats = {
        name: {
            stat: _ms(item.get(f"{key}_{name2}_ms"), path, f"{key}_{name2}_ms")
            for stat, key in (("mean", "mean"), ("p50", "median"), ("p99", "p99"))
        }
        for name, name2 in (("ttft", "ttft"), ("tpot", "tpot"), ("e2e", e2e_name))
    }
    limit = item.get("max_concurrency")
    out_tok_s = _num(item.get("output_throughput"), path, f"{where}: output_throughput")
    if not out_tok_s > 0:  # requests completed, so tokens came out: 0 is a broken file, not a figure
        raise ConfigError(
            path, f"{where}: output_throughput", f"{out_tok_s!r} with {n:g} completed requests (allowed: tokens/s > 0)"
        )
    return _level(
        path,
        _num(limit, path, "max_concurrency") if limit is not None else None,
        n,
        _num(item.get("request_throughput"), path, f"{where}: request_throughput"),
        _num(item.get("total_input_tokens"), path, f"{where}: total_input_tokens") / n,
        _num(item.get("total_output_tokens"), path, f"{where}: total_output_tokens") / n,
        out_tok_s,
        stats["ttft"],
        stats["tpot"],
        stats["e2e"],
        _unlimited_rate(item.get("request_rate")),
    )


def _unlimited_rate(rate: object) -> bool:
    """Whether a result's ``request_rate`` (vLLM's and SGLang's ``bench_serving`` save ``inf``
    or the requests/s of Poisson arrivals; absent in older files) sent requests without a rate."""
    return rate is None or (isinstance(rate, str) and rate.strip().lower() == "inf") or rate == float("inf")


def _aiperf(item: dict, path: str) -> dict[str, Any]:
    @overload
    def metric(name: str, stat: str = ..., required: Literal[True] = ...) -> float: ...
    @overload
    def metric(name: str, stat: str, required: bool) -> float | None: ...
    def metric(name: str, stat: str = "avg", required: bool = True) -> float | None:
        block = item.get(name)
        value = block.get(stat) if isinstance(block, dict) else None
        return _num(value, path, f"{name}.{stat}", required)

    def ms(name: str) -> dict[str, float | None]:
        return {
            s: (None if (v := metric(name, k, False)) is None else v / 1e3)
            for s, k in (("mean", "avg"), ("p50", "p50"), ("p99", "p99"))
        }

    loadgen = (item.get("input_config") or {}).get("loadgen") or {}
    concurrency = _num(loadgen.get("concurrency"), path, "input_config.loadgen.concurrency", required=False)
    rate = loadgen.get("request_rate")  # AIPerf's --request-rate: open-loop arrivals
    return _level(
        path,
        concurrency,
        metric("request_count"),
        metric("request_throughput"),
        metric("input_sequence_length"),
        metric("output_sequence_length"),
        metric("output_token_throughput"),
        ms("time_to_first_token"),
        ms("inter_token_latency"),
        ms("request_latency"),
        _unlimited_rate(rate),
    )


def _guidellm(bench: dict, path: str, index: int) -> dict[str, Any]:
    metrics = bench.get("metrics") if isinstance(bench, dict) else None
    if not isinstance(metrics, dict):
        raise ConfigError(path, f"benchmarks[{index}].metrics", "missing")

    @overload
    def ok(name: str, stat: str = ..., scale: float = ..., required: Literal[True] = ...) -> float: ...
    @overload
    def ok(name: str, stat: str, scale: float, required: bool) -> float | None: ...
    def ok(name: str, stat: str = "mean", scale: float = 1.0, required: bool = True) -> float | None:
        block = (metrics.get(name) or {}).get("successful") or {}
        value = (block.get("percentiles") or {}).get(stat) if stat.startswith("p") else block.get(stat)
        number = _num(value, path, f"benchmarks[{index}].metrics.{name}.successful.{stat}", required)
        return None if number is None else number * scale

    def dist(name: str, scale: float) -> dict[str, float | None]:
        return {
            "mean": ok(name, "mean", scale, False),
            "p50": ok(name, "median", scale, False),
            "p99": ok(name, "p99", scale, False),
        }

    strategy = (bench.get("config") or bench.get("args") or {}).get("strategy") or {}
    streams = strategy.get("streams") if strategy.get("type_") == "concurrent" else None
    totals = metrics.get("request_totals") or {}
    requests = _num(totals.get("successful"), path, f"benchmarks[{index}].metrics.request_totals.successful")
    return _level(
        path,
        _num(streams, path, "strategy.streams") if streams is not None else ok("request_concurrency"),
        requests,
        ok("requests_per_second"),
        ok("prompt_token_count"),
        ok("output_token_count"),
        ok("output_tokens_per_second"),
        dist("time_to_first_token_ms", 1e-3),
        dist("time_per_output_token_ms", 1e-3),
        dist("request_latency", 1.0),
        strategy.get("type_") not in ("constant", "poisson"),  # GuideLLM's rate-driven profiles
    )
