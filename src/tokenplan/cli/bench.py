"""``tokenplan bench --endpoint URL --model NAME``: measure a live server over a concurrency sweep;
``--fit -o PROFILE.json`` fits the planner's efficiency factors to it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from tokenplan.api import PredictRequest, build_config
from tokenplan.api_bench import BenchRequest, bench, fit_bench, read_bench_json
from tokenplan.cli.app import app
from tokenplan.errors import InputError, ServerError, TokenplanError
from tokenplan.api_bench import check_output_file


class OutputLost(TokenplanError):
    """A --save, --plot or -o file could not be written at the end; the results went to stdout."""


def _ms(d: dict, key: str) -> str:
    v = d.get(key)
    return "–" if v is None else f"{v * 1e3:.1f}"


def bench_table(data: dict) -> Table:
    """The levels as a rich table (latencies in ms, throughput in tokens/s)."""
    t = Table(title=f"{data['model']} · {', '.join(data['endpoints'])}")
    cols = ("conc", "achieved", "reqs", "err", "req/s", "out tok/s", "total tok/s", "server tok/s",
            "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "ITL p50 ms", "E2E p50 s", "running", "waiting", "KV max")
    for c in cols:
        t.add_column(c, justify="right")
    for lv in data["levels"]:
        s = lv.get("server") or {}
        fmt = lambda v, spec: "–" if v is None else format(v, spec)  # noqa: E731
        t.add_row(str(lv["concurrency"]), f"{lv['achieved_concurrency']:.1f}", str(lv["requests"]), str(lv["errors"]),
                  f"{lv['request_throughput_per_s']:.2f}", fmt(lv["output_tok_s"], ",.0f"), fmt(lv["total_tok_s"], ",.0f"),
                  fmt(s.get("output_tok_s"), ",.0f"), _ms(lv["ttft_s"], "p50"), _ms(lv["ttft_s"], "p99"),
                  _ms(lv["tpot_s"], "p50"), _ms(lv["itl_s"], "p50"), fmt(lv["e2e_s"]["p50"], ".2f"),
                  fmt(s.get("running_mean"), ".1f"), fmt(s.get("waiting_mean"), ".1f"),
                  "–" if s.get("kv_usage_max") is None else f"{s['kv_usage_max'] * 100:.0f}%")
    return t


def fit_table(fit: dict) -> Table:
    """Fitted factors, then per level predicted vs measured TPOT and output tok/s per GPU."""
    t = Table(title="fit: efficiency factors" + ("" if fit["converged"] else " (not converged)"))
    for c in ("factor", "value", "± 1σ", "note"):
        t.add_column(c, justify="left" if c in ("factor", "note") else "right")
    for name, f in fit["factors"].items():
        unc = f["uncertainty"]
        t.add_row(name, f"{f['value']:.4g}", "–" if unc is None else f"{unc:.2g}",
                  "at bound" if name in fit["at_bound"] else "")
    return t


def fit_levels_table(fit: dict) -> Table:
    t = Table(title="fit: predicted vs measured per level")
    for c in ("conc", "batch", "TPOT ms pred", "TPOT ms meas", "out tok/s/GPU pred", "out tok/s/GPU meas"):
        t.add_column(c, justify="right")
    for lv in fit["levels"]:
        meas_tpot = lv["measured_tpot_s"]
        t.add_row(f"{lv['concurrency']:g}", f"{lv['batch']:g}", f"{lv['predicted_tpot_s'] * 1e3:.2f}",
                  "–" if meas_tpot is None else f"{meas_tpot * 1e3:.2f}",
                  f"{lv['predicted_output_tok_s_per_gpu']:,.1f}", f"{lv['measured_output_tok_s_per_gpu']:,.1f}")
    return t


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


def cap_text(data: dict) -> str | None:
    """The ``cap:`` line: where throughput flattens, the queue grows and the most requests the
    server ran — "not reached in this sweep" where the sweep did not get there (and "not
    measured" for the queue and running count without /metrics). None when no cap was seen."""
    cap = data.get("cap") or {}
    if not cap.get("source"):
        return None
    metrics = (data.get("server") or {}).get("metrics", True)
    unseen = "not reached in this sweep" if metrics else "not measured (no /metrics)"
    flat, queue, running = (cap.get("flattens_at_concurrency"), cap.get("queue_grows_at_concurrency"),
                            cap.get("max_running_requests"))
    parts = [f"throughput flattens at concurrency {flat}" if flat is not None
             else "throughput flattening not reached in this sweep",
             f"queue grows at {queue}" if queue is not None else f"queue growth {unseen}",
             f"server runs at most {running}" if running is not None else f"running-request limit {unseen}"]
    return f"cap: {', '.join(parts)} (from {cap['source']})"


def _progress(level: dict) -> None:
    tok_s = "– (not measured)" if level["output_tok_s"] is None else f"{level['output_tok_s']:,.0f}"
    print(f"concurrency {level['concurrency']}: {tok_s} output tok/s, "
          f"{level['requests']} requests, {level['errors']} errors", file=sys.stderr)


@app.command("bench")
def bench_command(
    endpoint: Annotated[Optional[list[str]], typer.Option("--endpoint", help="API root, e.g. http://127.0.0.1:8000/v1 (repeat for more).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="The model name the server serves.")] = None,
    concurrency: Annotated[Optional[str], typer.Option("--concurrency", help="Levels, comma-separated [default: 1,4,16,64].")] = None,
    max_concurrency: Annotated[Optional[str], typer.Option("--max-concurrency", help="vllm bench serve's name: the levels; with --request-rate, the most in flight.")] = None,
    request_rate: Annotated[Optional[str], typer.Option("--request-rate", help="Open-loop levels in requests/s, comma-separated (inf = all at once).")] = None,
    burstiness: Annotated[float, typer.Option("--burstiness", help="Gamma shape of arrival gaps with --request-rate (1 = Poisson).")] = 1.0,
    isl: Annotated[Optional[int], typer.Option("--isl", help="Random-prompt input length (tokens) [default: 1024].")] = None,
    osl: Annotated[Optional[int], typer.Option("--osl", help="Output length (tokens); caps dataset answers [default: 256].")] = None,
    random_input_len: Annotated[Optional[int], typer.Option("--random-input-len", help="vllm bench serve's name for --isl.")] = None,
    random_output_len: Annotated[Optional[int], typer.Option("--random-output-len", help="vllm bench serve's name for --osl.")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", help="JSONL or ShareGPT JSON of real prompts.")] = None,
    dataset_name: Annotated[Optional[str], typer.Option("--dataset-name", help="random | sharegpt (with --dataset-path).")] = None,
    dataset_path: Annotated[Optional[str], typer.Option("--dataset-path", help="vllm bench serve's name for --dataset.")] = None,
    num_prompts: Annotated[Optional[int], typer.Option("--num-prompts", help="Measured requests per level (default 4×C, ≥ 16).")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="Measured seconds per level instead.")] = None,
    warmup: Annotated[Optional[int], typer.Option("--warmup", help="Warm-up requests per level (default min(C, 32)).")] = None,
    num_gpus: Annotated[Optional[int], typer.Option("--num-gpus", help="GPUs behind the endpoints.")] = None,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", help="Ask for exact output lengths.")] = True,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream (needed for TTFT/ITL).")] = True,
    metrics: Annotated[bool, typer.Option("--metrics/--no-metrics", help="Read the servers' /metrics.")] = True,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable holding the API key "
                                                       "(must be set when named) [default: OPENAI_API_KEY if set].")] = None,
    deadline: Annotated[float, typer.Option("--request-timeout", help="Limit on one request in seconds.")] = 600.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random prompts and lengths.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the bench JSON.")] = False,
    save: Annotated[Optional[Path], typer.Option("--save", help="Write the bench JSON to this file.")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the PNG plot to this file.")] = None,
    from_json: Annotated[Optional[str], typer.Option("--from-json", help="Use a saved bench JSON instead of measuring.")] = None,
    fit: Annotated[bool, typer.Option("--fit", help="Fit the efficiency factors to the sweep.")] = False,
    out: Annotated[Optional[Path], typer.Option("-o", "--out", help="Where --fit writes the calibration profile.")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="--fit: catalog model name or config.json path.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="--fit: catalog GPU key.")] = None,
    tp: Annotated[int, typer.Option("--tp", help="--fit: tensor-parallel GPUs per replica (TP).")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="--fit: pipeline stages per replica (PP).")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="--fit: expert-parallel GPUs (EP, MoE).")] = 1,
    weight_dtype: Annotated[str, typer.Option("--weight-dtype", help="--fit: the served weight format.")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="--fit: the KV-cache format (auto: the engine's default).")] = "auto",
    engine: Annotated[str, typer.Option("--engine", help="--fit: the serving engine: sglang, vllm or trtllm.")] = "sglang",
    max_running: Annotated[Optional[int], typer.Option("--max-running", help="--fit: the server's running-request cap (default: observed).")] = None,
) -> None:
    """Measure a live OpenAI-compatible server over a concurrency sweep (and fit the planner to it)."""
    if fit and (out is None or config is None or gpu is None):
        raise InputError("fit", "--fit", "-o PROFILE.json, --config MODEL and --gpu GPU with --fit")
    # Every check that needs no server comes before the sweep, so a typo costs no measurement.
    isl = _same("isl", isl, "random-input-len", random_input_len, 1024)
    osl = _same("osl", osl, "random-output-len", random_output_len, 256)
    dataset = _dataset(dataset, dataset_path, dataset_name)
    levels_text = _same("concurrency", concurrency, "max-concurrency", max_concurrency, None)
    rates = None if request_rate is None else _rates(request_rate)
    if from_json is not None:
        levels = None
    elif rates is not None:
        levels = () if levels_text is None else _concurrencies(levels_text)
    else:
        levels = _concurrencies(levels_text or "1,4,16,64")
    for option, path, what in (("--save", save, "a JSON file path"), ("--plot", plot, "a PNG file path"),
                               ("--out", out if fit else None, "a profile JSON file path")):
        if path is not None:
            check_output_file(path, option, what)
    stopped = None
    if from_json is not None:
        data = read_bench_json(from_json).data
        if fit:
            build_config(_fit_description(config, gpu, num_gpus or data.get("num_gpus") or tp * pp, tp, pp, ep,
                                          weight_dtype, kv_dtype, engine, max_running))
    else:
        if fit:  # a bad --config/--gpu/layout fails now, not after the sweep
            build_config(_fit_description(config, gpu, num_gpus or tp * pp, tp, pp, ep, weight_dtype, kv_dtype,
                                          engine, max_running))
        if not endpoint or not model:
            raise InputError("endpoint/model", f"{endpoint}/{model}", "--endpoint URL and --model NAME")
        request = BenchRequest(endpoints=tuple(endpoint), model=model, concurrencies=levels, isl=isl, osl=osl,
                               dataset=dataset, num_prompts=num_prompts, duration_s=duration,
                               warmup_requests=warmup, num_gpus=num_gpus, ignore_eos=ignore_eos, stream=stream,
                               deadline_s=deadline, seed=seed, metrics=metrics, api_key_env=api_key_env,
                               request_rates=rates, burstiness=burstiness)
        result = bench(request, on_level=None if json_out else _progress)
        data, stopped = result.data, result.stopped
    failed: list[str] = []  # writes that failed at the end: what they held goes to stdout instead
    wrote_profile, fit_error = False, None
    if fit and data["levels"]:
        desc = _fit_description(config, gpu, num_gpus or data.get("num_gpus") or tp * pp, tp, pp, ep,
                                weight_dtype, kv_dtype, engine, max_running)
        wrote_profile, fit_error = _fit_and_write(data, desc, out, failed)
    _save_outputs(data, save, plot, failed)
    saved = save is not None and not any(f.startswith("--save") for f in failed)
    if any(f.startswith("--out") for f in failed) or (not saved and (fit_error is not None or save is not None)):
        json_out = True  # the measurement (and the fit's profile) printed in full instead of lost
    if json_out:
        print(json.dumps(data, indent=2))
    else:
        _print_tables(data, out if wrote_profile else None)
    if fit_error is not None:
        raise fit_error
    if failed:
        printed = "the bench JSON is printed on stdout" if json_out else "the results are printed on stdout"
        raise OutputLost(f"could not write {'; '.join(failed)}; {printed}"
                         + (f" (sweep stopped early: {stopped})" if stopped is not None else ""))
    if stopped is not None:
        raise ServerError(f"sweep stopped: {stopped} ({len(data['levels'])} levels kept)")


