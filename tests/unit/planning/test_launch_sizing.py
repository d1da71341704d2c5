"""Launch commands hold the planned batch: the KV pool each printed command sets holds the batch
at the 90th percentile of its summed running context, derived here by hand; every value quoted."""

from __future__ import annotations

import math
import re
import shlex

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.engines.base import EngineSettings, Launch
from tokenplan.engines.launch import MaxRunning
from tokenplan.job.workload import lognormal_with_mean
from tokenplan.perf.layout import Layout
from tokenplan.units import Dtype

GIB = 2**30


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _capped_moment(mean_uncapped: float, sigma: float, cap: float, k: int) -> float:
    # E[min(X, c)^k] for X ~ LN(μ, σ), μ = ln(mean) − σ²/2 (partial moments of the lognormal):
    # e^{kμ + k²σ²/2}·Φ((ln c − μ − kσ²)/σ) + c^k·(1 − Φ((ln c − μ)/σ))
    mu = math.log(mean_uncapped) - sigma**2 / 2
    z = (math.log(cap) - mu) / sigma
    return math.exp(k * mu + k * k * sigma * sigma / 2) * _phi(z - k * sigma) + cap**k * (1 - _phi(z))


@pytest.fixture(scope="module")
def b200() -> dict:
    return plan(PlanRequest(gpus=("8xb200",), specs=("none",))).to_json()["options"][0]


def test_default_b200_sglang_pool_holds_the_batch_at_the_p90_context(b200):
    # The default job: ISL lognormal mean 1,024 σ 0.8 cap 16,384; OSL mean 2,500 σ 1 cap 32,768
    # (capped means; the uncapped lognormals' means come from lognormal_with_mean).
    isl_m = lognormal_with_mean(1024, 0.8, 16384).mean_tokens
    osl_m = lognormal_with_mean(2500, 1.0, 32768).mean_tokens
    i1, i2 = (_capped_moment(isl_m, 0.8, 16384, k) for k in (1, 2))
    e1, e2, e3 = (_capped_moment(osl_m, 1.0, 32768, k) for k in (1, 2, 3))
    # SGLang: a running request holds ISL + U·L, L length-biased: E[A] = E[L²]/(2E[L]),
    # E[A²] = E[L³]/(3E[L]); Var = Var(ISL) + Var(A).
    a1, a2 = e2 / (2 * e1), e3 / (3 * e1)
    mean, sd = i1 + a1, math.sqrt(i2 - i1 * i1 + a2 - a1 * a1)
    assert 4_150 < mean < 4_250  # 1,024 + 3,175: the cap trims E[L²] below 2,500² × e = 17.0 M
    batch = b200["max_running_requests"]
    assert b200["layout"] == "TP1×DP8" and batch == 406
    # p90 of the sum of 406 contexts: 406·m + 1.2816·√406·s
    needed = batch * mean + 1.2816 * math.sqrt(batch) * sd
    cmd = b200["launch"]["sglang"]
    fraction = float(re.search(r"--mem-fraction-static (\S+)", cmd).group(1))
    # B200: 183,359 MiB nominal × 0.996 CUDA-visible; SGLang takes the fraction of what is free
    # after its 0.5 GiB CUDA context (TP1: no communicators), less the weights (S3).
    visible = 183_359 * 2**20 * 0.996
    weights = b200["weight_bytes_per_gpu"]
    # the state term is 406 requests' GDN state + SGLang's padded slot (S18), 407 slots; the pad
    # row comes out of the headroom, the 406 out of the fraction (S3 handle_max_mamba_cache)
    state = b200["memory_allocation"]["state"] / 407 * 406
    kv_per_token = 16 * 4 * 256 * 2 * 1  # 16 full-attention layers × 4 KV heads × 256 × (K, V) × FP8 = 32,768 B

    def pool_tokens(f: float) -> float:
        return ((visible - 0.5 * GIB) * f - weights - state) / kv_per_token

    assert pool_tokens(fraction) >= needed
    # the default 0.780 (the fraction at the mean context) does not hold it
    assert pool_tokens(0.780) < needed
    # and the fraction keeps SGLang's own S1 reserve: 512 + 1.5 × 16,384 + 1,024/8 + 2 × 512 MiB = 25.625 GiB
    assert fraction <= 1 - 25.625 * GIB / (visible - 0.5 * GIB)


