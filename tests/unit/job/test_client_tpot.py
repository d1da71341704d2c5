"""TPOT as a benchmark client times it: from a request's first token, so the prefill work before
that token (its own prompt; in a wave, the prompts prefilled ahead of it) is in its TTFT."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.catalog import load_engine, shipped_efficiency
from tokenplan.job.batching import steady_state
from tokenplan.job.workload import fixed


def _at(concurrency: int, wave_fraction: float):
    ev = resolve(
        PredictRequest("qwen3.6-27b", "h200", engine="sglang", isl=8192, osl=1024, concurrency=concurrency)
    ).evaluate()
    eff = replace(shipped_efficiency().resolve("sglang", "hopper"), prefill_wave_fraction=wave_fraction)
    engine = load_engine("sglang")
    return steady_state(ev.deployment, eff, engine, ev.settings, fixed(8192), fixed(1024), concurrency)


def test_alone_a_clients_tpot_is_the_decode_step():
    # Concurrency 1, SGLang (prefill apart from decode): a cycle is the request's own prefill and
    # 1,024 decode steps at batch 1. The prefill ends with its first token, so the client's TPOT
    # holds only the decode steps: TPOT = (cycle − own prefill) / 1,024 = the decode step.
    st = _at(1, 0.2)
    assert st.batch == 1
    assert st.tpot_s == pytest.approx(st.decode_step.total_s, rel=1e-9)
    assert st.tpot_s < st.cycle_s / 1024  # the whole cycle per token would count the prefill twice


def test_in_a_wave_the_prompts_ahead_are_ttft_not_tpot():
    # Concurrency 16 of fixed lengths: with every arrival in a wave (fraction 1) the 16 prompts are
    # prefilled back to back before decoding resumes; request i has its first token after i of
    # them, so on average half the wave's prefill (plus its own prompt) moves from its TPOT to its
    # TTFT. Throughput does not change (16 × 1,024 tokens per cycle either way); TPOT × OSL +
    # the mean time to the first token within the wave is the cycle in both cases.
    random, wave = _at(16, 0.0), _at(16, 1.0)
    assert wave.output_tok_s == pytest.approx(random.output_tok_s, rel=1e-9)
    assert wave.cycle_s == pytest.approx(random.cycle_s, rel=1e-9)
    assert wave.tpot_s < random.tpot_s
    moved = (random.tpot_s - wave.tpot_s) * 1024  # seconds moved from TPOT to TTFT
    prefill = wave.cycle_s * wave.prefill_share  # the wave's 16 prompts
    # the prompts ahead of a request in a wave: 15/2 of 16 on average, less than the whole prefill
    assert 0.3 * prefill < moved < 0.5 * prefill


def test_with_a_queue_in_the_replica_every_arrival_is_in_a_wave():
    # Concurrency 1,024 against a replica that runs 42 (state slots): freed slots refill from the
    # server's queue in one pass, so every batch is a wave whatever the fitted share of waves
    # among client arrivals; TPOT and TTFT then do not depend on that share.
    low, high = _at(1024, 0.02), _at(1024, 1.0)
    assert low.batch < 1024 and low.batch == high.batch
    assert low.tpot_s == pytest.approx(high.tpot_s, rel=1e-12)
    assert low.ttft_s == pytest.approx(high.ttft_s, rel=1e-12)
    # and the wave's prompts ahead of a request are out of its TPOT: well below the cycle per token
    assert low.tpot_s < 0.85 * low.cycle_s / 1024
