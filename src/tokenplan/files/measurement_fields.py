"""Cell readers for the measurement CSVs (:mod:`tokenplan.files.measurements`): numbers, flags,
trust, the speculative-decoding text and the columns that describe the job as it was run.

Each reader takes one parsed CSV record (column → text) and raises :class:`RowError` with a
one-line message naming the column, the value and what is allowed; the file reader turns that
into a skipped row with its line number.

Job columns (issue 28, point 6; the data README says which rows fill them, from their sources):
``num_requests`` (requests in the whole run), ``length_distribution`` (``fixed``, ``uniform:F``
for lengths drawn uniformly from ``[F·L, L]`` as InferenceX draws them, or the name of a prompt
set such as ``sharegpt``), ``max_running`` (the launch's running-request cap), ``memory_fraction``
(the launch's ``--mem-fraction-static`` / ``--gpu-memory-utilization``), ``chunked_prefill_size``
(SGLang's ``--chunked-prefill-size``), ``disable_radix_cache`` (SGLang's ``--disable-radix-cache``),
``ssm_dtype`` (SGLang's ``--mamba-ssm-dtype``),
``scheduler_recv_interval`` (SGLang's ``--scheduler-recv-interval``), ``engine_version`` and
``gpu_variant_stated`` (``false`` where the source names only the GPU family, e.g. "H100").
"""

from __future__ import annotations

import math
import re
from typing import Literal, NamedTuple, overload

from tokenplan.arch.kv import SSM_STATE_DTYPES
from tokenplan.perf.speculative import METHODS
from tokenplan.units import MS_PER_S

# The largest count a measurement row may state (GPUs, requests in flight or in the run, a running
# cap): no public run comes near a billion requests (the notes' largest job is 914,000 prompts), so
# a larger value is a typo or an overflow, never a measurement.
MAX_COUNT = 10**9


class RowError(Exception):
    """A value of one row that does not parse (message names the column)."""


def text(row: dict, col: str) -> str:
    """The cell stripped, "" where blank or absent."""
    return (row.get(col) or "").strip()


@overload
def number(row: dict, col: str, required: Literal[True] = ...) -> float: ...
@overload
def number(row: dict, col: str, required: bool) -> float | None: ...
def number(row: dict, col: str, required: bool = True) -> float | None:
    """A finite number; a required one must be > 0 (None where blank and not required)."""
    cell = text(row, col)
    if not cell:
        if required:
            raise RowError(f"column {col} is empty")
        return None
    if not cell.isascii() or "_" in cell:  # float() also reads "1_000" and full-width digits
        raise RowError(f"column {col} value {cell!r} is not a number")
    try:
        value = float(cell)
    except ValueError:
        raise RowError(f"column {col} value {cell!r} is not a number") from None
    if not math.isfinite(value):
        raise RowError(f"column {col} value {cell!r} is not a finite number")
    if not value > 0 and required:
        raise RowError(f"column {col} value {cell!r} must be > 0")
    return value


def optional_positive(row: dict, col: str) -> float | None:
    """A column that may be blank (None) but, when given, must be a number > 0."""
    value = number(row, col, required=False)
    if value is not None and not value > 0:
        raise RowError(f"column {col} value {text(row, col)!r} must be > 0 (or blank: not stated)")
    return value


def integer(row: dict, col: str, default: int = 1, zero_is_blank: bool = False) -> int:
    """A whole number ≥ 1, ``default`` where blank (and where 0 with ``zero_is_blank``: the
    serving export writes 0 for a size it leaves unset). Raises RowError for a fraction, a
    negative value or (without ``zero_is_blank``) 0: a layout of no GPUs is a broken row, not
    TP1."""
    value = number(row, col, required=False)
    if value is None or (zero_is_blank and value == 0):
        return default
    if value < 1:
        allowed = "a whole number ≥ 1, 0 or blank for unset" if zero_is_blank else "a whole number ≥ 1 or blank"
        raise RowError(f"column {col} value {text(row, col)!r} is not allowed ({allowed})")
    if value != int(value) or value > MAX_COUNT:
        raise RowError(f"column {col} value {text(row, col)!r} is not allowed (a whole number from 1 to {MAX_COUNT:,})")
    return int(value)


def count(row: dict, col: str) -> int:
    """A required whole number from 1 to :data:`MAX_COUNT` (GPUs, requests in flight). Raises
    RowError naming the column, the value and the range allowed."""
    value = optional_count(row, col, blank="")
    if value is None:
        raise RowError(f"column {col} is empty (allowed: a whole number from 1 to {MAX_COUNT:,})")
    return value


