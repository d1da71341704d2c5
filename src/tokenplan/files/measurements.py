"""Measurement CSVs: throughput points (the columns of ``dev.csv``) and serving points (the
columns of ``serving-dev.csv``), detected by their header.

A malformed row (a number that does not parse, a missing required column value) is skipped
and reported with its line number; it never stops the read. A file that is neither kind, or
cannot be read, raises one :class:`~tokenplan.errors.TokenplanError`.

Serving rows follow aiconfigurator's layout convention: one replica spans
``tp × attention_dp_size`` GPUs (= ``moe_tp_size × moe_ep_size``), except where its export
squared an engine's ``--tp N --ep N`` (:mod:`tokenplan.files.aic_layout`); weights are the MoE quant
mode where given, else the GEMM one; the KV cache is FP8 for quantized checkpoints and BF16
otherwise (the engines' default for those checkpoints, per the file's README).
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass, replace
from pathlib import Path

from tokenplan.errors import ConfigError, InputError
from tokenplan.files import measurement_fields as f
from tokenplan.files.aic_layout import launch_column, layout_columns, replica_layout
from tokenplan.files.measurement_fields import RowError, spec_from_text  # noqa: F401 (re-export: spec_from_text)
from tokenplan.measurement import CLOSED_LOOP_RATIO_BOUNDS, Measurement, SkippedRow, closed_loop_ratio
from tokenplan.units import MS_PER_S

THROUGHPUT = "throughput"
SERVING = "serving"

THROUGHPUT_COLUMNS = ("engine", "model", "gpu", "num_gpus", "tp", "isl", "osl", "concurrency", "output_tok_s_per_gpu")
SERVING_COLUMNS = ("engine", "model", "gpu", "isl", "osl", "concurrency", "tp", "ttft_ms", "tpot_ms")
# the measured columns only a dev.csv / inferencex-dev.csv row has
_THROUGHPUT_ONLY = frozenset({"output_tok_s_per_gpu", "total_tok_s_per_gpu", "ttft_ms_median", "tpot_ms_median"})

# aiconfigurator quant modes → tokenplan weight dtypes (int4_wo = INT4 weight-only, W4A16).
_QUANT_TO_DTYPE = {
    "nvfp4": "nvfp4",
    "fp4": "nvfp4",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "int4_wo": "w4a16",
    "int4": "w4a16",
    "bf16": "bf16",
    "fp16": "fp16",
    "": "bf16",
}


@dataclass(frozen=True, slots=True)
class MeasurementFile:
    """A read measurement file.

    Attributes:
        path: the file.
        kind: ``throughput`` or ``serving``.
        rows: the well-formed rows.
        skipped: malformed rows with their line number and reason.
    """

    path: str
    kind: str
    rows: tuple[Measurement, ...]
    skipped: tuple[SkippedRow, ...]


FIELD_LIMIT_BYTES = 16 * 2**20  # per CSV field


def _screen_throughput(m: Measurement) -> Measurement:
    """``m`` with its output tok/s set aside (with the reason) where it contradicts the run's own
    median TTFT and TPOT by Little's law (:func:`~tokenplan.measurement.closed_loop_ratio` outside
    :data:`~tokenplan.measurement.CLOSED_LOOP_RATIO_BOUNDS`, with the concurrency in flight);
    a burst (``num_requests`` ≤ concurrency: N sent at once, fewer in flight as they end) and rows
    without both latencies, a concurrency, an OSL and a GPU are returned as they
    are (the case resolution rejects the last with its reason)."""
    tok_s, ttft_s, tpot_s, concurrency, osl = m.output_tok_s_per_gpu, m.ttft_s, m.tpot_s, m.concurrency, m.osl_tokens
    if tok_s is None or ttft_s is None or tpot_s is None or concurrency is None or osl is None or m.num_gpus < 1:
        return m
    if m.num_requests is not None and m.num_requests <= concurrency:
        # one burst of N requests sent at once: the in-flight count falls from N to 0 as they end,
        # so the closed-loop relation (C always in flight) does not describe the run
        return m
    in_flight = concurrency
    ratio = closed_loop_ratio(tok_s, m.num_gpus, in_flight, osl, ttft_s, tpot_s)
    low, high = CLOSED_LOOP_RATIO_BOUNDS
    if low <= ratio <= high or not math.isfinite(ratio) or ratio <= 0:  # 0 / ∞: values out of float range
        return m
    allowed = tok_s / ratio
    gpus = f"{m.num_gpus} GPU" + ("s" if m.num_gpus != 1 else "")
    reason = (
        f"output_tok_s_per_gpu {m.output_tok_s_per_gpu:g} set aside: its own latencies allow "
        f"{allowed:,.1f} tok/s/GPU ({in_flight:g} in flight × OSL {m.osl_tokens:g} / (TTFT "
        f"{ttft_s * MS_PER_S:g} ms + OSL × TPOT {tpot_s * MS_PER_S:g} ms) / {gpus}), "
        f"measured/allowed {ratio:.2f}, outside {low:g}–{high:g} (Little's law); its TTFT and TPOT are used"
    )
    return replace(m, output_tok_s_per_gpu=None, throughput_set_aside=reason)


def _throughput_row(row: dict, line: int) -> Measurement:
    tp, pp = f.integer(row, "tp"), f.integer(row, "pp")
    gpus = f.count(row, "num_gpus")
    # dp is derived (num_gpus / (tp × pp)); a stated one that says otherwise is a typo in the row
    if f.text(row, "dp") and f.integer(row, "dp") * tp * pp != gpus:
        raise f.RowError(
            f"column dp value {f.text(row, 'dp')!r} is not num_gpus / (tp × pp) = {gpus} / {tp * pp} (or blank)"
        )
    attention_dp = f.flag(row, "attention_dp", blank=False)
    concurrency = None if f.text(row, "concurrency").lower() == "max" else f.count(row, "concurrency")
    spread = f.lengths(row)
    version = f.engine_version(row, f.required_text(row, "engine"))
    return _screen_throughput(
        Measurement(
            line=line,
            row_id=f.text(row, "id") or str(line),
            engine=f.required_text(row, "engine"),
            model=f.required_text(row, "model"),
            gpu=f.required_text(row, "gpu"),
            num_gpus=gpus,
            tp=tp,
            pp=pp,
            ep=f.integer(row, "ep", tp if attention_dp else 1),
            attention_dp=attention_dp,
            weight_dtype=f.text(row, "weight_dtype").lower() or "auto",
            kv_dtype=f.text(row, "kv_dtype").lower() or "auto",
            isl_tokens=f.optional_positive(row, "isl"),
            osl_tokens=f.optional_positive(row, "osl"),
            concurrency=concurrency,
            num_requests=f.num_requests(row),
            spec=spec_from_text(f.text(row, "spec_decode")),
            output_tok_s_per_gpu=f.number(row, "output_tok_s_per_gpu"),
            # an ungraded throughput point weighs as an ordinary public run, not as a vendor table
            trust=f.trust(row, blank="medium"),
            # the run's median TTFT and TPOT next to its throughput (inferencex-dev.csv; the dev.csv
            # rows whose source states them)
            ttft_s=f.median_ms(row, "ttft_ms_median"),
            tpot_s=f.median_ms(row, "tpot_ms_median"),
            latency_statistic="median",
            length_low_fraction=spread.low_fraction,
            max_running=f.max_running(row),
            length_set=spread.length_set,
            **_launch_settings(row),
            engine_version=version,
            gpu_variant_stated=f.flag(row, "gpu_variant_stated", blank=True),
        )
    )


def _launch_settings(row: dict) -> dict:
    """The launch's memory and scheduling flags a row states (optional columns of any measurement
    file; blank = the engine's default): ``memory_fraction``, ``scheduler_recv_interval``,
    ``chunked_prefill_size``, ``disable_radix_cache``, ``ssm_dtype``."""
    return {
        "memory_fraction": f.memory_fraction(row),
        "scheduler_recv_interval": f.scheduler_recv_interval(row),
        "chunked_prefill_size": f.chunked_prefill_size(row),
        "disable_radix_cache": f.disable_radix_cache(row),
        "ssm_dtype": f.ssm_dtype(row),
    }


@functools.cache
def _release_format(model: str) -> str | None:
    """The weight format ``model`` is released in (its catalog entry's ``native_weight_dtype``),
    or None for a model the catalog does not hold. The serving export labels every FP4 run
    ``nvfp4``, gpt-oss's too, whose checkpoints are MXFP4 (openai/gpt-oss-120b config.json:
    ``quantization_config.quant_method`` "mxfp4"): such a label on a model released in MXFP4
    reads as the checkpoint it ran (data/ground-truth/README.md). On Hopper, where no engine
    runs NVFP4 but vLLM's Marlin path, the run could not have been NVFP4."""
    from tokenplan.catalog import load_model
    from tokenplan.errors import CatalogError

    try:
        return load_model(model).native_weight_dtype
    except (CatalogError, ConfigError):
        return None


