"""Speculative acceptance on hand-made metrics and answers: each engine's names, counters read as
window differences, gauges, per-request verification counts and their context buckets, pooling
over levels, and ``plan``'s τ from a bench file."""

from __future__ import annotations

import json

import pytest

from tokenplan.bench.acceptance import (
    AcceptanceReading,
    AcceptanceWindow,
    acceptance_reading,
    level_acceptance,
    request_acceptance,
)
from tokenplan.bench.acceptance_sweep import sweep_acceptance
from tokenplan.client.answers import Completion, RequestFailed, Timings, Usage, parse_whole
from tokenplan.client.stream import StreamAccumulator
from tokenplan.errors import InputError
from tokenplan.files.bench_tau import bench_tau, resolve_spec


def _vllm(drafts: tuple[float, float], accepted: tuple[float, float], per_pos: list[tuple[float, float]]) -> str:
    """vLLM's counters as prometheus_client writes them, for a 2-engine data-parallel server."""
    rows = ["# TYPE vllm:spec_decode_num_drafts_total counter"]
    rows += [f'vllm:spec_decode_num_drafts_total{{engine="{e}",model_name="m"}} {v}' for e, v in enumerate(drafts)]
    rows += [f'vllm:spec_decode_num_drafts_created{{engine="{e}",model_name="m"}} 1.7e9' for e in range(2)]
    rows += ["# TYPE vllm:spec_decode_num_draft_tokens_total counter"]
    rows += [
        f'vllm:spec_decode_num_draft_tokens_total{{engine="{e}",model_name="m"}} {3 * v}' for e, v in enumerate(drafts)
    ]
    rows += ["# TYPE vllm:spec_decode_num_accepted_tokens_total counter"]
    rows += [
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="{e}",model_name="m"}} {v}' for e, v in enumerate(accepted)
    ]
    rows += ["# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    rows += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="m",position="{p}"}} {v}'
        for p, values in enumerate(per_pos)
        for e, v in enumerate(values)
    ]
    return "\n".join(rows) + "\n"


def test_vllm_counters_are_summed_over_engines_and_kept_per_position():
    r = acceptance_reading(_vllm((60, 40), (150, 100), [(50, 30), (40, 30), (60, 40)]))
    assert r == AcceptanceReading("vllm", 100.0, 300.0, 250.0, (80.0, 70.0, 100.0))


def test_tau_is_a_window_difference_not_the_lifetime_totals():
    start = acceptance_reading(_vllm((60, 40), (100, 50), [(40, 20), (30, 20), (20, 10)]))
    end = acceptance_reading(_vllm((160, 140), (300, 250), [(120, 100), (90, 80), (60, 50)]))
    acc = AcceptanceWindow.between(start, end).to_dict()
    # Δdrafts = 300 − 100 = 200, Δaccepted = 550 − 150 = 400 → τ = 1 + 400/200 = 3.0 (lifetime
    # totals would give 1 + 550/300 = 2.83); per position (220−60)/200, (170−50)/200, (110−30)/200;
    # rate 400 / (3 · 200) = 0.6667.
    assert acc["tau"] == pytest.approx(3.0)
    assert acc["per_position"] == pytest.approx([0.8, 0.6, 0.4])
    assert acc["acceptance_rate"] == pytest.approx(400 / 600)
    assert acc["source"] == "counters" and acc["drafts"] == 200


def test_sglang_gauge_is_averaged_over_the_window_and_its_initial_zero_left_out():
    def gauge(v: float) -> AcceptanceReading:
        return acceptance_reading(
            f'# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{{tp_rank="0"}} {v}\n'
        )

    assert gauge(0.0) == AcceptanceReading("sglang")  # 0: no logging interval yet, not τ = 0
    acc = AcceptanceWindow.between(gauge(0.0), gauge(3.0), [gauge(0.0), gauge(2.5), gauge(2.8)]).to_dict()
    assert acc["source"] == "gauge" and acc["gauge_readings"] == 3
    assert acc["tau"] == pytest.approx((2.5 + 2.8 + 3.0) / 3)  # 2.7667; the end reading counts, the start does not


