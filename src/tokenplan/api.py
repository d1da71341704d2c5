"""The Python API: the same functions the CLI calls — request in, result out.

``predict`` evaluates one configuration; ``memory`` breaks down one GPU's memory; ``plan``
searches the hardware options of a job (``tokenplan.api_plan``). Names are resolved through
``tokenplan.catalog`` here, so the layers below receive values only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from tokenplan.calibration.bands import BandTable, interval, model_family, table_from_json
from tokenplan.catalog import load_engine, load_gpu, load_model, shipped_efficiency, shipped_error_bands_json
from tokenplan.errors import InputError
from tokenplan.job.evaluate import Config, Evaluation, Rejection, allocated_requests, evaluate, kv_and_state
from tokenplan.job.workload import LengthDist
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.perf.layout import Layout
from tokenplan.perf.speculative import parse_spec
from tokenplan.units import KV_DTYPES, MS_PER_S, WEIGHT_DTYPES, parse_dtype
from tokenplan.userfiles import read_calibration


@dataclass(frozen=True)
class PredictRequest:
    """One configuration and workload point, as the CLI's ``predict`` takes it.

    Lengths are in tokens; ``concurrency`` is requests in flight per deployment (None = offline
    ``max``: every request queued, the engine picks its batch). ``spec`` is ``none`` or
    ``METHOD:K[:TAU]``. ``isl_sigma``/``osl_sigma`` > 0 make the lengths lognormal.
    """

    model: str
    gpu: str
    num_gpus: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: bool = False
    weight_dtype: str = "bf16"
    kv_dtype: str = "auto"
    isl: float = 1024
    osl: float = 1024
    concurrency: float | None = None
    spec: str = "none"
    engine: str = "sglang"
    memory_fraction: float | None = None
    max_running: int | None = None
    isl_sigma: float = 0.0
    osl_sigma: float = 0.0
    osl_cap: float | None = None
    calibration: str | None = None
    ssm_dtype: str | None = None
    kv_offload_gib: float = 0.0
    disable_radix_cache: bool = False


def _positive(field: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not 0 < value < math.inf:
        raise InputError(field, value, "a finite number > 0")


def efficiency_table(calibration: str | None) -> EfficiencyTable:
    """The calibration file's table, or the shipped one."""
    return read_calibration(calibration) if calibration else shipped_efficiency()


def calibration_warnings(calibration: str | None, point: dict) -> list[str]:
    """Warnings for using the profile ``calibration`` far from what it was fitted on (its
    ``fitted_on`` record; none for profiles without one). ``point``: ``engine``, ``gpu``, ``model``,
    ``concurrency`` (per replica), ``isl_tokens``, ``osl_tokens``."""
    from tokenplan.calibration.fitted_range import range_warnings

    if not calibration:
        return []
    fitted = json.loads(Path(calibration).read_text(encoding="utf-8")).get("fitted_on")
    return range_warnings(fitted, point) if isinstance(fitted, dict) else []


def build_config(req: PredictRequest) -> tuple[Config, object, object]:
    """Resolve names and check sizes: (config, model spec, gpu). Raises InputError/CatalogError."""
    for field in ("tp", "pp", "ep", "num_gpus", "isl", "osl"):
        _positive(field, getattr(req, field))
    _positive("concurrency", req.concurrency, allow_none=True)
    _positive("max_running", req.max_running, allow_none=True)
    if req.num_gpus % (req.tp * req.pp):
        raise InputError("num_gpus", req.num_gpus, f"a multiple of tp × pp = {req.tp * req.pp}")
    model, gpu, engine = load_model(req.model), load_gpu(req.gpu), load_engine(req.engine)
    weight = parse_dtype(req.weight_dtype if req.weight_dtype != "auto" else model.native_weight_dtype,
                         "weight_dtype", WEIGHT_DTYPES)
    kv = engine.auto_kv_dtype(weight) if req.kv_dtype == "auto" else parse_dtype(req.kv_dtype, "kv_dtype", KV_DTYPES)
    layout = Layout(tp=req.tp, pp=req.pp, ep=req.ep, dp=req.num_gpus // (req.tp * req.pp),
                    attention_dp=req.attention_dp)
    cut = engine.vision_cut(model.vision_layers, model.vision_hidden)
    if not 0 <= req.kv_offload_gib < math.inf:
        raise InputError("kv_offload_gib", req.kv_offload_gib, "GiB of host memory per GPU ≥ 0")
    if req.memory_fraction is not None and not 0 < req.memory_fraction <= 1:
        raise InputError("memory_fraction", req.memory_fraction, "a share of GPU memory in (0, 1]")
    config = Config(layout, weight, kv, engine, parse_spec(req.spec), req.memory_fraction, req.max_running,
                    req.ssm_dtype, cut, lift_running_cap=req.disable_radix_cache,
                    host_kv_bytes=req.kv_offload_gib * 2**30)
    return config, model, gpu


