"""``tokenplan bench --endpoint URL --model NAME``: measure a live server over a concurrency sweep;
``--fit -o PROFILE.json`` fits the planner's efficiency factors to it.

Options → :class:`BenchRequest` (by keyword) → :func:`bench` → :func:`finish` (fit, save,
plot) → :mod:`tokenplan.report.bench`. Each option's type and help is one click decorator below,
in the order ``--help`` lists.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from tokenplan.api.bench import BenchRequest, FitTarget, bench, check_outputs, finish, read_bench_json
from tokenplan.api.resolve import PredictRequest
from tokenplan.bench_schema import BenchLevel, BenchResult
from tokenplan.cli.app import app
from tokenplan.cli.params import INTEGER, NUMBER, PATH
from tokenplan.client.auth import display_url
from tokenplan.errors import InputError, MissingOptionError
from tokenplan.report.bench import level_line, show_bench

# BenchRequest's field for each measuring option whose name differs
_REQUEST_FIELDS = {"duration": "duration_s", "warmup": "warmup_requests", "deadline": "deadline_s"}
_FIT_OPTIONS = (
    "gpu",
    "tp",
    "pp",
    "ep",
    "weight_dtype",
    "kv_dtype",
    "engine",
    "max_running",
)


@app.command("bench", old_spellings={"--deadline": "--request-timeout"})
@click.option(
    "--endpoint",
    multiple=True,
    help="API root, e.g. http://127.0.0.1:8000/v1 (repeat for more: a level's requests go round-robin over "
    "them; the length probe and the server's settings are read from the first).",
)
@click.option("--model", help="The model name the server serves.")
@click.option(
    "--concurrency",
    help="Levels: requests in flight over all endpoints (generate's --concurrency is per endpoint), "
    "comma-separated [default: 1,4,16,64].",
)
@click.option("--max-concurrency", help="vllm bench serve's name: the levels; with --request-rate, the most in flight.")
@click.option("--request-rate", help="Open-loop levels in requests/s, comma-separated (inf = all at once).")
@click.option(
    "--burstiness", type=NUMBER, default=1.0, help="Gamma shape of arrival gaps with --request-rate (1 = Poisson)."
)
@click.option("--isl", type=INTEGER, help="Random-prompt input length (tokens) [default: 1024].")
@click.option("--osl", type=INTEGER, help="Output length (tokens); caps dataset answers [default: 256].")
@click.option("--random-input-len", type=INTEGER, help="vllm bench serve's name for --isl.")
@click.option("--random-output-len", type=INTEGER, help="vllm bench serve's name for --osl.")
@click.option("--dataset", help="JSONL (also .gz/.zst/.bz2/.lz4), Parquet or ShareGPT JSON of real prompts.")
@click.option("--dataset-name", help="random | sharegpt (with --dataset-path).")
@click.option("--dataset-path", help="vllm bench serve's name for --dataset.")
@click.option("--num-prompts", type=INTEGER, help="Measured requests per level (default 4×C, ≥ 16).")
@click.option("--duration", type=NUMBER, help="Measured seconds per level instead.")
@click.option("--warmup", type=INTEGER, help="Warm-up requests per level (default min(C, 32)).")
@click.option("--num-gpus", type=INTEGER, help="GPUs behind the endpoints.")
@click.option("--ignore-eos/--no-ignore-eos", default=True, help="Ask for exact output lengths.")
@click.option("--stream/--no-stream", default=True, help="Stream (needed for TTFT/ITL).")
@click.option("--metrics/--no-metrics", default=True, help="Read the servers' /metrics.")
@click.option(
    "--api-key-env",
    help="Environment variable holding the API key (must be set when named) [default: OPENAI_API_KEY if set].",
)
@click.option("--request-timeout", "deadline", type=NUMBER, default=600.0, help="Limit on one request in seconds.")
@click.option("--seed", type=INTEGER, default=0, help="Seed of the random prompts and lengths.")
@click.option("--json", "json_out", is_flag=True, help="Print the bench JSON.")
@click.option("--save", type=PATH, help="Write the bench JSON to this file.")
@click.option("--plot", type=PATH, help="Write the PNG plot to this file.")
@click.option("--from-json", help="Use a saved bench JSON instead of measuring.")
@click.option("--fit", is_flag=True, help="Fit the efficiency factors to the sweep.")
@click.option("-o", "--out", type=PATH, help="Where --fit writes the calibration profile.")
@click.option("--config", help="--fit: catalog model name or config.json path.")
@click.option("--gpu", help="--fit: catalog GPU key.")
@click.option("--tp", type=INTEGER, default=1, help="--fit: tensor-parallel GPUs per replica (TP).")
@click.option("--pp", type=INTEGER, default=1, help="--fit: pipeline stages per replica (PP).")
@click.option("--ep", type=INTEGER, default=1, help="--fit: expert-parallel GPUs (EP, MoE).")
@click.option(
    "--weight-dtype", default="auto", help="--fit: the served weight format (auto: the checkpoint's released one)."
)
@click.option("--kv-dtype", default="auto", help="--fit: the KV-cache format (auto: the engine's default).")
@click.option("--engine", default="sglang", help="--fit: the serving engine: sglang, vllm or trtllm.")
@click.option("--max-running", type=INTEGER, help="--fit: the server's running-request cap (default: observed).")
def bench_command(**o: Any) -> None:
    """Measure a live OpenAI-compatible server over a concurrency sweep, a speculating one's τ too (fit the planner to it)."""
    fitting = _fitting(o)
    # Every check that needs no server comes before the sweep, so a typo costs no measurement.
    isl = _same("isl", o["isl"], "random-input-len", o["random_input_len"], 1024)
    osl = _same("osl", o["osl"], "random-output-len", o["random_output_len"], 256)
    dataset = _dataset(o["dataset"], o["dataset_path"], o["dataset_name"])
    levels, rates = _levels(o["concurrency"], o["max_concurrency"], o["request_rate"], o["from_json"] is not None)
    check_outputs(o["save"], o["plot"], fitting)
    if o["from_json"] is not None:
        data, stopped = read_bench_json(o["from_json"]).data, None
        if fitting is not None:  # a bad --fit configuration fails now
            fitting.check(data.get("num_gpus"))
    else:
        if fitting is not None:  # a bad --config/--gpu/layout fails now, not after the sweep
            fitting.check()
        if not o["endpoint"] or not o["model"]:
            raise InputError("endpoint/model", _shown(o["endpoint"], o["model"]), "--endpoint URL and --model NAME")
        measured = {k: o[k] for k in ("num_prompts", "duration", "warmup", "num_gpus", "ignore_eos", "stream")}
        measured |= {k: o[k] for k in ("deadline", "seed", "metrics", "api_key_env", "burstiness")}
        request = BenchRequest(
            endpoints=tuple(o["endpoint"]),
            model=o["model"],
            concurrencies=levels,
            isl=isl,
            osl=osl,
            dataset=dataset,
            request_rates=rates,
            **{_REQUEST_FIELDS.get(k, k): v for k, v in measured.items()},
        )
        result = bench(request, on_level=None if o["json_out"] else _progress)
        data, stopped = result.data, result.stopped
    _finish(data, stopped, fitting, o["save"], o["plot"], o["json_out"])