def test_trtllm_drafts_are_position_zeros_drafted_tokens():
    def text(drafted: list[float], accepted: list[float], gauge: float) -> str:
        rows = ["# TYPE trtllm_spec_decode_drafted_tokens_total counter"]
        rows += [f'trtllm_spec_decode_drafted_tokens_total{{token_position="{i}"}} {v}' for i, v in enumerate(drafted)]
        rows += ["# TYPE trtllm_spec_decode_accepted_tokens_total counter"]
        rows += [
            f'trtllm_spec_decode_accepted_tokens_total{{token_position="{i}"}} {v}' for i, v in enumerate(accepted)
        ]
        rows += ["# TYPE trtllm_spec_decode_acceptance_length gauge", f"trtllm_spec_decode_acceptance_length {gauge}"]
        return "\n".join(rows) + "\n"

    start = acceptance_reading(text([10, 10], [5, 2], 1.7))
    end = acceptance_reading(text([110, 110], [95, 72], 2.6))
    acc = AcceptanceWindow.between(start, end).to_dict()
    # drafts = Δdrafted[0] = 100; accepted = 90 + 70 = 160 → τ = 2.6; per position 0.9, 0.7;
    # rate 160 / (100 + 100) = 0.8
    assert acc["tau"] == pytest.approx(2.6) and acc["per_position"] == pytest.approx([0.9, 0.7])
    assert acc["acceptance_rate"] == pytest.approx(0.8) and acc["engine"] == "trtllm"


def test_no_acceptance_metrics_is_none():
    assert acceptance_reading("vllm:num_requests_running 3\n") is None


def _answer(prompt: int, completion: int, verify: int | None) -> Completion:
    return Completion("x", None, "length", Usage(prompt, completion, None), Timings(0.0, 1.0), "m", verify)


def test_request_tau_is_token_weighted_and_bucketed_by_prompt_plus_completion():
    answers = [
        _answer(1000, 1000, 500),  # context 2,000: < 2K, τ 2
        _answer(1048, 1000, 250),  # context 2,048: the 2–8K bucket's lower edge, τ 4
        _answer(6000, 2000, 1000),  # context 8,000: 2–8K, τ 2
        _answer(30000, 100, None),
    ]  # no verification count: left out
    acc = request_acceptance(answers)
    # overall: (1000 + 1000 + 2000) / (500 + 250 + 1000) = 4000 / 1750 = 2.2857 (the mean of the
    # per-request τ would be 2.667)
    assert acc["tau"] == pytest.approx(4000 / 1750) and acc["requests"] == 3
    small, mid = acc["context_buckets"]
    assert (small["bucket"], small["requests"], small["tau"]) == ("<2K", 1, 2.0)
    # 2–8K: (1000 + 2000) / (250 + 1000) = 2.4; decode context (1548 + 7000) / 2 = 4274
    assert (mid["bucket"], mid["requests"]) == ("2–8K", 2) and mid["tau"] == pytest.approx(2.4)
    assert mid["mean_context_tokens"] == (2048 + 8000) / 2 and mid["mean_decode_context_tokens"] == 4274
    assert request_acceptance([_answer(10, 10, None)]) is None


def test_levels_are_pooled_by_tokens_not_by_averaging_tau():
    def level(drafts: float, accepted: float) -> dict:
        w = AcceptanceWindow("vllm", drafts, 3 * drafts, accepted, (accepted,), None, 0)
        return {"acceptance": level_acceptance([w], [], 100, 100)}

    levels = [level(100, 200), level(300, 300)]  # τ 3 and τ 2
    assert [lv["acceptance"]["context_tokens"] for lv in levels] == [150, 150]
    pooled = sweep_acceptance(levels)
    # 1 + (200 + 300) / (100 + 300) = 2.25, not (3 + 2) / 2
    assert pooled["tau"] == pytest.approx(2.25) and pooled["per_position"] == pytest.approx([1.25])
    assert sweep_acceptance([{"acceptance": None}]) is None