def _serving_row(row: dict, line: int) -> Measurement:
    pp = f.integer(row, "pp")
    row_id = f.text(row, "id") or str(line)
    engine = f.required_text(row, "engine")
    written = (
        f.integer(row, "tp"),
        f.integer(row, "attention_dp_size", zero_is_blank=True),
        f.integer(row, "moe_tp_size", zero_is_blank=True),
        f.integer(row, "moe_ep_size", zero_is_blank=True),
    )
    stated = launch_column(f.text(row, "launch_layout"), layout_columns(*written))
    replica = stated or replica_layout(row_id, engine, *written)
    gpus = replica.gpus * pp
    quant = (
        f.text(row, "moe_quant_mode").lower()
        or f.text(row, "gemm_quant_mode").lower()
        or f.text(row, "precision").lower()
    )
    if quant not in _QUANT_TO_DTYPE:
        raise RowError(f"quant mode {quant!r} is not one of {', '.join(sorted(k for k in _QUANT_TO_DTYPE if k))}")
    weight = _QUANT_TO_DTYPE[quant]
    model = f.required_text(row, "model")
    if weight == "nvfp4" and _release_format(model) == "mxfp4":
        weight = "mxfp4"
    spread = f.lengths(row)
    return Measurement(
        line=line,
        row_id=row_id,
        engine=engine,
        model=model,
        gpu=f.required_text(row, "gpu"),
        num_gpus=gpus,
        tp=gpus // pp,
        pp=pp,
        ep=replica.ep,
        attention_dp=replica.attention_dp,
        weight_dtype=weight,
        kv_dtype="bf16" if weight in ("bf16", "fp16") else "fp8",
        # serving-dev.csv keeps the export's nominal lengths: a uniform draw's mean from its L
        isl_tokens=f.nominal_mean(f.number(row, "isl"), spread.low_fraction),
        osl_tokens=f.nominal_mean(f.number(row, "osl"), spread.low_fraction),
        length_low_fraction=spread.low_fraction,
        length_set=spread.length_set,
        num_requests=f.num_requests(row),
        concurrency=f.count(row, "concurrency"),
        ttft_s=f.number(row, "ttft_ms") / MS_PER_S,
        tpot_s=f.number(row, "tpot_ms") / MS_PER_S,
        # serving-dev.csv has no trust column: its rows are NVIDIA's own silicon samples
        # (aiconfigurator), the vendor-measured class that dev.csv grades high
        trust=f.trust(row, blank="high"),
        # our copy's InferenceX rows say whether their run was an -mtp config (blank = not stated)
        spec=spec_from_text(f.text(row, "spec_decode")),
        max_running=f.max_running(row),
        **_launch_settings(row),
        engine_version=f.engine_version(row, f.required_text(row, "engine")),
        layout_note=replica.note,
    )