def _fitting(o: dict[str, Any]) -> FitTarget | None:
    """``--fit``'s options (None without ``--fit``): -o, --config and --gpu are needed with it."""
    if not o["fit"]:
        return None
    if o["out"] is None or o["config"] is None or o["gpu"] is None:
        missing = [f for f, k in (("-o", "out"), ("--config", "config"), ("--gpu", "gpu")) if o[k] is None]
        raise MissingOptionError(missing, "-o PROFILE.json, --config MODEL and --gpu GPU with --fit")
    return FitTarget(o["out"], PredictRequest(model=o["config"], **{k: o[k] for k in _FIT_OPTIONS}), o["num_gpus"])


def _shown(endpoints: Sequence[str] | None, model: str | None) -> str:
    """The endpoints and model as an error line shows them: no ``user:password@``, no query value."""
    return f"{[display_url(u) for u in endpoints or ()]}/{model}"


def _concurrencies(text: str) -> tuple[int, ...]:
    """``"1,4, 16"`` → ``(1, 4, 16)``; an empty entry (``"1,,2"``, ``"1,2,"``) is refused, not dropped."""
    allowed = "comma-separated integers ≥ 1 with no empty entry, e.g. 1,4,16,64"
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InputError("concurrency", text, allowed) from None
    if not values or min(values) < 1:
        raise InputError("concurrency", text, allowed)
    return values


