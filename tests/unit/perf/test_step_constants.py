"""The per-deployment factors of a step (``perf.step_constants``) follow the deployment and the
efficiency table they were computed for: a new table or deployment object gets its own, never the
factors of an earlier one, and the oldest kept pair goes first. Figures by hand on the round
numbers of ``tests.support.our_numbers`` (4 TB/s HBM, 9e9 bytes of GEMM weights) over
Llama-3.1-8B FP8 on one H200 (TP1/PP1)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import pytest
from tests.support.our_numbers import EFF, ours

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.evaluate import Evaluation, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf import step_constants as kept
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.step import step_time
from tokenplan.perf.step_constants import step_constants


def _ours() -> Deployment:
    scenario = resolve(PredictRequest(model="llama-3.1-8b", gpu="h200", weight_dtype="fp8"))
    config, spec, gpu = scenario.config, scenario.model, scenario.gpu
    ev = evaluate(spec, gpu, config, EFF, LengthDist(1000), LengthDist(100), 1.0)
    assert isinstance(ev, Evaluation) and ev.deployment.layout.tp == ev.deployment.layout.pp == 1
    return ours(ev.deployment)


def test_another_efficiency_table_gets_its_own_factors():
    d = _ours()
    # 8 decoding sequences: the GEMMs are memory-bound (test_step: 9e9 B over 4e12 × 0.8 B/s = 2.8125 ms).
    assert step_time(d, EFF, 8, 1000).gemm_s == pytest.approx(2.8125e-3)
    # Half the HBM fraction: 9e9 B over 4e12 × 0.4 B/s = 5.625 ms, not the first table's 2.8125.
    assert step_time(d, replace(EFF, hbm_fraction=0.4), 8, 1000).gemm_s == pytest.approx(5.625e-3)
    assert step_time(d, EFF, 8, 1000).gemm_s == pytest.approx(2.8125e-3)


def test_another_deployment_gets_its_own_factors():
    d = _ours()
    assert step_time(d, EFF, 8, 1000).gemm_s == pytest.approx(2.8125e-3)
    # Twice the dense bytes: (1.6e10 + 1e9) B over 3.2e12 B/s = 5.3125 ms.
    assert step_time(replace(d, dense_bytes=1.6e10), EFF, 8, 1000).gemm_s == pytest.approx(5.3125e-3)


def test_factors_are_computed_once_per_pair_and_the_oldest_pair_goes_first(monkeypatch):
    monkeypatch.setattr(kept, "_KEPT_CONSTANTS", OrderedDict())
    monkeypatch.setattr(kept, "_KEPT_CONSTANTS_KEPT", 3)
    d = _ours()
    tables = [replace(EFF, hbm_fraction=f) for f in (0.5, 0.6, 0.7, 0.8)]
    first = step_constants(d, tables[0])
    assert step_constants(d, tables[0]) is first  # kept
    for eff in tables[1:]:
        step_constants(d, eff)
    assert len(kept._KEPT_CONSTANTS) == 3  # the bound: the first pair went when the fourth came
    again = step_constants(d, tables[0])
    assert again is not first
    # Recomputed the same: the GEMM weights' 9e9 B over 4e12 × 0.5 B/s = 4.5 ms both times.
    assert again.gemm_mem_s == first.gemm_mem_s == pytest.approx(4.5e-3)


def _constants_on(gpu: str):
    scenario = resolve(PredictRequest(model="llama-3.1-8b", gpu=gpu, weight_dtype="fp8"))
    ev = evaluate(scenario.model, scenario.gpu, scenario.config, EFF, LengthDist(1000), LengthDist(100), 1.0)
    assert isinstance(ev, Evaluation)
    return ev.deployment, step_constants(ev.deployment, EFF)


def test_fp8_pays_its_activation_quantization_kernels_only_on_fp8_tensor_cores():
    # Llama-3.1-8B (32 GQA layers, dense MLP): on an H200 (FP8 tensor cores) each layer's qkv_proj,
    # o_proj, gate_up_proj and down_proj quantize their input first, 4 kernels of a layer's 11:
    # 32 + 32 × 4/11 = 43.6364 layers of EFF.layer_latency_s. An A100 has no FP8 tensor cores: the
    # weights are dequantized in the GEMM (weight-only), the activation stays BF16, 32 layers.
    h200, native = _constants_on("h200")
    a100, marlin = _constants_on("a100-80gb")
    assert not h200.weight_only and a100.weight_only
    assert native.layer_latency_s == pytest.approx(EFF.layer_latency_s * (32 + 32 * 4 / 11), rel=1e-12)
    assert marlin.layer_latency_s == pytest.approx(EFF.layer_latency_s * 32, rel=1e-12)