def _fit_description(config: str, gpu: str, num_gpus: int, tp: int, pp: int, ep: int, weight_dtype: str,
                     kv_dtype: str, engine: str, max_running: int | None) -> PredictRequest:
    return PredictRequest(model=config, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, ep=ep, weight_dtype=weight_dtype,
                          kv_dtype=kv_dtype, engine=engine, max_running=max_running)


def _fit_and_write(data: dict, desc: PredictRequest, out: Path, failed: list[str]) -> tuple[bool, TokenplanError | None]:
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
    return _write(out, outcome.profile_json(), "--out", failed), None


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


def _print_tables(data: dict, wrote_profile: Path | None) -> None:
    """The sweep table, the detected cap, notes and, after ``--fit``, the fit's tables."""
    console = Console(width=None if sys.stdout.isatty() else 170)
    console.print(bench_table(data))
    cap = cap_text(data)
    if cap is not None:
        console.print(cap, markup=False)
    for note in data.get("notes") or ():
        console.print(f"note: {note}", markup=False)
    if "fit" in data:
        console.print(fit_table(data["fit"]))
        console.print(fit_levels_table(data["fit"]))
        if wrote_profile is not None:
            console.print(f"wrote {wrote_profile}", markup=False)


def _write(path: Path, text: str, option: str, failed: list[str]) -> bool:
    """Write ``text`` to ``path``; on failure note it in ``failed`` and return False."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as problem:
        failed.append(f"{option} {str(path)!r}: {problem.strerror or problem}")
        return False
    return True