def detect_kind(path: str, columns: list[str]) -> str:
    """``serving`` when TTFT/TPOT columns are present, ``throughput`` for dev.csv columns.
    Raises ConfigError naming the missing columns."""
    have = set(columns)
    # a column the detected format does not read would be dropped without a word (a break-it pass)
    other = sorted(have & _THROUGHPUT_ONLY) if {"ttft_ms", "tpot_ms"} <= have else sorted(have & {"ttft_ms", "tpot_ms"})
    if other:
        raise ConfigError(
            path,
            "header",
            f"column(s) {', '.join(other)} of the other format: serving-dev.csv's ttft_ms and tpot_ms (means) "
            "go together and without dev.csv's output_tok_s_per_gpu, ttft_ms_median and tpot_ms_median",
        )
    if {"ttft_ms", "tpot_ms"} <= have:
        missing = [c for c in SERVING_COLUMNS if c not in have]
        kind = SERVING
    else:
        missing = [c for c in THROUGHPUT_COLUMNS if c not in have]
        kind = THROUGHPUT
    if missing:
        raise ConfigError(
            path,
            "header",
            f"missing column(s) {', '.join(missing)} (expected the columns of "
            f"dev.csv, inferencex-dev.csv or serving-dev.csv)",
        )
    return kind


def _field_count_problem(raw: dict, header_fields: int) -> str | None:
    """Why a CSV record does not have the header's number of fields, or None. ``csv.DictReader``
    files surplus fields under the key None and fills missing ones with None; a quote left open
    swallows the following lines into one field, which also leaves the record short."""
    extra = raw.get(None)
    if extra:
        return f"{header_fields + len(extra)} fields where the header has {header_fields}"
    missing = sum(1 for v in raw.values() if v is None)
    if missing:
        joined = any(isinstance(v, str) and "\n" in v for v in raw.values())
        hint = " (a quote left open joins the lines after it)" if joined else ""
        return f"{header_fields - missing} fields where the header has {header_fields}{hint}"
    return None


