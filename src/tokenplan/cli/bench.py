"""``tokenplan bench --endpoint URL --model NAME``: measure a live server over a concurrency sweep;
``--fit -o PROFILE.json`` fits the planner's efficiency factors to it.

Options → :class:`BenchRequest` (by keyword) → :func:`bench` → :mod:`tokenplan.report.bench`.
Each option's type and help is one click decorator below, in the order ``--help`` lists.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console

from tokenplan.api._common import PredictRequest, build_config
from tokenplan.api.bench import BenchRequest, bench, check_output_file, fit_bench, read_bench_json
from tokenplan.cli.app import app
from tokenplan.cli.params import INTEGER, NUMBER, PATH
from tokenplan.client.auth import display_url
from tokenplan.errors import InputError, ServerError, TokenplanError
from tokenplan.report.bench import level_line, show_bench


class OutputLost(TokenplanError):
    """A --save, --plot or -o file could not be written at the end; the results went to stdout."""


@dataclass(frozen=True)
class FitOptions:
    """``--fit``'s options: where the profile goes and the served configuration to fit."""

    out: Path
    config: str
    gpu: str
    num_gpus: int | None
    tp: int
    pp: int
    ep: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    max_running: int | None

    def request(self, measured_gpus: int | None = None) -> PredictRequest:
        """The served configuration; GPUs: ``--num-gpus``, else the bench JSON's, else tp × pp."""
        return PredictRequest(
            model=self.config,
            gpu=self.gpu,
            num_gpus=self.num_gpus or measured_gpus or self.tp * self.pp,
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            engine=self.engine,
            max_running=self.max_running,
        )


@app.command("bench", old_spellings={"--deadline": "--request-timeout"})
@click.option("--endpoint", multiple=True, help="API root, e.g. http://127.0.0.1:8000/v1 (repeat for more).")
@click.option("--model", help="The model name the server serves.")
@click.option("--concurrency", help="Levels, comma-separated [default: 1,4,16,64].")
@click.option("--max-concurrency", help="vllm bench serve's name: the levels; with --request-rate, the most in flight.")
@click.option("--request-rate", help="Open-loop levels in requests/s, comma-separated (inf = all at once).")
@click.option(
    "--burstiness", type=NUMBER, default=1.0, help="Gamma shape of arrival gaps with --request-rate (1 = Poisson)."
)
@click.option("--isl", type=INTEGER, help="Random-prompt input length (tokens) [default: 1024].")
@click.option("--osl", type=INTEGER, help="Output length (tokens); caps dataset answers [default: 256].")
@click.option("--random-input-len", type=INTEGER, help="vllm bench serve's name for --isl.")
@click.option("--random-output-len", type=INTEGER, help="vllm bench serve's name for --osl.")
@click.option("--dataset", help="JSONL or ShareGPT JSON of real prompts.")
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
@click.option("--weight-dtype", default="bf16", help="--fit: the served weight format.")
@click.option("--kv-dtype", default="auto", help="--fit: the KV-cache format (auto: the engine's default).")
@click.option("--engine", default="sglang", help="--fit: the serving engine: sglang, vllm or trtllm.")
@click.option("--max-running", type=INTEGER, help="--fit: the server's running-request cap (default: observed).")
def bench_command(
    endpoint: tuple[str, ...],
    model: str | None,
    concurrency: str | None,
    max_concurrency: str | None,
    request_rate: str | None,
    burstiness: float,
    isl: int | None,
    osl: int | None,
    random_input_len: int | None,
    random_output_len: int | None,
    dataset: str | None,
    dataset_name: str | None,
    dataset_path: str | None,
    num_prompts: int | None,
    duration: float | None,
    warmup: int | None,
    num_gpus: int | None,
    ignore_eos: bool,
    stream: bool,
    metrics: bool,
    api_key_env: str | None,
    deadline: float,
    seed: int,
    json_out: bool,
    save: Path | None,
    plot: Path | None,
    from_json: str | None,
    fit: bool,
    out: Path | None,
    config: str | None,
    gpu: str | None,
    tp: int,
    pp: int,
    ep: int,
    weight_dtype: str,
    kv_dtype: str,
    engine: str,
    max_running: int | None,
) -> None:
    """Measure a live OpenAI-compatible server over a concurrency sweep, a speculating one's τ too (fit the planner to it)."""
    fitting = None
    if fit:
        if out is None or config is None or gpu is None:
            raise InputError("fit", "--fit", "-o PROFILE.json, --config MODEL and --gpu GPU with --fit")
        fitting = FitOptions(
            out,
            config,
            gpu,
            num_gpus,
            tp,
            pp,
            ep,
            weight_dtype,
            kv_dtype,
            engine,
            max_running,
        )
    # Every check that needs no server comes before the sweep, so a typo costs no measurement.
    isl = _same("isl", isl, "random-input-len", random_input_len, 1024)
    osl = _same("osl", osl, "random-output-len", random_output_len, 256)
    dataset = _dataset(dataset, dataset_path, dataset_name)
    levels, rates = _levels(concurrency, max_concurrency, request_rate, from_json is not None)
    _check_outputs(save, plot, fitting)
    if from_json is not None:
        data, stopped = _saved_sweep(from_json, fitting)
    else:
        if fitting is not None:  # a bad --config/--gpu/layout fails now, not after the sweep
            build_config(fitting.request())
        if not endpoint or not model:
            raise InputError("endpoint/model", _shown(endpoint, model), "--endpoint URL and --model NAME")
        result = bench(
            BenchRequest(
                endpoints=tuple(endpoint),
                model=model,
                concurrencies=levels,
                isl=isl,
                osl=osl,
                dataset=dataset,
                num_prompts=num_prompts,
                duration_s=duration,
                warmup_requests=warmup,
                num_gpus=num_gpus,
                ignore_eos=ignore_eos,
                stream=stream,
                deadline_s=deadline,
                seed=seed,
                metrics=metrics,
                api_key_env=api_key_env,
                request_rates=rates,
                burstiness=burstiness,
            ),
            on_level=None if json_out else _progress,
        )
        data, stopped = result.data, result.stopped
    _finish(data, stopped, fitting, save, plot, json_out)


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
        return (() if levels_text is None else _concurrencies(levels_text)), rates
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


