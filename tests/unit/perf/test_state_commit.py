"""SGLang's post-verify state copy, against hand arithmetic.

After every speculative verify, SGLang's hybrid linear-attention backend copies each request's
accepted intermediate state (SSM state and conv window) into the request's state slot
(``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify``,
sgl-project/sglang ``python/sglang/srt/layers/attention/hybrid_linear_attn_backend.py``
@012945ecee437fd359c8e5465690cd1fc6efbf1e, GDN path ``scatter_mamba_states_after_mtp_verify``;
called after each target verify in ``speculative/eagle_worker_v2.py`` @69834611). That is one
more whole-state read and one more write per request per verify step, on top of the verify
kernel's one read and k + 1 intermediate writes (docs/engine-facts.md S18, S20).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.evaluate import Evaluation, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.step import step_time

EFF = Efficiency(
    hbm_fraction=0.8,
    attention_fraction=0.5,
    gemm_fraction=0.5,
    gemm_half_tokens=8.0,
    lowprec_fraction=1.0,
    dequant_fraction=1.0,
    comm_fraction=0.5,
    step_overhead_s=1e-3,
    per_sequence_overhead_s=1e-5,
    ttft_overhead_s=0.05,
    prefill_wave_fraction=0.5,
    layer_latency_s=0.0,
    moe_layer_latency_s=0.0,
    per_token_moe_layer_s=0.0,
)

# Qwen3.6-27B (TP1): 48 GDN layers, each a conv window (2·16·128 + 48·128) channels × 3 taps ×
# 2 B (bf16) = 61,440 B and an SSM state 48 heads × 128 × 128 × 4 B (fp32) = 3,145,728 B:
# 48 × 3,207,168 = 153,944,064 B (146.8 MiB) per sequence (docs/engine-facts.md §3).
QWEN36_27B_STATE_BYTES = 48 * (61_440 + 3_145_728)


def _deployment(engine: str, spec: str) -> Deployment:
    scenario = resolve(PredictRequest(model="qwen3.6-27b", gpu="b200", weight_dtype="fp8", engine=engine, spec=spec))
    config, model, gpu = scenario.config, scenario.model, scenario.gpu
    ev = evaluate(model, gpu, config, EFF, LengthDist(1000), LengthDist(100), 1.0)
    assert isinstance(ev, Evaluation)
    return ev.deployment


def _round(d: Deployment, state_bytes: float, transfers: int) -> Deployment:
    """Our round numbers: 4 TB/s HBM, no GDN FLOPs, ``state_bytes`` per sequence."""
    return replace(
        d,
        gpu=replace(d.gpu, hbm_bytes_per_s=4e12),
        gdn_flops_per_token=0.0,
        memory=replace(
            d.memory,
            state_bytes_per_sequence_per_gpu=state_bytes,
            sequence_shards=1,
            spec_commit_state_transfers=transfers,
        ),
    )


def test_sglang_copies_the_accepted_state_back_after_each_verify():
    d = _deployment("sglang", "mtp:1")
    # 8 sequences, 1e8 B of state each, 4e12 × 0.8 = 3.2e12 B/s.
    # MTP k = 1 verifies 2 tokens per sequence: the verify kernel reads the state once and writes
    # 2 intermediate states (3 transfers); SGLang's copy reads the accepted one and writes it into
    # the slot (2 more): 8 × (1 + 2 + 2) × 1e8 = 4e9 B → 1.25 ms.
    with_copy = step_time(_round(d, 1e8, 2), EFF, decode_seqs=8, context_tokens=1000, query_tokens_per_seq=2)
    assert with_copy.state_s == pytest.approx(1.25e-3)
    # Without the copy (an engine that reads the accepted state in place): 8 × 3 × 1e8 = 2.4e9 B → 0.75 ms.
    without = step_time(_round(d, 1e8, 0), EFF, decode_seqs=8, context_tokens=1000, query_tokens_per_seq=2)
    assert without.state_s == pytest.approx(0.75e-3)
    # A plain decode step (no verify) has no copy: 8 × (1 + 1) × 1e8 = 1.6e9 B → 0.5 ms.
    plain = step_time(_round(d, 1e8, 2), EFF, decode_seqs=8, context_tokens=1000)
    assert plain.state_s == pytest.approx(0.5e-3)


def test_state_transfers_per_output_token_at_k1():
    # The figure: at k = 1 and τ = 1.73 accepted tokens per verify, 5 state transfers per
    # verify step are 5 / 1.73 = 2.890 per output token (3 / 1.73 = 1.734 without the copy);
    # plain decode moves 2 per token. One sequence of Qwen3.6-27B at 4e12 × 0.8 B/s:
    # 5 × 153,944,064 B = 769,720,320 B → 0.240538 ms per verify step.
    d = _round(_deployment("sglang", "mtp:1"), QWEN36_27B_STATE_BYTES, 2)
    verify = step_time(d, EFF, decode_seqs=1, context_tokens=1000, query_tokens_per_seq=2)
    assert verify.state_s == pytest.approx(769_720_320 / 3.2e12)
    assert verify.state_s / 1.73 / (QWEN36_27B_STATE_BYTES / 3.2e12) == pytest.approx(2.890, abs=5e-4)


def test_the_planner_counts_the_copy_for_sglang_only():
    # SGLang's pools declare the copy (S20); with MTP the memory model carries 2 transfers.
    assert _deployment("sglang", "mtp:1").memory.spec_commit_state_transfers == 2
    # Without speculation there is no verify to copy after.
    assert _deployment("sglang", "none").memory.spec_commit_state_transfers == 0
    # vLLM: no copy is modelled (its source was not read for this; its pools leave the flag off).
    assert _deployment("vllm", "mtp:1").memory.spec_commit_state_transfers == 0
    # The real state size reaches the step: one SGLang verify of one sequence at k = 1 moves 5 states.
    d = _deployment("sglang", "mtp:1")
    assert d.memory.state_bytes_per_sequence_per_gpu == QWEN36_27B_STATE_BYTES
    real = step_time(d, EFF, decode_seqs=1, context_tokens=1000, query_tokens_per_seq=2)
    assert real.state_s == pytest.approx(5 * QWEN36_27B_STATE_BYTES / (d.gpu.hbm_bytes_per_s * EFF.hbm_fraction))
