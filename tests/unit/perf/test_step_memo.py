"""Step times a search asks for are kept by the value of what they depend on
(``perf.step.kept_step_time``, the memos of ``perf.step_constants.shared_memos``): deployments
whose step constants are equal share one memo, and those that differ only in what a step
without decoding sequences does not read (``perf.step_constants.PREFILL_FREE``: the KV bytes per
token, the state copies after a verify) share
their prefill steps. A step found in a shared memo is the step the deployment computes itself,
to the bit. Llama-3.1-8B FP8 on one H200 (TP1), its memory varied field by field."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import pytest
from tests.support.our_numbers import EFF

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.batching import steady_state
from tokenplan.job.evaluate import Evaluation, Rejection, evaluate, prepare
from tokenplan.job.workload import LengthDist
from tokenplan.perf import step_constants as kept
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.step import kept_step_time, step_time
from tokenplan.perf.step_constants import StepConstants, forget_steps, shared_memos

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
    assert step_time(d, eff, *PREFILL) == step_time(half_kv, eff, *PREFILL)
    # Decoding reads every sequence's KV: 64 × 2,000 tokens × half the bytes per token take less time.
    assert step_time(half_kv, eff, *DECODE).attention_s < step_time(d, eff, *DECODE).attention_s
    assert shared_memos(a)[1] is shared_memos(b)[1]  # the prefill steps
    assert shared_memos(a)[0] is not shared_memos(b)[0]  # every step


def test_nor_the_state_copies_after_a_verify():
    d, eff = _deployment()
    commits = replace(d, memory=replace(d.memory, spec_commit_state_transfers=2))
    a, b = StepConstants(d, eff), StepConstants(commits, eff)
    assert step_time(d, eff, *PREFILL) == step_time(commits, eff, *PREFILL)
    assert shared_memos(a)[1] is shared_memos(b)[1] and shared_memos(a)[0] is not shared_memos(b)[0]


def test_deployments_that_differ_only_in_the_kv_pool_share_every_step():
    d, eff = _deployment()
    capped = replace(d, memory=replace(d.memory, kv_pool_bytes=d.memory.kv_pool_bytes / 2))
    first = kept_step_time(d, eff, DECODE)
    again = kept_step_time(capped, eff, DECODE)
    assert again is first  # found in the shared memo
    assert again == step_time(capped, eff, *DECODE)  # and what it computes itself


def test_another_efficiency_table_is_another_memo():
    d, eff = _deployment()
    a, b = StepConstants(d, eff), StepConstants(d, replace(eff, hbm_fraction=eff.hbm_fraction / 2))
    assert shared_memos(a)[0] is not shared_memos(b)[0] and shared_memos(a)[1] is not shared_memos(b)[1]


def test_deployments_that_differ_only_in_cpu_overlap_keep_their_own_steps():
    # An engine version without the overlap scheduler (engines.overlap) adds the fixed and
    # per-sequence CPU time to the kernels; with it, that time hides under them. The constants differ
    # in ``cpu_overlap`` alone, so no memo may hand one the other's steps.
    d, eff = _deployment()
    on, off = replace(d, cpu_overlap=True), replace(d, cpu_overlap=False)
    assert shared_memos(StepConstants(on, eff))[0] is not shared_memos(StepConstants(off, eff))[0]
    first, second = kept_step_time(on, eff, DECODE), kept_step_time(off, eff, DECODE)
    assert first == step_time(on, eff, *DECODE) and second == step_time(off, eff, *DECODE)
    # Overlap can only hide CPU time, never add it.
    assert first.overhead_s <= second.overhead_s and first != second


def test_a_level_from_the_kept_steps_equals_one_from_its_own_memo():
    # job.batching looks the steps of a level up in perf.step.kept_memos (steps=None): a
    # configuration stepped after another that shares its constants finds their steps there,
    # and its figures are those it computes into a memo of its own (steps={}), to the bit.
    scenario = resolve(PredictRequest(model="llama-3.1-8b", gpu="h200", weight_dtype="fp8"))
    isl, osl = LengthDist(1000), LengthDist(100)
    p = prepare(scenario.model, scenario.gpu, scenario.config, EFF, isl, osl, False)
    assert not isinstance(p, Rejection)
    args = (p.deployment, EFF, p.config.engine, p.settings, isl, osl)
    kept_first = [steady_state(*args, c, p.config.spec, p.limits) for c in (1.0, 16.0, 1e6)]
    again = [steady_state(*args, c, p.config.spec, p.limits) for c in (1.0, 16.0, 1e6)]
    own = [steady_state(*args, c, p.config.spec, p.limits, {}) for c in (1.0, 16.0, 1e6)]
    assert kept_first == again == own
    assert again[0].decode_step is kept_first[0].decode_step  # found kept, not computed again
    assert own[0].decode_step is not kept_first[0].decode_step
