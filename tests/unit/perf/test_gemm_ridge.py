"""The fitted GEMM form (GPUs without a measured table) is read no lower than the roofline ridge
``M* = F·b / (2·B)``, as the measured curves are (perf/gemm.py): below it a GEMM is bound by its
weight read, which the step's bandwidth term holds. Read at M = 1, the form gave H20 1.1 % of its
peak and an 11 ms "compute-bound" step for Qwen3-8B at batch 1 (a break-it pass)."""

from __future__ import annotations

import pytest

from tokenplan.api.resolve import PredictRequest, read_profile, resolve
from tokenplan.perf.step import step_time
from tokenplan.perf.step_constants import step_constants


def test_h20_batch_one_is_bound_by_its_weight_read():
    ev = resolve(PredictRequest("qwen3-8b", "h20", concurrency=1, weight_dtype="bf16", kv_dtype="bf16")).evaluate()
    eff = read_profile(None).table.resolve("sglang", "hopper")
    c = step_constants(ev.deployment, eff)
    # H20: 148 TFLOPS BF16 dense, 4.0 TB/s, 2 B per BF16 weight → M* = 148e12 · 2 / (2 · 4.0e12) = 37 rows
    assert c.curve is None and c.ridge == pytest.approx(37.0)
    st = step_time(ev.deployment, eff, 1, 1500)
    # At the ridge the form gives gemm_fraction · 37 / (37 + gemm_half_tokens) of the peak, so the
    # 2 · 8.2 G dense FLOPs take a fraction of a millisecond and the weight read binds: the GEMM
    # family's time is its bytes over the fitted bandwidth (c.gemm_mem_s)
    frac = eff.gemm_fraction * 37 / (37 + eff.gemm_half_tokens)
    assert st.flops / (148e12 * frac) < 1e-3 < c.gemm_mem_s
    assert st.gemm_s == pytest.approx(c.gemm_mem_s, rel=1e-9)
