"""``validate``: predict measured rows and summarise the error — the Python API behind
``tokenplan validate``."""

from __future__ import annotations

from tokenplan.api._cases import resolve_file
from tokenplan.api._common import efficiency_table
from tokenplan.calibration.validate import Validation, validate_cases
from tokenplan.files.measurements import read_measurements


def validate(path: str, calibration: str | None = None) -> Validation:
    """Predict every row of a measurement CSV and summarise the error (see ``tokenplan validate``).

    Raises:
        InputError, ConfigError: the file (or the calibration profile) is missing or malformed.
    """
    table = efficiency_table(calibration)
    data = read_measurements(path)
    cases, skipped = resolve_file(data)
    return validate_cases(data.kind, cases, skipped, table)


def validation_dict(v: Validation) -> dict:
    """The ``--json`` form: ``n``, ``skipped``, ``median_abs_pct_error``, ``p90_abs_pct_error``,
    ``bias`` (fractions, on throughput for throughput files and on TPOT for serving files),
    ``tpot_*``/``ttft_*`` for serving files, ``by_engine``/``by_gpu``/``by_family`` and ``rows``."""
    main = "throughput" if v.kind == "throughput" else "tpot"
    s = v.summary.get(main)
    out: dict = {
        "kind": v.kind, "n": len(v.rows),
        "skipped": [{"line": k.line, "id": k.row_id, "reason": k.reason} for k in v.skipped],
        "median_abs_pct_error": s.median_abs if s else None, "p90_abs_pct_error": s.p90_abs if s else None,
        "bias": s.bias if s else None, "calibration": v.provenance,
    }
    for metric in ("tpot", "ttft"):
        if metric in v.summary:
            t = v.summary[metric]
            out.update({f"{metric}_median_abs_pct_error": t.median_abs, f"{metric}_p90_abs_pct_error": t.p90_abs,
                        f"{metric}_bias": t.bias})
    for dim in ("engine", "gpu", "family"):
        out[f"by_{dim}"] = {g: {"n": e.n, "median_abs_pct_error": e.median_abs, "p90_abs_pct_error": e.p90_abs,
                                "bias": e.bias}
                            for g, e in v.breakdown.get((dim, main), {}).items()}
    out["rows"] = [_row_dict(r) for r in v.rows]
    return out


def _row_dict(r) -> dict:
    m = r.case.measurement
    d = {"line": m.line, "id": m.row_id, "engine": m.engine, "model": m.model, "gpu": m.gpu,
         "num_gpus": m.num_gpus, "layout": r.case.config.layout.describe(), "weight_dtype": m.weight_dtype,
         "isl": m.isl_tokens, "osl": m.osl_tokens, "concurrency": m.concurrency}
    units = {"throughput": ("output_tok_s_per_gpu", 1.0), "tpot": ("tpot_ms", 1e3), "ttft": ("ttft_ms", 1e3)}
    for metric, (pred, meas, err) in r.values.items():
        name, scale = units[metric]
        prefix = "" if metric == "throughput" else f"{metric}_"
        d.update({f"predicted_{name}": pred * scale, f"measured_{name}": meas * scale, f"{prefix}error": err})
    return d
