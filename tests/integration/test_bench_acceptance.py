"""``tokenplan bench`` reads speculative acceptance from fakes of vLLM, SGLang and TensorRT-LLM.

The fake is ``tests/support/sim_server.py --spec ENGINE:K:P0[:DECAY]`` (law in
``tests/support/spec_metrics.py``): a chain of k = 3 drafts, each accepted with probability p given
the ones before, so position i (0-based) is accepted in a fraction p^(i+1) of the steps and
τ = 1 + p + p² + p³. With p = 0.8 (no decay), by hand:

    per position 0.8, 0.8² = 0.64, 0.8³ = 0.512;  τ = 1 + 0.8 + 0.64 + 0.512 = 2.952.

With decay β = 0.1, p = 0.8·(1 − 0.1·ln(context / 1,000)) above 1,000 tokens of context
(prompt + max_tokens), by hand:

    1,000:  p = 0.8                                  τ = 2.952
    4,000:  ln 4 = 1.386294, p = 0.8·0.861371 = 0.689096, p² = 0.474854, p³ = 0.327222, τ = 2.491172
    16,000: ln 16 = 2.772589, p = 0.8·0.722741 = 0.578193, p² = 0.334307, p³ = 0.193294, τ = 2.105794
    64,000: ln 64 = 4.158883, p = 0.8·0.584112 = 0.467289, p² = 0.218359, p³ = 0.102037, τ = 1.787685

Every answer of 512 tokens takes round(512/τ) verification steps (``meta_info.spec_verify_ct``):
173, 206, 243, 286 → τ per request 2.960, 2.485, 2.107, 1.790, each within 0.3 % of the law.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.sim_server import GENERATION_PROMPT_TOKENS, TEMPLATE_TOKENS, SimServerProcess  # noqa: E402

from tokenplan.api.bench import BenchRequest, bench  # noqa: E402

TAU = 2.952
PER_POSITION = [0.8, 0.64, 0.512]
DECAY_TAU = {1_000: 2.952, 4_000: 2.491172, 16_000: 2.105794, 64_000: 1.787685}
OSL = 256


def _run(tmp_path: Path, spec: str, **request) -> dict:
    with SimServerProcess(str(tmp_path), a_ms=2, b_ms=0.1, cap=32, spec=spec) as server:
        return bench(replace(BenchRequest((server.url,), "sim-model", (4,), 64, OSL), num_prompts=8, **request)).data


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_counters_give_tau_and_per_position_within_one_percent(tmp_path, engine):
    data = _run(tmp_path, f"{engine}:3:0.8")
    (lv,) = data["levels"]
    acc = lv["acceptance"]
    assert acc["source"] == "server counters" and acc["server"]["engine"] == engine
    assert acc["tau"] == pytest.approx(TAU, rel=0.01)
    assert acc["server"]["per_position"] == pytest.approx(PER_POSITION, rel=0.01)
    # accepted / drafted tokens = (τ − 1) / k = 1.952 / 3 = 0.650667
    assert acc["server"]["acceptance_rate"] == pytest.approx(0.650667, rel=0.01)
    # A window's difference, not the lifetime counters: drafts × τ = the tokens generated in the
    # window (8 answers × 256). The probe's and warm-up's tokens before it (≥ 4 × 16 = 64, 3 %)
    # would show in lifetime counters.
    assert acc["server"]["drafts"] * acc["tau"] == pytest.approx(8 * OSL, rel=0.01)
    assert lv["output_tokens"] == 8 * OSL
    assert lv["server"]["output_tok_s"] is not None  # TensorRT-LLM's state is read too (its own route)
    assert lv["spec_decode_acceptance_length"] == acc["tau"]  # vllm bench serve's names
    assert lv["spec_decode_per_position_acceptance_rates"] == acc["server"]["per_position"]
    assert data["acceptance"]["tau"] == pytest.approx(TAU, rel=0.01)
    assert any("τ has no context buckets" in note for note in data["notes"])  # counters carry no context


def test_sglang_gauge_and_verify_counts_within_one_percent(tmp_path):
    # SGLang returns meta_info on whole answers only, to requests with return_meta_info (sent
    # because the server answers /get_server_info)
    data = _run(tmp_path, "sglang:3:0.8", stream=False)
    (lv,) = data["levels"]
    acc = lv["acceptance"]
    assert acc["server"]["source"] == "gauge" and acc["server"]["gauge_readings"] >= 1
    assert acc["server"]["tau"] == pytest.approx(TAU, rel=0.01)
    # per request: 256 tokens in round(256 / 2.952) = round(86.72) = 87 steps → 2.9425
    assert acc["source"] == "requests" and acc["requests"]["requests"] == 8
    assert acc["requests"]["verify_steps"] == 8 * 87
    assert acc["tau"] == pytest.approx(TAU, rel=0.01)
    assert "spec_decode_acceptance_length" not in lv  # vllm bench serve reports counters only
    streamed = _run(tmp_path, "sglang:3:0.8")["levels"][0]["acceptance"]  # no meta_info: the gauge alone
    assert streamed["source"] == "server gauge" and streamed["requests"] is None
    assert streamed["tau"] == pytest.approx(TAU, rel=0.01)


def test_context_buckets_show_acceptance_falling_with_context(tmp_path):
    # One prompt per context; prompt tokens = words + TEMPLATE_TOKENS + GENERATION_PROMPT_TOKENS.
    dataset = tmp_path / "long.jsonl"
    overhead = TEMPLATE_TOKENS + GENERATION_PROMPT_TOKENS
    with dataset.open("w") as f:
        for context in DECAY_TAU:
            words = context - 512 - overhead
            f.write(json.dumps({"prompt": " ".join(f"w{i % 997}" for i in range(words)), "max_tokens": 512}) + "\n")
    with SimServerProcess(str(tmp_path), a_ms=1, b_ms=0.05, cap=32, spec="sglang:3:0.8:0.1") as server:
        data = bench(
            replace(
                BenchRequest((server.url,), "sim-model", (8,), None, 512, dataset=str(dataset)),
                num_prompts=8,
                warmup_requests=0,
                stream=False,
            )
        ).data
    buckets = data["acceptance"]["context_buckets"]
    assert [b["bucket"] for b in buckets] == ["<2K", "2–8K", "8–32K", "≥32K"]
    assert [b["mean_context_tokens"] for b in buckets] == list(DECAY_TAU)
    assert all(b["requests"] == 2 for b in buckets)
    for b, tau in zip(buckets, DECAY_TAU.values()):
        assert b["tau"] == pytest.approx(tau, rel=0.01)
    taus = [b["tau"] for b in buckets]
    assert taus == sorted(taus, reverse=True)


def test_counters_alone_give_tau_at_each_levels_context(tmp_path):
    # vLLM exposes no per-request counts: τ belongs to the level's mean decode context
    # (prompt + answer / 2). Context 1,000 (488 + 512) and 16,000 (15,488 + 512).
    with SimServerProcess(str(tmp_path), a_ms=1, b_ms=0.05, cap=32, spec="vllm:3:0.8:0.1") as server:
        runs = [
            bench(
                replace(BenchRequest((server.url,), "sim-model", (4,), isl, 512), num_prompts=4, warmup_requests=0)
            ).data
            for isl in (488, 15_488)
        ]
    short, long = (r["levels"][0]["acceptance"] for r in runs)
    assert (short["context_tokens"], long["context_tokens"]) == (488 + 256, 15_488 + 256)
    assert short["tau"] == pytest.approx(DECAY_TAU[1_000], rel=0.01)
    assert long["tau"] == pytest.approx(DECAY_TAU[16_000], rel=0.01)
    assert not runs[0]["acceptance"]["context_buckets"]  # no per-request counts, no buckets


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenplan", *args], capture_output=True, text=True, timeout=300)


def test_plan_takes_tau_from_a_bench_file(tmp_path):
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(_run(tmp_path, "vllm:3:0.8")))
    r = _cli("plan", "--gpu", "8xb200", "--spec", f"mtp:3:{saved}", "--spec", f"mtp:1:{saved}", "--json")
    assert r.returncode == 0, r.stderr
    answer = " ".join(json.loads(r.stdout)["answer"])
    # k = 3: 1 + 0.8 + 0.64 + 0.512 = 2.952; k = 1: 1 + 0.8 = 1.8 (from the per-position acceptance)
    assert "τ 2.95 for k=3 from bench.json" in answer and "τ 1.80 for k=1 from bench.json" in answer
    r = _cli("bench", "--from-json", str(saved))  # the report shows it too
    assert r.returncode == 0 and "speculative acceptance" in r.stdout and "2.95" in r.stdout, r.stderr
    r = _cli("plan", "--gpu", "8xb200", "--spec", f"mtp:4:{saved}")
    assert (r.returncode, r.stderr) == (
        2,
        f"error: --spec 'mtp:4:{saved}' is not allowed (allowed: K at most 3, the draft positions bench.json measured)\n",
    )
    plain = json.loads(saved.read_text())
    plain["acceptance"] = None
    saved.write_text(json.dumps(plain))
    r = _cli("plan", "--gpu", "8xb200", "--spec", f"mtp:3:{saved}")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "measured speculative acceptance" in r.stderr
