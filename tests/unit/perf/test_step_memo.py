"""Step times are kept by the value of what they depend on (``StepConstants.steps`` and
``prefill_steps``): deployments whose step constants are equal share one memo, and those that
differ only in what a step without decoding sequences does not read
(``perf.step_constants.PREFILL_FREE``: the KV bytes per token, the state copies after a verify;
the KV pool unless KV is offloaded to the host) share their prefill steps. A step found in a
shared memo is the step the deployment computes itself, to the bit. Llama-3.1-8B FP8 on one
H200 (TP1), its memory varied field by field."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import pytest
from tests.support.our_numbers import EFF

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.evaluate import Evaluation, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf import step_constants as kept
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.step import _step_time, step_time
from tokenplan.perf.step_constants import StepConstants, forget_steps

PREFILL = (0.0, 0.0, 4096.0, 2048.0, 1.0, 4096.0)  # 4,096 prompt tokens, no decoding sequence
DECODE = (64.0, 2000.0, 0.0, 0.0, 1.0, 0.0)  # 64 sequences decoding at a 2,000-token context


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(kept, "_SHARED", OrderedDict())
    forget_steps()


def _deployment() -> tuple[Deployment, Efficiency]:
    scenario = resolve(PredictRequest(model="llama-3.1-8b", gpu="h200", weight_dtype="fp8"))
    ev = evaluate(scenario.model, scenario.gpu, scenario.config, EFF, LengthDist(1000), LengthDist(100), 1.0)
    assert isinstance(ev, Evaluation) and ev.deployment.layout.tp == 1
    return ev.deployment, EFF


def test_a_step_without_decoding_sequences_does_not_read_the_kv_format():
    d, eff = _deployment()
    m = d.memory
    half_kv = replace(d, memory=replace(m, kv_bytes_per_token_per_gpu=m.kv_bytes_per_token_per_gpu / 2))
    a, b = StepConstants(d, eff), StepConstants(half_kv, eff)
    assert _step_time(a, *PREFILL) == _step_time(b, *PREFILL)
    # Decoding reads every sequence's KV: 64 × 2,000 tokens × half the bytes per token take less time.
    assert _step_time(b, *DECODE).attention_s < _step_time(a, *DECODE).attention_s
    assert a.prefill_steps is b.prefill_steps
    assert a.steps is not b.steps


def test_nor_the_state_copies_after_a_verify():
    d, eff = _deployment()
    commits = replace(d, memory=replace(d.memory, spec_commit_state_transfers=2))
    a, b = StepConstants(d, eff), StepConstants(commits, eff)
    assert _step_time(a, *PREFILL) == _step_time(b, *PREFILL)
    assert a.prefill_steps is b.prefill_steps and a.steps is not b.steps


def test_deployments_that_differ_only_in_the_kv_pool_share_every_step():
    d, eff = _deployment()
    capped = replace(d, memory=replace(d.memory, kv_pool_bytes=d.memory.kv_pool_bytes / 2))
    first = step_time(d, eff, *DECODE)
    again = step_time(capped, eff, *DECODE)
    assert again is first  # found in the shared memo
    assert again == _step_time(StepConstants(capped, eff), *DECODE)  # and what it computes itself


def test_with_host_kv_the_pool_is_read_and_not_shared():
    d, eff = _deployment()
    m = replace(d.memory, host_kv_bytes=1e12)
    # A pool of 1 GB against 64 × 2,000 tokens of KV (Llama-3.1-8B BF16: 128 KiB per token, 16 GiB):
    # most of it is read over the host link, so the pool's size moves the decode step.
    small = replace(d, memory=replace(m, kv_pool_bytes=1e9))
    large = replace(d, memory=replace(m, kv_pool_bytes=2e9))
    a, b = StepConstants(small, eff), StepConstants(large, eff)
    assert a.steps is not b.steps
    assert _step_time(a, *DECODE).attention_s > _step_time(b, *DECODE).attention_s


def test_another_efficiency_table_is_another_memo():
    d, eff = _deployment()
    a, b = StepConstants(d, eff), StepConstants(d, replace(eff, hbm_fraction=eff.hbm_fraction / 2))
    assert a.steps is not b.steps and a.prefill_steps is not b.prefill_steps