def optional_count(row: dict, col: str, blank: str = " (or blank)") -> int | None:
    """A whole number from 1 to :data:`MAX_COUNT`, None where blank (not stated). Raises RowError
    naming the column, the value and the range allowed (``blank``: the words that allow a blank
    cell, "" where :func:`count` requires one)."""
    value = number(row, col, required=False)
    if value is None:
        return None
    if not 1 <= value <= MAX_COUNT or value != int(value):
        raise RowError(f"column {col} value {text(row, col)!r} is not a whole number from 1 to {MAX_COUNT:,}{blank}")
    return int(value)


def required_text(row: dict, col: str) -> str:
    """The cell in lower case; empty is an error."""
    cell = text(row, col).lower()
    if not cell:
        raise RowError(f"column {col} is empty")
    return cell


FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def flag(row: dict, col: str, blank: bool) -> bool:
    """``true``/``false`` (also 1/0, yes/no; any case), ``blank`` where empty or absent."""
    cell = text(row, col).lower()
    if not cell:
        return blank
    if cell not in FLAGS:
        raise RowError(f"column {col} value {text(row, col)!r} is not one of true, false (or blank)")
    return FLAGS[cell]


TRUST_LEVELS = ("high", "medium", "low")


def trust(row: dict, blank: str) -> str:
    """The row's ``trust`` (``high``, ``medium`` or ``low``, any case), or ``blank`` where the
    cell is empty or the file has no such column. Anything else makes the row malformed."""
    cell = text(row, "trust").lower()
    if not cell:
        return blank
    if cell not in TRUST_LEVELS:
        raise RowError(f"column trust value {text(row, 'trust')!r} is not one of {', '.join(TRUST_LEVELS)} (or blank)")
    return cell


def median_ms(row: dict, col: str) -> float | None:
    """A median-latency column (ms) in seconds, None where blank or absent; a value that is not
    > 0 makes the row malformed."""
    value = optional_positive(row, col)
    return None if value is None else value / MS_PER_S


_DRAFT_STEPS = re.compile(r"(?:steps|nextn|num_speculative_tokens)\s*=\s*(\d+)")


_SPEC_SYNTAX = re.compile(r"[a-z][a-z0-9_]*:[^\s(]*")
_SPEC_PARAM = re.compile(r"([a-z_]+)\s*=\s*([^\s,)]*)")  # key=value inside the parentheses


def spec_from_text(cell: str) -> str:
    """``mtp (steps=3 draft_tokens=4)`` → ``mtp:3``; ``mtp (nextn=1)`` (TensorRT-LLM's
    ``num_nextn_predict_layers``) → ``mtp:1``; ``mtp (num_speculative_tokens=3)`` (vLLM) →
    ``mtp:3``; ``mtp`` → ``mtp:3`` (SGLang/vLLM's usual 3 steps); ``none``/blank → ``none``.
    The acceptance length then comes from the prior. A cell already in ``--spec`` syntax
    (``mtp:3``, ``mtp:3:2.4``, ``eagle3:2``) is kept as written; ``parse_spec`` checks it."""
    cell = cell.strip().lower()
    if cell in ("", "none", "off"):
        return "none"
    if _SPEC_SYNTAX.fullmatch(cell):
        return cell
    method = cell.split()[0].split("(")[0]
    if method not in METHODS:  # said with the cell as written (it read "spec 'magic:3'")
        raise RowError(f"column spec_decode value {cell!r}: {method!r} is not one of {', '.join(METHODS)} (or none)")
    for key, value in _SPEC_PARAM.findall(cell):  # steps=-3 or steps=three read as the default 3
        if not value.isdigit() or int(value) < 1:
            raise RowError(f"column spec_decode value {cell!r}: {key}={value} is not a whole number ≥ 1")
    steps = _DRAFT_STEPS.search(cell)
    return f"{method}:{steps.group(1) if steps else 3}"


class Lengths(NamedTuple):
    """How a row's lengths spread around its ``isl``/``osl`` means: ``low_fraction`` F of a
    uniform ``[F·L, L]``, or ``length_set`` (a prompt set's name); both None = fixed."""

    low_fraction: float | None
    length_set: str | None


_UNIFORM = re.compile(r"uniform:(0?\.\d+)")
_SET_NAME = re.compile(r"[a-z][a-z0-9_.-]*")


def lengths(row: dict) -> Lengths:
    """The ``length_distribution`` column: ``fixed`` or blank (lengths at the mean),
    ``uniform:F`` with 0 < F < 1, or a prompt set's name (lower case; a set the catalog does
    not know skips the row when it is resolved, ``api.resolve.resolve_case``)."""
    cell = text(row, "length_distribution").lower()
    if cell in ("", "fixed"):
        return Lengths(None, None)
    found = _UNIFORM.fullmatch(cell)
    if found and 0 < float(found.group(1)) < 1:
        return Lengths(float(found.group(1)), None)
    if _SET_NAME.fullmatch(cell) and not cell.startswith("uniform"):
        return Lengths(None, cell)
    raise RowError(
        f"column length_distribution value {text(row, 'length_distribution')!r} is not one of fixed, "
        f"uniform:F (0 < F < 1, lengths drawn from [F·L, L]) or a prompt set's name such as sharegpt (or blank)"
    )