def test_default_b200_vllm_and_trtllm_commands_hold_what_they_cap(b200):
    # vLLM's 0.92 default already holds 406 (the command writes it); TRT-LLM reserves whole
    # requests (ISL + length-biased OSL ≈ 1,024 + 6,7xx tokens), its default 0.90 cannot be raised,
    # so its --max_batch_size drops below 406.
    vllm = b200["launch"]["vllm"]
    assert "--gpu-memory-utilization 0.92" in vllm and "--max-num-seqs 406" in vllm
    trt = int(re.search(r"--max_batch_size (\d+)", b200["launch"]["trtllm"]).group(1))
    assert 1 <= trt < 406


def test_every_value_is_quoted():
    path, parser = "/models/my model/o'brien", "qwen3"
    launch = Launch(
        repo=path,
        native_dtype="bf16",
        parsers=parser,
        layout=Layout(tp=2),
        weight_dtype=Dtype.BF16,
        kv_dtype=Dtype.BF16,
        spec_method="mtp",
        draft_tokens=1,
        ssm_dtype=None,
        hybrid=False,
        max_running=MaxRunning(),
        planned_running=64,
        settings=EngineSettings(0.85, 0.0, False, 8192, 256, None),
        planned_engine="sglang",
    )
    from tokenplan.catalog import load_engine

    for name, flag in (("sglang", "--model-path"), ("vllm", "serve"), ("trtllm", "trtllm-serve")):
        cmd = load_engine(name).launch_command(launch)
        words = shlex.split(cmd.split("EOF\n")[-1], comments=True)
        assert words[words.index(flag) + 1] == path, name
        assert "'/models/my model/o'\"'\"'brien'" in cmd
    vllm = shlex.split(load_engine("vllm").launch_command(launch))
    assert vllm[vllm.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":1}'


def test_running_context_moments_of_fixed_lengths():
    from tokenplan.job.workload import fixed
    from tokenplan.planning.launch import pool_tokens_needed, running_context_moments

    # ISL 1,000 and OSL 500 fixed: a request running at a random instant holds 1,000 + U·500
    # (U uniform): mean 1,250, sd 500/√12 = 144.34; with the whole output reserved (TRT-LLM)
    # it holds exactly 1,500.
    mean, sd = running_context_moments(fixed(1000), fixed(500), whole_output=False)
    assert mean == pytest.approx(1250) and sd == pytest.approx(500 / math.sqrt(12))
    assert running_context_moments(fixed(1000), fixed(500), whole_output=True) == pytest.approx((1500, 0))
    # 100 of them at the 90th percentile: 125,000 + 1.28155 × 10 × 144.34 = 126,849.8
    assert pool_tokens_needed(100, mean, sd) == pytest.approx(125_000 + 1.281552 * 10 * 500 / math.sqrt(12), rel=1e-6)


def test_another_engines_launch_whose_state_leaves_no_kv_room_caps_at_one_and_does_not_crash():
    # a break-it pass: plan --model qwen3-next-80b-a3b --gpu 2xl40s --engine vllm ended in a
    # ZeroDivisionError sizing the SGLang launch, whose state pool takes the whole pool on 48 GB
    # GPUs (no memory fraction gives KV room); its launch now caps at the 1 request it is said to hold
    o = plan(PlanRequest(model="qwen3-next-80b-a3b", gpus=("2xl40s",), engine="vllm")).to_json()["options"][0]
    sglang = shlex.split(o["launch"]["sglang"])
    assert sglang[sglang.index("--max-running-requests") + 1] == "1"
    assert any(w.startswith("the SGLang launch (in --json) caps the batch at 1 per replica") for w in o["warnings"])
