"""The bench API: measure a live server (``tokenplan bench``), fit the planner to the measurement
(``--fit``), and fit it to other tools' result files or a finished generate run (``tokenplan
calibrate --from-bench``/``--from-run``).

Request in, typed result out (:class:`~tokenplan.bench.result.BenchOutcome`,
:class:`~tokenplan.calibration.run_profile.FitOutcome`, each with ``to_json()``). The work lives on
the floors below: the sweep in :mod:`tokenplan.bench.measure`, a run directory's figures in
:mod:`tokenplan.runner.store.summary`, the fits in :mod:`tokenplan.calibration.bench_fit`, the
files written after a sweep in :mod:`tokenplan.files.bench_outputs`. Here the names are resolved: a
level (or a run) becomes a :class:`~tokenplan.measurement.Measurement`, resolved to a
:class:`~tokenplan.calibration.validate.Case` with the same ``api.resolve.resolve`` as
``tokenplan predict``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenplan.api.resolve import PredictRequest, check_server_description, read_profile, resolve
from tokenplan.bench.measure import check_ask, measure
from tokenplan.bench.result import BenchOutcome
from tokenplan.bench_schema import FitSourceFile
from tokenplan.calibration.bands import model_family
from tokenplan.calibration.bench_fit import RunTotals, Served, fit_served, fit_sweep, sweep_cap
from tokenplan.calibration.bench_fit import run_measurement as measure_run
from tokenplan.calibration.run_profile import FitOutcome
from tokenplan.calibration.validate import Case
from tokenplan.client.auth import api_key_from_env
from tokenplan.errors import CatalogError, ConfigError, InputError, import_extra
from tokenplan.files.bench_outputs import Finished, failed_requests, finish_bench
from tokenplan.files.reports import read_bench_file
from tokenplan.job.workload import LengthDist
from tokenplan.measurement import Measurement
from tokenplan.runner.blocking import run_blocking
from tokenplan.runner.limits import MAX_CONCURRENCY  # bench's per-level bound is generate's
from tokenplan.runner.paths import check_output_file
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
    check_ask(req, MAX_CONCURRENCY)
    if req.api_key is None:
        req = replace(req, api_key=api_key_from_env(req.api_key_env))
    return await measure(req, on_level)


# ---------------------------------------------------------------------------------------------
# Fitting: the fits are calibration's (:mod:`tokenplan.calibration.bench_fit`); here the names
# are resolved and the files read.


def _served(desc: PredictRequest) -> Served:
    return Served(**{f.name: getattr(desc, f.name) for f in dataclasses.fields(Served)})


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


def fit_bench(
    data: dict,
    desc: PredictRequest,
    command: str = "tokenplan bench --fit",
    sources: tuple[FitSourceFile, ...] | None = None,
) -> FitOutcome:
    """Fit the efficiency factors to a bench result (:func:`~tokenplan.calibration.bench_fit.fit_sweep`).

    ``desc`` describes what the server runs (model config, GPU, GPUs, layout, dtypes, engine);
    its ``max_running`` defaults to the running-request cap the sweep observed.

    Raises:
        InputError, CatalogError, ConfigError: a bad description, or no level to fit.
    """
    check_server_description(desc)
    desc = replace(desc, max_running=sweep_cap(desc.max_running, data.get("cap")))
    shipped = read_profile(None).table.resolve
    # A level that lost requests measured fewer than it sent (tok/s over the answered ones only,
    # a server in trouble): it is left out, and said so; a sweep with nothing else is refused.
    complete = [lv for lv in data["levels"] if not lv.get("errors")]
    lost = failed_requests(data["levels"])
    if lost is not None and not complete:
        raise InputError("bench levels", lost, "at least one level whose requests were all answered")
    outcome = fit_sweep(
        complete, _served(desc), lambda m: _level_case(desc, m), shipped, ("bench sweep", command, sources)
    )
    if lost is not None:
        outcome.warnings.insert(0, f"left out of the fit: {lost}")
    return outcome


def calibrate_from_results(
    paths: list[str], desc: PredictRequest, command: str = "tokenplan calibrate --from-bench", gpus_stated: bool = True
) -> FitOutcome:
    """Fit the efficiency factors to result files of ``tokenplan bench --save``, ``vllm bench
    serve``, ``sglang.bench_serving``, AIPerf or GuideLLM (:mod:`tokenplan.files.bench_results`);
    ``desc`` says what the server ran. A tokenplan bench file also gives, as ``bench --from-json
    FILE --fit`` takes them, the running cap it observed and its GPUs unless ``gpus_stated`` (the
    first such file's). The result's ``data["sources"]`` names each file's format and level count.

    Raises:
        InputError, ConfigError, CatalogError: a missing or unknown file, a bad description.
    """
    from tokenplan.files.bench_results import read_bench_source

    check_server_description(desc)
    levels, sources = [], []
    sweep: dict[str, Any] = {}
    for path in paths:
        kind, found, stated = read_bench_source(path)
        levels += found
        sweep = sweep or stated
        sources.append(FitSourceFile(path=path, format=kind, levels=len(found)))
    if not gpus_stated and sweep.get("num_gpus"):
        desc = replace(desc, num_gpus=int(sweep["num_gpus"]))
    return fit_bench({"levels": levels, "cap": sweep.get("cap") or {}}, desc, command, tuple(sources))


def read_bench_json(path: str) -> BenchOutcome:
    """A bench ``--json`` file, as the sweep that wrote it returned it
    (:func:`~tokenplan.files.reports.read_bench_file`: InputError, ConfigError)."""
    data = read_bench_file(path)
    return BenchOutcome(data, data.get("stopped"), list(data.get("notes") or ()))


def run_measurement(run_dir: str, desc: PredictRequest) -> Measurement:
    """The one measured point of a generate run (:func:`~tokenplan.calibration.bench_fit.run_measurement`):
    ``summary.json``'s totals at ``desc.concurrency`` requests in flight (None: the run's own
    ``requests_in_flight``, concurrency per endpoint × endpoints, where it states one), prompts of
    ``desc.isl`` tokens if given as > 0, else the records' ``usage.prompt_tokens``.

    Raises:
        InputError: not a run directory, no concurrency, or no prompt length.
        ConfigError: a malformed summary.json or manifest.json.
    """
    path = Path(run_dir)
    run = read_run_summary(path)
    given = desc.isl if desc.isl and desc.isl > 0 else None
    concurrency = desc.concurrency if desc.concurrency is not None else run.requests_in_flight
    prompts = None if given is not None or concurrency is None else mean_prompt_tokens(path)
    where = str(path / "summary.json")
    totals = RunTotals(
        f"{path.name}:{run.model}", where, run.requests, run.output_tokens, run.output_tok_s, run.ttft_mean_ms, prompts
    )
    return measure_run(totals, _served(desc), concurrency, given)


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
    desc = replace(desc, isl=m.isl_tokens, osl=m.osl_tokens)
    shipped = read_profile(None).table.resolve
    return fit_served([m], _served(desc), lambda m: _level_case(desc, m), shipped, ("generate run", command, None), [])


# ---------------------------------------------------------------------------------------------
# After the sweep: ``--fit``'s served configuration, the output files checked before measuring
# and written after (:mod:`tokenplan.files.bench_outputs`).


@dataclass(frozen=True)
class FitTarget:
    """``--fit``'s options: where the profile goes (``out``), the served configuration and its GPUs
    (``num_gpus``; None: the bench JSON's, else tp × pp)."""

    out: Path
    served: PredictRequest
    num_gpus: int | None = None

    def request(self, measured_gpus: int | None = None) -> PredictRequest:
        """The served configuration with its GPUs: ``--num-gpus``, else the bench JSON's, else tp × pp."""
        return replace(self.served, num_gpus=self.num_gpus or measured_gpus or self.served.tp * self.served.pp)

    def check(self, measured_gpus: int | None = None) -> None:
        """Resolve the served configuration now, so a bad --config/--gpu/layout fails before the sweep
        (InputError, CatalogError, ConfigError), named as bench spells the option: ``--config``
        (``--model`` is the served model's name there; a new-user pass was told "--model
        '/path/cfg' is not allowed" for a --config it had given)."""
        req = self.request(measured_gpus)
        try:
            resolve(req)
        except CatalogError as exc:
            if exc.field != "model":
                raise
            raise CatalogError("config", str(exc.value), exc.known, exc.suggestions) from None
        except ConfigError as exc:
            if exc.path != req.model and Path(exc.path).parent != Path(req.model):
                raise
            raise ConfigError(f"--config {exc.path}", exc.key, exc.problem) from None
        except InputError as exc:
            if exc.field != "model":
                raise
            raise InputError("config", exc.value, exc.allowed) from None


def check_outputs(save: Path | None, plot: Path | None, fitting: FitTarget | None) -> None:
    """Refuse a ``--save``, ``--plot`` or ``--out`` path that cannot be written, and a ``--plot``
    or ``--fit`` whose optional extra is not installed, before measuring (InputError: a path in a
    missing folder, a folder, or one that cannot be written; MissingExtraError: matplotlib for the
    plot, scipy and numpy for the fit, named with the extra that installs them)."""
    if plot is not None:
        import_extra("matplotlib", "report")  # report/bench_plot.py draws with it
        _check_plot_format(plot)
    if fitting is not None:
        import_extra("numpy", "calibrate")  # calibration/fit.py and from_runs.py fit with both
        import_extra("scipy.optimize", "calibrate")
    out = fitting.out if fitting else None
    for option, path, what in (
        ("--save", save, "a JSON file path"),
        ("--plot", plot, "a PNG file path"),
        ("--out", out, "a profile JSON file path"),
    ):
        if path is not None:
            check_output_file(path, option, what)


def _check_plot_format(plot: Path) -> None:
    """Refuse a ``--plot`` name whose suffix matplotlib writes no format for (``bench.txt`` ran the
    whole sweep, then ended in matplotlib's ValueError and a traceback; a new-user pass); a name
    without a suffix is written as PNG, matplotlib's default."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = plot.suffix.lower().lstrip(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise InputError(
            "plot", str(plot), f"a .png file, or another format matplotlib writes: {', '.join(sorted(formats))}"
        )


def finish(
    data: dict[str, Any],
    fitting: FitTarget | None,
    save: Path | None,
    plot: Path | None,
    command: str,
    draw: Callable[[dict[str, Any], Path], None],
) -> Finished:
    """Fit the sweep (with ``fitting``: :func:`fit_bench` by ``command``), save and plot it
    (:func:`~tokenplan.files.bench_outputs.finish_bench`: nothing raises, failures are kept)."""

    def fit(data: dict[str, Any]) -> FitOutcome:
        assert fitting is not None  # finish_bench fits only with an --out
        return fit_bench(data, fitting.request(data.get("num_gpus")), command)

    return finish_bench(data, fitting.out if fitting else None, save, plot, fit, draw)
