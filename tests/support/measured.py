"""A measured row built in a test (``tokenplan.measurement.Measurement``) with the bookkeeping
fields filled: line 2, id ``r``, SGLang, one pipeline stage, no EP or attention DP, a measured
TTFT of 1 s and TPOT of 20 ms (the figures the prediction is compared with, not inputs to it)."""

from __future__ import annotations

from tokenplan.measurement import Measurement

_DEFAULTS: dict[str, object] = {
    "line": 2,
    "row_id": "r",
    "engine": "sglang",
    "pp": 1,
    "ep": 1,
    "attention_dp": False,
    "ttft_s": 1.0,
    "tpot_s": 0.02,
}


def measured_row(**fields: object) -> Measurement:
    """A Measurement of ``fields`` (model, gpu, num_gpus, tp, weight_dtype, kv_dtype, isl_tokens,
    osl_tokens, concurrency, ...) over the defaults above."""
    return Measurement(**{**_DEFAULTS, **fields})  # type: ignore[arg-type]