def _same(name: str, value, alias: str, alias_value, default):  # noqa: ANN001, ANN202 - any option type
    """One option given under two names (tokenplan's and vllm bench serve's): either, or both equal."""
    if value is not None and alias_value is not None and value != alias_value:
        raise InputError(name, value, f"the same value as --{alias} ({alias_value}) or only one of them")
    return value if value is not None else (alias_value if alias_value is not None else default)


def _rates(text: str) -> tuple[float, ...]:
    """``"1,2.5,inf"`` → ``(1.0, 2.5, inf)`` requests/s; each > 0."""
    allowed = "comma-separated request rates > 0 in requests/s, or inf, e.g. 1,4,inf"
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InputError("request-rate", text, allowed) from None
    if not values or any(not v > 0 for v in values):
        raise InputError("request-rate", text, allowed)
    return values


def _levels(
    concurrency: str | None, max_concurrency: str | None, request_rate: str | None, from_json: bool
) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
    """(concurrency levels, request rates) from ``--concurrency``/``--max-concurrency`` and
    ``--request-rate``: no levels for a saved sweep, none by default with rates (no limit)."""
    levels_text = _same("concurrency", concurrency, "max-concurrency", max_concurrency, None)
    rates = None if request_rate is None else _rates(request_rate)
    if from_json:
        return (), rates
    if rates is not None:
        levels = () if levels_text is None else _concurrencies(levels_text)
        if len(levels) > 1:  # named as typed (the API names its own field, max_concurrency)
            typed = "concurrency" if concurrency is not None else "max-concurrency"
            raise InputError(typed, levels_text, "one value with --request-rate (the most requests in flight)")
        return levels, rates
    # "" is a value given (and refused by _concurrencies), not an absent option: no default sweep for it
    return _concurrencies("1,4,16,64" if levels_text is None else levels_text), rates


def _dataset(dataset: str | None, path: str | None, name: str | None) -> str | None:
    """The prompt file from ``--dataset``/``--dataset-path`` and ``--dataset-name`` (vLLM's
    names): ``random`` means none, ``sharegpt`` needs a file."""
    chosen = _same("dataset", dataset, "dataset-path", path, None)
    if name is not None and name not in ("random", "sharegpt"):
        raise InputError("dataset-name", name, ["random", "sharegpt"])
    if name == "random" and chosen is not None:
        raise InputError("dataset-name", name, "sharegpt with --dataset-path (random prompts need no file)")
    if name == "sharegpt" and chosen is None:
        raise InputError("dataset-path", None, "a ShareGPT JSON file with --dataset-name sharegpt")
    return chosen


def command_line(args: Sequence[str]) -> str:
    """The command a ``--fit`` profile's provenance names: ``tokenplan bench`` and ``args`` with every
    URL (``--endpoint URL`` or ``--endpoint=URL``) as :func:`display_url` shows it, so that no
    ``user:password@`` or query value (``?key=…``) reaches the profile or the bench JSON."""
    words = []
    for word in args:
        flag, equals, value = word.partition("=")
        if equals and flag.startswith("--") and "://" in value:
            words.append(f"{flag}={display_url(value)}")
        else:
            words.append(display_url(word) if "://" in word else word)
    return " ".join(["tokenplan bench", *words])


def _progress(level: dict) -> None:
    print(level_line(BenchLevel.from_json(level, "bench level")), file=sys.stderr)


def _finish(
    data: dict, stopped: str | None, fitting: FitTarget | None, save: Path | None, plot: Path | None, json_out: bool
) -> None:
    """Fit, save and plot (:func:`finish`), print the sweep (as JSON where a file that would
    have kept it was lost), then raise what went wrong, if anything."""

    def draw(data: dict, path: Path) -> None:
        from tokenplan.report.bench_plot import write_bench_plot

        write_bench_plot(BenchResult.from_json(data, "bench JSON"), path)

    done = finish(data, fitting, save, plot, command_line(sys.argv[2:]), draw)
    for warning in done.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    as_json = done.print_json(save is not None, json_out)
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        from rich.console import Console

        show_bench(
            Console(width=None if sys.stdout.isatty() else 170), BenchResult.from_json(data, "bench JSON"), done.profile
        )
    error = done.error(stopped, data["levels"], as_json)
    if error is not None:
        raise error