def nominal_mean(nominal_tokens: float, low_fraction: float | None) -> float:
    """The mean length (tokens) of a uniform draw given by its nominal top ``L``, as
    serving-dev.csv states InferenceX's runs (the aiconfigurator export keeps the nominal
    ``--random-input-len``/``--random-output-len``): InferenceX's ``benchmark_serving.py``
    (kimbochen/bench_serving, ``sample_random_requests``) draws
    ``np.random.randint(int(L · F), L + 1)``, whose mean is ``(int(L · F) + L) / 2`` —
    921.5 for L = 1,024 and 7,372.5 for 8,192 at F = 0.8 (inferencex-dev.csv rounds them to
    922 and 7,373). ``low_fraction`` None (fixed lengths): ``L`` itself."""
    if low_fraction is None:
        return nominal_tokens
    return (int(nominal_tokens * low_fraction) + nominal_tokens) / 2


def num_requests(row: dict) -> float | None:
    """The ``num_requests`` column: the requests the run served, a whole number ≥ 1, None where
    blank (not stated)."""
    value = optional_count(row, "num_requests")
    return None if value is None else float(value)


def max_running(row: dict) -> int | None:
    """The ``max_running`` column: the launch's running-request cap per replica, a whole number
    ≥ 1, None where blank (the engine's default)."""
    return optional_count(row, "max_running")


def scheduler_recv_interval(row: dict) -> int | None:
    """The ``scheduler_recv_interval`` column: SGLang's ``--scheduler-recv-interval`` as the launch
    set it (decode iterations between two receives of new requests), a whole number ≥ 1, None
    where blank (the engine's default, 1)."""
    value = number(row, "scheduler_recv_interval", required=False)
    if value is None:
        return None
    if not value >= 1 or value != int(value):
        raise RowError(
            f"column scheduler_recv_interval value {text(row, 'scheduler_recv_interval')!r} is not a whole number ≥ 1 "
            "(or blank)"
        )
    return int(value)


def memory_fraction(row: dict) -> float | None:
    """The ``memory_fraction`` column: the launch's memory setting in (0, 1], None where blank."""
    value = optional_positive(row, "memory_fraction")
    if value is not None and value > 1:
        raise RowError(f"column memory_fraction value {text(row, 'memory_fraction')!r} is not in (0, 1] (or blank)")
    return value


def chunked_prefill_size(row: dict) -> int | None:
    """The ``chunked_prefill_size`` column: SGLang's ``--chunked-prefill-size`` as the launch set
    it (tokens of prompt per prefill step), a whole number ≥ 1, None where blank (the engine's
    default for the GPU)."""
    value = optional_positive(row, "chunked_prefill_size")
    if value is None:
        return None
    if value != int(value):
        raise RowError(
            f"column chunked_prefill_size value {text(row, 'chunked_prefill_size')!r} is not a whole number of "
            "tokens ≥ 1 (or blank)"
        )
    return int(value)


def disable_radix_cache(row: dict) -> bool | None:
    """The ``disable_radix_cache`` column: whether the launch passed SGLang's
    ``--disable-radix-cache`` (``true``/``false``), None where blank (not stated: the engine's
    default, the radix cache on)."""
    return None if not text(row, "disable_radix_cache") else flag(row, "disable_radix_cache", blank=False)


def ssm_dtype(row: dict) -> str | None:
    """The ``ssm_dtype`` column: SGLang's ``--mamba-ssm-dtype`` as the launch set it (the hybrid
    models' recurrent-state dtype, e.g. ``bfloat16``), None where blank (the model config's
    ``mamba_ssm_dtype``)."""
    cell = text(row, "ssm_dtype").lower()
    if not cell:
        return None
    if cell not in SSM_STATE_DTYPES:
        raise RowError(
            f"column ssm_dtype value {text(row, 'ssm_dtype')!r} is not one of {', '.join(SSM_STATE_DTYPES)} (or blank)"
        )
    return cell


_ENGINE_NAMED = re.compile(r"(?<![a-z])(sglang|vllm|tensorrt[-_]llm|trtllm)(?![a-z])")


def engine_version(row: dict, engine: str) -> str | None:
    """The ``engine_version`` cell, None where blank; a cell that names another engine than the
    row's (``sglang 0.5.9`` on a vLLM row, read as vLLM 0.5.9 before) makes the row malformed."""
    cell = text(row, "engine_version")
    named = {"trtllm" if n.startswith("tensorrt") else n for n in _ENGINE_NAMED.findall(cell.lower())}
    if named and engine.strip().lower() not in named:
        raise RowError(
            f"column engine_version value {cell!r} names {', '.join(sorted(named))}, not the row's engine {engine}"
        )
    return cell or None