def read_measurements(path: str) -> MeasurementFile:
    """Read a measurement CSV. Raises InputError (no such file) or ConfigError (bad header)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("measurement file", path, "an existing CSV file")
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark (Excel's "CSV UTF-8") is not part of the header
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            path, "encoding", f"cannot be read as UTF-8 text ({exc.__class__.__name__}); expected a UTF-8 CSV file"
        ) from None
    # a long notes field (a pasted command line, a log excerpt) is data, not an error: the csv
    # module's default limit is 128 KiB per field
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT_BYTES))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        blank = "line 1 is blank: the column names must be the first line"
        raise ConfigError(path, "header", "the file is empty" if not text.strip() else blank)
    # the files' columns are lower case; a header typed "Concurrency" or " TP" names the same column
    reader.fieldnames = columns = [c.strip().lower() for c in reader.fieldnames]
    if not set(columns) & {*THROUGHPUT_COLUMNS, *SERVING_COLUMNS}:  # a JSONL dataset, a log: not a measurement table
        json_line = text.lstrip().startswith(("{", "["))  # a dataset or a generate run's shard
        raise ConfigError(
            path,
            "header",
            ("line 1 is JSON, not a CSV header" if json_line else "line 1 names none of the measurement columns")
            + f" (allowed: a CSV whose header has the columns of dev.csv, inferencex-dev.csv or serving-dev.csv: "
            f"{', '.join(THROUGHPUT_COLUMNS)}"
            + ("; a generate run is read with --from-run RUN_DIR)" if json_line else ")"),
        )
    twice = next((c for i, c in enumerate(columns) if c and c in columns[:i]), None)  # unnamed: never read
    if twice is not None:  # csv.DictReader keeps the last of two same-named columns, silently
        first, second = [i + 1 for i, c in enumerate(columns) if c == twice][:2]
        raise ConfigError(
            path, "header", f"column {twice!r} appears twice (columns {first} and {second}; allowed: each column once)"
        )
    kind = detect_kind(path, columns)
    parse = _serving_row if kind == SERVING else _throughput_row
    rows, skipped = [], []
    while True:
        try:
            raw = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            # the reader has consumed the bad record but not counted it: it starts on the next line
            skipped.append(SkippedRow(reader.line_num + 1, "?", f"malformed CSV ({exc})"))
            continue
        line = reader.line_num
        fields = _field_count_problem(raw, len(reader.fieldnames))
        raw = {(k or "").strip(): v for k, v in raw.items() if isinstance(v, str)}
        if not any(v.strip() for v in raw.values()):
            continue
        if fields:
            skipped.append(SkippedRow(line, f.text(raw, "id") or str(line), f"malformed: {fields}"))
            continue
        try:
            rows.append(parse(raw, line))
        except RowError as exc:
            skipped.append(SkippedRow(line, f.text(raw, "id") or str(line), f"malformed: {exc}"))
    return MeasurementFile(path, kind, tuple(rows), tuple(skipped))


def described(path: str) -> str:
    """``path`` and the first 12 hex digits of its SHA-256 (``data/dev.csv sha256:0123456789ab``),
    as a fit's provenance names the files it was fitted on."""
    import hashlib

    return f"{path} sha256:{hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]}"