def test_answers_carry_sglangs_verify_count_and_refuse_a_malformed_one():
    # top level (SGLang's native /generate shape) or on the choice (its chat route with return_meta_info)
    body = {
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "hi"}}],
        "meta_info": {"spec_verify_ct": 87},
    }
    assert parse_whole(json.dumps(body).encode(), Timings(0, 1)).spec_verify_ct == 87
    body["meta_info"] = {"spec_verify_ct": -1}
    with pytest.raises(RequestFailed, match="meta_info.spec_verify_ct is -1"):
        parse_whole(json.dumps(body).encode(), Timings(0, 1))
    body["meta_info"] = "87"
    with pytest.raises(RequestFailed, match="meta_info is str, not an object"):
        parse_whole(json.dumps(body).encode(), Timings(0, 1))
    acc = StreamAccumulator()
    acc.feed(b'{"choices": [{"index": 0, "delta": {"content": "a"}}]}', 0.1)
    acc.feed(
        b'{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "meta_info": {"spec_verify_ct": 3}}', 0.2
    )
    assert acc.completion(0.0, 0.3).spec_verify_ct == 3
    choice = {"index": 0, "finish_reason": "stop", "message": {"content": "hi"}, "meta_info": {"spec_verify_ct": 5}}
    assert parse_whole(json.dumps({"model": "m", "choices": [choice]}).encode(), Timings(0, 1)).spec_verify_ct == 5
    plain = {"model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "hi"}}]}
    assert parse_whole(json.dumps(plain).encode(), Timings(0, 1)).spec_verify_ct is None


def _bench_file(tmp_path, acceptance: dict | None) -> str:
    path = tmp_path / "b.json"
    path.write_text(
        json.dumps(
            {
                "model": "m",
                "num_gpus": None,
                "acceptance": acceptance,
                "levels": [{"concurrency": 1, "requests": 1, "errors": 0, "duration_s": 1.0, "output_tok_s": 10.0}],
            }
        )
    )
    return str(path)


def test_plan_tau_from_per_position_then_nearest_context_bucket(tmp_path):
    per_pos = _bench_file(tmp_path, {"tau": 2.952, "source": "server counters", "per_position": [0.8, 0.64, 0.512]})
    assert bench_tau(per_pos, 2, 3000)[0] == pytest.approx(1 + 0.8 + 0.64)  # 2.44: K = 2 of 3 positions
    with pytest.raises(InputError, match="at most 3, the draft positions b.json measured"):
        bench_tau(per_pos, 4, 3000)
    buckets = [
        {"bucket": "<2K", "requests": 4, "mean_decode_context_tokens": 900, "tau": 3.1},
        {"bucket": "8–32K", "requests": 4, "mean_decode_context_tokens": 12000, "tau": 2.2},
    ]
    by_context = _bench_file(
        tmp_path, {"tau": 2.6, "source": "requests", "per_position": [], "context_buckets": buckets}
    )
    # job decode context 1,024 + 8,000/2 = 5,024: |ln(5024/900)| = 1.72 > |ln(5024/12000)| = 0.87
    text, note = resolve_spec("mtp:3:" + by_context, 1024, 8000)
    assert text == "mtp:3:2.2" and "8–32K context bucket" in note
    assert resolve_spec("mtp:3:2.5", 1024, 8000) == ("mtp:3:2.5", None)
    with pytest.raises(InputError, match="measured speculative acceptance"):
        bench_tau(_bench_file(tmp_path, None), 3, 1000)
    with pytest.raises(InputError, match="path of an existing"):
        resolve_spec("mtp:3:" + str(tmp_path / "missing.json"), 1024, 8000)
    # newuser finding 11: the message says the file is not there, not only what is allowed
    with pytest.raises(InputError, match=r"; .*missing\.json does not exist\)$"):
        resolve_spec("mtp:3:" + str(tmp_path / "missing.json"), 1024, 8000)
    # a plan JSON named as the bench file said "plan.json: num_gpus: missing"
    (tmp_path / "plan.json").write_text('{"schema_version": 1, "job": {}, "options": []}')
    with pytest.raises(InputError, match=r"plan\.json is neither \(its keys: job, options, schema_version\)\)$"):
        resolve_spec("mtp:3:" + str(tmp_path / "plan.json"), 1024, 8000)


def test_plan_tau_from_vllm_bench_serve_results_pooled_by_drafts(tmp_path):
    # Two --append-result runs: τ 3.0 over 100 drafts, per position 0.9, 0.6, 0.5; τ 2.0 over 300
    # drafts, per position 0.6, 0.3, 0.1. Pooled: position 0 (0.9·100 + 0.6·300) / 400 = 0.675,
    # 1: (60 + 90) / 400 = 0.375, 2: (50 + 30) / 400 = 0.2; τ(K=2) = 1 + 0.675 + 0.375 = 2.05.
    path = tmp_path / "vllm.jsonl"
    runs = [
        {
            "completed": 8,
            "spec_decode_acceptance_length": 3.0,
            "spec_decode_num_drafts": 100,
            "spec_decode_per_position_acceptance_rates": [0.9, 0.6, 0.5],
        },
        {
            "completed": 8,
            "spec_decode_acceptance_length": 2.0,
            "spec_decode_num_drafts": 300,
            "spec_decode_per_position_acceptance_rates": [0.6, 0.3, 0.1],
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in runs) + "\n")
    tau, note = bench_tau(str(path), 2, 3000)
    assert tau == pytest.approx(2.05) and "vllm bench serve" in note