def evaluate_request(req: PredictRequest) -> Evaluation | Rejection:
    """Evaluate a request with the calibrated efficiency for its engine and GPU architecture."""
    config, model, gpu = build_config(req)
    eff = efficiency_table(req.calibration).resolve(config.engine.name, gpu.architecture)
    isl = LengthDist(req.isl, req.isl_sigma, None)
    osl = LengthDist(req.osl, req.osl_sigma, req.osl_cap)
    per_replica = None if req.concurrency is None else req.concurrency / config.layout.dp
    return evaluate(model, gpu, config, eff, isl, osl, per_replica)


def predict(req: PredictRequest) -> dict:
    """Predict one configuration (see ``tokenplan predict``).

    Returns a dict with ``output_tok_s_total``, ``output_tok_s_per_gpu`` (tokens/s),
    ``max_concurrency`` (sequences, whole deployment), ``kv_bytes_per_token`` (whole model),
    ``state_bytes_per_sequence``, ``weight_bytes_per_gpu`` (bytes), ``step_time_ms``,
    ``tpot_ms``, ``ttft_ms``, ``bottleneck``, ``warnings`` and more; or, for a configuration
    that cannot run, ``{"rejected": reason}``.

    Raises:
        InputError, CatalogError, ConfigError: bad names or sizes.
    """
    result = evaluate_request(req)
    if isinstance(result, Rejection):
        return {"rejected": result.reason}
    out = attach_intervals(evaluation_dict(result), result, PREDICT_FIGURES)
    if out.get("error_band", {}).get("outside_measured_regime"):
        out["warnings"].append(f"outside the measured regime ({out['error_band']['outside_measured_regime']}): "
                               "the error band is widened to the leave-one-GPU-out one")
    out["warnings"] += calibration_warnings(req.calibration, {
        "engine": req.engine, "gpu": load_gpu(req.gpu).key, "model": load_model(req.model).name,
        "concurrency": None if req.concurrency is None else req.concurrency / result.config.layout.dp,
        "isl_tokens": req.isl, "osl_tokens": req.osl})
    return out


def error_bands() -> BandTable | None:
    """The shipped error-band table (``catalog/error_bands.json``), or None when none ships."""
    data = shipped_error_bands_json()
    return None if data is None else table_from_json(data)


# figure key → (band metric, figure scales as 1 / the metric's quantity)
_RATE, _INVERSE_RATE, _TTFT = ("rate", False), ("rate", True), ("ttft", False)
PREDICT_FIGURES = {"output_tok_s_total": _RATE, "output_tok_s_per_gpu": _RATE, "tpot_ms": _INVERSE_RATE,
                   "ttft_ms": _TTFT}
PLAN_FIGURES = {**PREDICT_FIGURES, "wall_days": _INVERSE_RATE, "usd": _INVERSE_RATE, "gpu_hours": _INVERSE_RATE,
                "usd_per_mtok": _INVERSE_RATE}


def attach_intervals(out: dict, ev: Evaluation, figures: dict[str, tuple[str, bool]]) -> dict:
    """Add ``<figure>_interval`` = ``{"low", "high", "coverage", "regime"[, "outside_measured_regime"]}``
    next to each figure of ``out`` named in ``figures`` (see ``calibration.bands``), and
    ``error_band`` (the regime, and why the configuration lies outside the measured one, if it
    does). Without a shipped band table nothing is added. Returns ``out``."""
    table = error_bands()
    if table is None:
        return out
    d = ev.deployment
    where = (ev.config.engine.name, d.gpu.architecture, model_family(d.spec.name), d.gpu.key, ev.steady.batch)
    last = None
    for key, (metric, inverse) in figures.items():
        band = None if out.get(key) is None else interval(table, out[key], metric, inverse, *where)
        if band is not None:
            out[f"{key}_interval"] = band.as_dict()
            last = band
    if last is not None:
        out["error_band"] = {"regime": last.regime, "coverage": table.coverage,
                             "outside_measured_regime": last.outside}
    return out


def evaluation_dict(ev: Evaluation) -> dict:
    """The JSON-able fields of an evaluation (units in the key names)."""
    s, m, lay = ev.steady, ev.memory, ev.config.layout
    kv_tok, state_seq = kv_and_state(ev.deployment.spec, ev.config.kv_dtype)
    return {
        "layout": lay.describe(), "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "dp": lay.dp,
        "attention_dp": lay.attention_dp, "num_gpus": lay.num_gpus,
        "weight_dtype": ev.config.weight_dtype.value, "kv_dtype": ev.config.kv_dtype.value,
        "engine": ev.config.engine.name, "spec": ev.config.spec.describe() if ev.config.spec else "none",
        "output_tok_s_total": ev.output_tok_s_total, "output_tok_s_per_gpu": ev.output_tok_s_per_gpu,
        "roofline_output_tok_s_total": s.roofline_output_tok_s * lay.dp,
        "batch_per_replica": s.batch, "max_concurrency": s.limits.limit * lay.dp,
        "batch_limit_reason": s.batch_reason,
        "kv_bytes_per_token": kv_tok, "state_bytes_per_sequence": state_seq,
        "weight_bytes_per_gpu": m.weight_bytes_per_gpu, "kv_capacity_tokens": m.kv_capacity_tokens * lay.dp,
        "state_slots": None if m.state_slots is None else m.state_slots * lay.dp,
        "memory_fraction": ev.settings.memory_fraction, "chunk_tokens": ev.settings.chunk_tokens,
        "step_time_ms": s.decode_step.total_s * MS_PER_S, "tpot_ms": s.tpot_s * MS_PER_S,
        "ttft_ms": s.ttft_s * MS_PER_S, "prefill_share": s.prefill_share,
        "bottleneck": s.decode_step.bottleneck, "warnings": list(ev.warnings),
    }