def _check_outputs(save: Path | None, plot: Path | None, fitting: FitOptions | None) -> None:
    """Refuse a ``--save``, ``--plot`` or ``--out`` path that cannot be written, before measuring."""
    for option, path, what in (
        ("--save", save, "a JSON file path"),
        ("--plot", plot, "a PNG file path"),
        ("--out", fitting.out if fitting else None, "a profile JSON file path"),
    ):
        if path is not None:
            check_output_file(path, option, what)


def _saved_sweep(path: str, fitting: FitOptions | None) -> tuple[dict, None]:
    """``--from-json``: the saved bench JSON (a bad ``--fit`` configuration fails now)."""
    data = read_bench_json(path).data
    if fitting is not None:
        build_config(fitting.request(data.get("num_gpus")))
    return data, None


def _progress(level: dict) -> None:
    print(level_line(level), file=sys.stderr)


def _finish(
    data: dict, stopped: str | None, fitting: FitOptions | None, save: Path | None, plot: Path | None, json_out: bool
) -> None:
    """Fit (``--fit``), save, plot and print the sweep; then raise what went wrong, if anything:
    a failed fit, a file that could not be written (its content went to stdout instead), a sweep
    that stopped early."""
    failed: list[str] = []  # writes that failed at the end: what they held goes to stdout instead
    wrote_profile, fit_error = False, None
    if fitting is not None and data["levels"]:
        wrote_profile, fit_error = _fit_and_write(data, fitting.request(data.get("num_gpus")), fitting.out, failed)
    _save_outputs(data, save, plot, failed)
    saved = save is not None and not any(f.startswith("--save") for f in failed)
    if any(f.startswith("--out") for f in failed) or (not saved and (fit_error is not None or save is not None)):
        json_out = True  # the measurement (and the fit's profile) printed in full instead of lost
    if json_out:
        print(json.dumps(data, indent=2))
    else:
        show_bench(
            Console(width=None if sys.stdout.isatty() else 170),
            data,
            fitting.out if wrote_profile and fitting is not None else None,
        )
    if fit_error is not None:
        raise fit_error
    if failed:
        printed = "the bench JSON is printed on stdout" if json_out else "the results are printed on stdout"
        raise OutputLost(
            f"could not write {'; '.join(failed)}; {printed}"
            + (f" (sweep stopped early: {stopped})" if stopped is not None else "")
        )
    if stopped is not None:
        raise ServerError(f"sweep stopped: {stopped} ({len(data['levels'])} levels kept)")


def _fit_and_write(
    data: dict, desc: PredictRequest, out: Path, failed: list[str]
) -> tuple[bool, TokenplanError | None]:
    """Fit the planner to the sweep in ``data`` (adds ``data["fit"]``) and write the profile to
    ``out``. Returns (profile written, the fit's error or None): a failed fit keeps the
    measurement, which the caller still saves and prints before it raises."""
    try:
        outcome = fit_bench(data, desc, "tokenplan bench " + " ".join(sys.argv[2:]))
    except TokenplanError as problem:
        return False, problem
    data["fit"] = outcome.data  # holds the profile as well
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return _write(out, json.dumps(outcome.profile, indent=2) + "\n", "--out", failed), None


def _save_outputs(data: dict, save: Path | None, plot: Path | None, failed: list[str]) -> None:
    """Write the bench JSON (``--save``) and the PNG (``--plot``); failures go to ``failed``."""
    if save is not None:
        _write(save, json.dumps(data, indent=2) + "\n", "--save", failed)
    if plot is not None and data["levels"]:
        from tokenplan.report.bench_plot import write_bench_plot

        try:
            write_bench_plot(data, plot)
        except OSError as problem:
            failed.append(f"--plot {str(plot)!r}: {problem.strerror or problem}")


def _write(path: Path, text: str, option: str, failed: list[str]) -> bool:
    """Write ``text`` to ``path``; on failure note it in ``failed`` and return False."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as problem:
        failed.append(f"{option} {str(path)!r}: {problem.strerror or problem}")
        return False
    return True
