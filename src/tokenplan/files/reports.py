"""The files ``tokenplan report`` reads: ``tokenplan generate`` run summaries
(``RUN_DIR/summary.json``), a ``tokenplan bench`` JSON and a ``tokenplan plan --json`` file.

Each file is checked once here, for the keys the report draws; a missing run directory or a
malformed file is one line (``RunDirError`` / ``ConfigError``), never a traceback. Each loader
returns the file's JSON object (checked), as the report draws it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenplan.errors import ConfigError, RunDirError

SUMMARY_KEYS = ("model", "units_total", "stored", "errors", "elapsed_s", "output_tokens", "output_tok_s")
BENCH_KEYS = ("model", "num_gpus", "levels")
BENCH_LEVEL_KEYS = ("concurrency", "requests", "errors", "duration_s", "output_tok_s")
PLAN_KEYS = ("model", "engine", "job", "options")


def _read_json(path: Path) -> object:
    """Parsed JSON of ``path``. Raises ConfigError (unreadable or not JSON)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), "file", f"cannot be read ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require(obj: object, keys: tuple[str, ...], path: Path, where: str,
             numbers: tuple[str, ...] = ()) -> dict:
    """``obj`` as a dict holding ``keys``, those in ``numbers`` numeric. Raises ConfigError."""
    if not isinstance(obj, dict):
        raise ConfigError(str(path), where, f"expected a JSON object, got {type(obj).__name__}")
    for key in keys:
        if key not in obj:
            raise ConfigError(str(path), f"{where}.{key}" if where != "top level" else key, "missing")
    for key in numbers:
        if not _number(obj[key]):
            raise ConfigError(str(path), f"{where}.{key}" if where != "top level" else key,
                              f"expected a number, got {obj[key]!r}")
    return obj


def load_run_summary(run_dir: str | Path) -> dict:
    """``RUN_DIR/summary.json`` of a ``tokenplan generate`` run, with ``run_dir`` added.

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
    data = _require(_read_json(path), SUMMARY_KEYS, path, "top level",
                    numbers=SUMMARY_KEYS[1:])
    return {**data, "run_dir": str(folder)}


def load_bench(path: str | Path) -> dict:
    """A ``tokenplan bench`` JSON file (levels with concurrency, tok/s and latency
    distributions in seconds). Raises ConfigError."""
    p = Path(path)
    data = _require(_read_json(p), BENCH_KEYS, p, "top level", numbers=("num_gpus",))
    if not isinstance(data["levels"], list) or not data["levels"]:
        raise ConfigError(str(p), "levels", "expected a non-empty list of concurrency levels")
    for i, level in enumerate(data["levels"]):
        _require(level, BENCH_LEVEL_KEYS, p, f"levels[{i}]", numbers=BENCH_LEVEL_KEYS)
    if not data["num_gpus"] >= 1:
        raise ConfigError(str(p), "num_gpus", f"expected a GPU count ≥ 1, got {data['num_gpus']!r}")
    return data


def load_plan(path: str | Path) -> dict:
    """A ``tokenplan plan --json`` file. Raises ConfigError."""
    p = Path(path)
    data = _require(_read_json(p), PLAN_KEYS, p, "top level")
    if not isinstance(data["options"], list):
        raise ConfigError(str(p), "options", "expected a list of hardware options")
    for i, option in enumerate(data["options"]):
        _require(option, ("option", "rejected"), p, f"options[{i}]")
    return data