def memory(req: PredictRequest) -> dict:
    """Per-GPU memory breakdown of one configuration (bytes), with KV capacity in tokens.

    Keys: ``gpu_bytes``, ``weight_bytes_per_gpu``, ``reserve_bytes``, ``kv_pool_bytes``,
    ``state_pool_bytes``, ``kv_bytes_per_token`` (whole model), ``kv_bytes_per_token_per_gpu``,
    ``state_bytes_per_sequence`` (whole model), ``kv_capacity_tokens`` (per replica),
    ``state_slots``, ``max_sequences`` at ISL + OSL, ``memory_fraction``, ``running_requests``
    (the batch limit) and ``allocation`` (what the engine allocates on one GPU at that many
    running requests, term → bytes: weights, kv_cache, draft_kv, state, spec_state, reserve;
    they sum to ``gpu_bytes``); or ``rejected``.
    """
    result = evaluate_request(req)
    if isinstance(result, Rejection):
        return {"rejected": result.reason}
    config, model, gpu = result.config, result.deployment.spec, result.deployment.gpu
    m = result.memory
    kv_tok, state_seq = kv_and_state(model, config.kv_dtype)
    return {
        "gpu": gpu.key, "layout": config.layout.describe(), "gpu_bytes": m.gpu_bytes,
        "weight_bytes_per_gpu": m.weight_bytes_per_gpu, "reserve_bytes": m.reserve_bytes,
        "kv_pool_bytes": m.kv_pool_bytes, "state_pool_bytes": m.state_pool_bytes,
        "kv_bytes_per_token": kv_tok, "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token_per_gpu,
        "state_bytes_per_sequence": state_seq, "kv_capacity_tokens": m.kv_capacity_tokens,
        "state_slots": m.state_slots, "max_sequences": m.max_sequences(req.isl + req.osl),
        "context_tokens": req.isl + req.osl,
        "memory_fraction": result.settings.memory_fraction, "warnings": list(result.warnings),
        "running_requests": allocated_requests(result), "allocation": m.allocation(allocated_requests(result)),
    }


def catalog_gpus() -> list[dict]:
    """Every catalog GPU as a dict (units in key names: GiB, TB/s, TFLOPS, GB/s per direction)."""
    from tokenplan.catalog import gpu_names

    rows = []
    for key in gpu_names():
        g = load_gpu(key)
        rows.append({
            "key": key, "name": g.name, "architecture": g.architecture, "compute_capability": g.compute_capability,
            "memory_gib": g.memory_bytes / 2**30, "hbm_tb_s": g.hbm_bytes_per_s / 1e12,
            "dense_tflops": {k: v / 1e12 for k, v in g.dense_flops_per_s.items()},
            "scaleup": g.scaleup.kind.value, "scaleup_gb_s": g.scaleup.bytes_per_s / 1e9,
            "native_dtypes": sorted(d.value for d in g.native_dtypes),
            "sources": _gpu_sources(key),
            "price": None if g.price is None else {"low": g.price.low_usd_per_hour, "high": g.price.high_usd_per_hour,
                                                   "typical": g.price.typical_usd_per_hour, "as_of": g.price.as_of},
        })
    return rows


def _gpu_sources(key: str) -> dict[str, str]:
    """Where each figure group of a catalog GPU comes from."""
    from tokenplan.catalog import gpu_entry

    e = gpu_entry(key)
    out = {"memory": e.memory.source, "bandwidth": e.bandwidth.source, "compute": e.compute.source,
           "native_dtypes": e.native_dtypes.source, "scaleup": e.scaleup.source, "host_link": e.host_link.source}
    if e.price is not None:
        out["price"] = e.price.source
    return out


def catalog_models() -> list[dict]:
    """Every shipped model with its family, parameter counts, exact KV/state sizes and the parts
    tokenplan models only approximately."""
    from tokenplan.arch.params import param_counts
    from tokenplan.catalog import model_names
    from tokenplan.units import Dtype

    rows = []
    for name in model_names():
        m = load_model(name)
        p = param_counts(m)
        kv, state = kv_and_state(m, Dtype.BF16)
        rows.append({"name": name, "architecture": m.architecture, "family": m.family, "params_b": p.total / 1e9,
                     "active_params_b": p.active_matmul / 1e9, "kv_bytes_per_token": kv,
                     "state_bytes_per_sequence": state, "mtp_layers": m.mtp_layers,
                     "approximations": list(m.approximations)})
    return rows
