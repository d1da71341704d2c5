"""The files ``tokenplan report`` reads: ``tokenplan generate`` run summaries
(``RUN_DIR/summary.json``), a ``tokenplan bench`` JSON and a ``tokenplan plan --json`` file.

Each file is checked once here; a missing run directory or a malformed file is one line
(``RunDirError`` / ``ConfigError``), never a traceback. A plan and a bench file read back into the
types ``plan`` and ``bench`` returned (:class:`~tokenplan.planning.results.PlanResult`,
:class:`~tokenplan.bench_schema.BenchResult`); a run summary into :class:`~tokenplan.run_summary.RunSummary`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from tokenplan.errors import ConfigError, InputError, RunDirError
from tokenplan.files.plan_hint import load_plan_json
from tokenplan.loaders import load_json
from tokenplan.planning.results import PlanResult
from tokenplan.results import BENCH_SCHEMA_VERSION, RUN_SUMMARY_SCHEMA_VERSION, Reading, check_version
from tokenplan.run_summary import RunSummary, check_finished

if TYPE_CHECKING:
    from tokenplan.bench_schema import BenchResult

SUMMARY_KEYS = ("model", "units_total", "stored", "errors", "elapsed_s", "output_tokens", "output_tok_s")
SUMMARY_E2E_KEYS = ("p50_ms", "p99_ms")
BENCH_KEYS = ("model", "num_gpus", "levels")
BENCH_LEVEL_KEYS = ("concurrency", "requests", "errors", "duration_s", "output_tok_s")
BENCH_LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")


def _read_json(path: Path) -> object:
    """Parsed JSON of ``path``. Raises ConfigError (unreadable, not UTF-8, not JSON, a key twice,
    nested past :data:`~tokenplan.loaders.MAX_NESTING`)."""
    return load_json(path)


def _number(value: object) -> bool:
    """A finite int or float: NaN and ±Infinity (which Python's json reads) would reach the page
    as ``nan``/``inf`` text and break its charts' scales."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value: object) -> str:
    """What a value that failed :func:`_number` should have been: NaN/Infinity are numbers JSON
    itself has no room for, so the message says *finite*."""
    return "a finite number" if isinstance(value, float) else "a number"


def _require(obj: object, keys: tuple[str, ...], path: Path, where: str, numbers: tuple[str, ...] = ()) -> dict:
    """``obj`` as a dict holding ``keys``, those in ``numbers`` numeric. Raises ConfigError."""
    if not isinstance(obj, dict):
        raise ConfigError(str(path), where, f"expected a JSON object, got {type(obj).__name__}")
    for key in keys:
        if key not in obj:
            raise ConfigError(str(path), f"{where}.{key}" if where != "top level" else key, "missing")
    for key in numbers:
        if not _number(obj[key]):
            raise ConfigError(
                str(path),
                f"{where}.{key}" if where != "top level" else key,
                f"expected {_kind(obj[key])}, got {obj[key]!r}",
            )
    return obj


def _numbers_or_null(obj: dict, keys: tuple[str, ...], path: Path, where: str) -> None:
    """Each of ``keys`` present in ``obj`` is a number or null. Raises ConfigError naming it."""
    for key in keys:
        if key in obj and obj[key] is not None and not _number(obj[key]):
            raise ConfigError(
                str(path),
                f"{where}.{key}" if where != "top level" else key,
                f"expected {_kind(obj[key])}, got {obj[key]!r}",
            )


def _texts(obj: dict, keys: tuple[str, ...], path: Path) -> None:
    """Each of ``keys`` in the top-level object ``obj`` is a string. Raises ConfigError naming it."""
    for key in keys:
        if not isinstance(obj[key], str):
            raise ConfigError(str(path), key, f"expected text, got {obj[key]!r}")


def load_run_summary(run_dir: str | Path) -> RunSummary:
    """``RUN_DIR/summary.json`` of a ``tokenplan generate`` run as :class:`~tokenplan.run_summary.
    RunSummary`, with ``run_dir`` set.

    Raises:
        RunDirError: the directory or its summary.json does not exist.
        ConfigError: summary.json is not JSON or lacks a key the report draws.
    """
    folder = Path(run_dir)
    if not folder.is_dir():
        raise RunDirError(f"{folder}: no such run directory")
    path = folder / "summary.json"
    if not path.is_file():
        raise RunDirError(f"{folder}: no summary.json (has `tokenplan generate` finished a run there?)")
    raw = _read_json(path)
    check_finished(raw, str(path))  # RunDirError: a run still going, or killed, left its rolling form
    data = _require(raw, SUMMARY_KEYS, path, "top level", numbers=SUMMARY_KEYS[1:])
    check_version(data, RUN_SUMMARY_SCHEMA_VERSION, Reading(str(path)))
    _texts(data, ("model",), path)
    _numbers_or_null(data, ("plan_output_tok_s",), path, "top level")
    e2e = data.get("latency_e2e")
    if e2e is not None:  # drawn as E2E p50 / p99
        _require(e2e, SUMMARY_E2E_KEYS, path, "latency_e2e", numbers=SUMMARY_E2E_KEYS)
    return RunSummary.from_json({**data, "run_dir": str(folder)}, str(path))


def _bench_object(data: object, path: Path) -> dict:
    """``data`` where it has a ``levels`` list; else one ConfigError saying what a bench file holds
    (a plan or run JSON given for one was answered by the first key it lacks, ``num_gpus: missing``)."""
    if not isinstance(data, dict) or not isinstance(data.get("levels"), list):
        raise ConfigError(str(path), "levels", "expected the bench JSON with a 'levels' list")
    return data


def load_bench(path: str | Path) -> BenchResult:
    """A ``tokenplan bench`` JSON file read back into the :class:`~tokenplan.bench_schema.BenchResult`
    the sweep returned (levels with concurrency, tok/s and latency distributions in seconds), after
    :func:`load_bench_json`'s checks. Raises ConfigError (naming the key's path, the value and what
    is allowed)."""
    from tokenplan.bench_schema import BenchResult  # here: plan's start-up reads no bench file

    return BenchResult.from_json(load_bench_json(path), str(path))


def load_bench_json(path: str | Path) -> dict:
    """A ``tokenplan bench`` JSON file's object, checked: the keys the report draws present, figures
    finite numbers or null. Raises ConfigError."""
    p = Path(path)
    data = _require(_bench_object(_read_json(p), p), BENCH_KEYS, p, "top level")
    check_version(data, BENCH_SCHEMA_VERSION, Reading(str(p)))
    _texts(data, ("model",), p)
    endpoints = data.get("endpoints", [])
    if not (isinstance(endpoints, list) and all(isinstance(e, str) for e in endpoints)):
        raise ConfigError(str(p), "endpoints", f"expected a list of endpoint URLs, got {endpoints!r}")
    # bench writes num_gpus null when --num-gpus was not given: the report then counts per endpoint
    n = data["num_gpus"]
    if n is not None and not (_number(n) and n >= 1):
        raise ConfigError(str(p), "num_gpus", f"expected a number (a GPU count ≥ 1) or null, got {n!r}")
    cap = data.get("cap")  # the running cap the sweep saw, which a fit takes as the server's
    running = cap.get("max_running_requests") if isinstance(cap, dict) else None
    if running is not None and not (_number(running) and running >= 0):
        raise ConfigError(
            str(p), "cap.max_running_requests", f"{running!r} is not allowed (allowed: a count ≥ 0, or null)"
        )
    if not isinstance(data["levels"], list) or not data["levels"]:
        raise ConfigError(str(p), "levels", "expected a non-empty list of concurrency levels")
    for i, level in enumerate(data["levels"]):
        _require(level, BENCH_LEVEL_KEYS, p, f"levels[{i}]", numbers=BENCH_LEVEL_KEYS)
        _numbers_or_null(level, ("achieved_concurrency", "total_tok_s", "request_throughput_per_s"), p, f"levels[{i}]")
        for metric in BENCH_LATENCIES:
            dist = level.get(metric)
            if dist is not None and not isinstance(dist, dict):
                raise ConfigError(str(p), f"levels[{i}].{metric}", f"expected an object of quantiles, got {dist!r}")
            _numbers_or_null(dist or {}, tuple(dist or ()), p, f"levels[{i}].{metric}")
    from tokenplan.files.bench_results import check_measured

    for n, level in enumerate(data.get("levels") or ()):  # as calibrate --from-bench: no negative figure
        if isinstance(level, dict):
            check_measured(level, str(p), f"levels[{n}]", latencies=False)  # latencies: checked above
            _check_rate(level, str(p), f"levels[{n}]")
    return data


def _check_rate(level: dict, path: str, where: str) -> None:
    """Refuse a level whose ``output_tok_s`` is not its ``output_tokens / duration_s`` (as
    ``bench.levels.level_dict`` writes it) within 1 %: a break-it pass fitted a level of 0 tok/s
    that said 2,048 tokens in 20.8 s (ConfigError naming the field and what it should be)."""
    rate, tokens, duration = level.get("output_tok_s"), level.get("output_tokens"), level.get("duration_s")
    numbers = [v for v in (rate, tokens, duration) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) < 3 or not duration or not level.get("requests"):
        return
    expected = tokens / duration
    if abs(rate - expected) > 0.01 * expected + 1e-9:
        raise ConfigError(
            path,
            f"{where}.output_tok_s",
            f"{rate!r} is not allowed (allowed: output_tokens / duration_s = {tokens:g} / {duration:g} = {expected:,.4g})",
        )


def load_saved_bench(path: str | Path) -> dict:
    """A ``tokenplan bench --save`` file for ``bench --from-json``: :func:`load_bench`'s checks,
    then every figure the terminal table prints (:func:`~tokenplan.files.shapes.check_bench_shape`).
    Raises ConfigError."""
    # Imported here: its pydantic models are built on import, and plan's start-up needs none of them.
    from tokenplan.bench_schema import BenchResult
    from tokenplan.files.shapes import check_bench_shape

    data = load_bench_json(path)
    check_bench_shape(data, str(path))
    BenchResult.from_json(data, str(path))  # and every key where its types put it
    return data


def read_bench_file(path: str) -> dict:
    """A bench ``--json`` file as the sweep that wrote it returned it (``bench --from-json``): a
    ``levels`` list, the bench's ``schema_version``, and where it has levels, every figure the
    table prints (:func:`load_saved_bench`; a sweep stopped before a level has none).

    Raises:
        InputError: the file is missing.
        ConfigError: not a bench JSON (not JSON, no ``levels`` list, another ``schema_version``).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("bench file", path, "an existing JSON file written by tokenplan bench --json")
    data = _bench_object(load_json(p), p)  # ConfigError: not UTF-8, not JSON, a key twice, nested too deep
    check_version(data, BENCH_SCHEMA_VERSION, Reading(path))
    if data["levels"]:
        load_saved_bench(path)
    return data


def load_plan(path: str | Path) -> PlanResult:
    """A ``tokenplan plan --json`` file, read back into the :class:`PlanResult` ``plan`` returned:
    every key its types declare, each a value of its field's type (figures finite numbers).

    Raises:
        ConfigError: unreadable, not JSON, no plan (neither ``job`` nor ``options``, or no option), another
            ``schema_version``, a key missing or holding a value its field does not allow (named by
            its path, e.g. ``options[0].usd_interval.low``).
    """
    p = Path(path)
    data = load_plan_json(p)
    if isinstance(data, dict) and not {"job", "options"} & data.keys():  # a bench or run file given as --plan
        raise ConfigError(
            str(p), "file", "not the output of `tokenplan plan --json` (it has no 'job' and no 'options')"
        )
    plan = PlanResult.from_json(data, str(p))
    if not plan.options:  # `plan` searches at least one option; a hand-edited file may hold none
        raise ConfigError(
            str(p),
            "options",
            "[] is not allowed (allowed: one or more options, as `tokenplan plan --json` writes them)",
        )
    return plan
