"""The bench JSON and a run's summary.json read back into their types (tokenplan.bench_schema,
tokenplan.run_summary): a written object reads back to the same object and rewrites to the same
bytes; a figure of the wrong type is one line naming its path."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplan.bench.levels import LevelResult, level_dict
from tokenplan.bench_schema import BenchLevel, BenchResult
from tokenplan.errors import ConfigError
from tokenplan.run_summary import ExportCounts, RunSummary


def ordered(fields: dict) -> st.SearchStrategy[dict]:
    """fixed_dictionaries with the keys in ``fields``' order (the order bench writes them)."""
    return st.fixed_dictionaries(fields).map(lambda d: {k: d[k] for k in fields})


finite = st.floats(min_value=0, max_value=1e9, allow_nan=False)
maybe = st.none() | finite
latency = ordered({k: maybe for k in ("mean", "p50", "p90", "p99")})
server = st.none() | ordered(
    {
        k: maybe
        for k in (
            "generation_tokens",
            "output_tok_s",
            "preemptions",
            "running_mean",
            "running_max",
            "waiting_mean",
            "waiting_max",
            "samples",
            "queued_samples",
            "kv_usage_max",
        )
    }
)
ms = {
    f"{stat}_{name}_ms": maybe for name in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p90", "p99")
}
level = ordered(
    {
        "concurrency": st.integers(1, 4096),
        "achieved_concurrency": finite,
        "requests": st.integers(0, 10**6),
        "errors": st.integers(0, 10**6),
        "error_samples": st.lists(st.text(max_size=20), max_size=5),
        "duration_s": finite,
        "request_throughput_per_s": finite,
        "output_tok_s": maybe,
        "total_tok_s": maybe,
        "token_count_method": st.none() | st.sampled_from(["usage", "stream chunks"]),
        "output_tokens": st.none() | st.integers(0, 10**9),
        "input_tokens": st.none() | st.integers(0, 10**9),
        "mean_input_tokens": maybe,
        "mean_output_tokens": maybe,
        "window_start_unix_s": finite,
        "window_end_unix_s": finite,
        "ttft_s": latency,
        "tpot_s": latency,
        "itl_s": latency,
        "e2e_s": latency,
        "server": server,
        "acceptance": st.none(),
        "completed": st.integers(0, 10**6),
        "max_concurrency": st.none() | st.integers(1, 4096),
        "request_rate": st.just("inf") | finite,
        "total_input_tokens": st.none() | st.integers(0, 10**9),
        "total_output_tokens": st.none() | st.integers(0, 10**9),
        "request_throughput": finite,
        "output_throughput": maybe,
        "total_token_throughput": maybe,
        **ms,
    }
)

# A level as bench writes it where the server's counters measured speculation (bench.acceptance):
# 100 drafts of 3 tokens, 180 accepted -> τ = 1 + 180/100 = 2.8, rate 180/300 = 0.6 (60 % in vLLM's
# spec_decode_acceptance_rate), per position 80/100, 60/100, 40/100.
SPEC = {
    "acceptance": {
        "tau": 2.8,
        "source": "server counters",
        "context_tokens": 80.0,
        "server": {
            "engine": "vllm",
            "source": "counters",
            "tau": 2.8,
            "acceptance_rate": 0.6,
            "per_position": [0.8, 0.6, 0.4],
            "drafts": 100,
            "draft_tokens": 300,
            "accepted_tokens": 180,
            "gauge_readings": 0,
        },
        "requests": None,
    },
    "spec_decode_acceptance_rate": 60.0,
    "spec_decode_acceptance_length": 2.8,
    "spec_decode_num_drafts": 100,
    "spec_decode_draft_tokens": 300,
    "spec_decode_accepted_tokens": 180,
    "spec_decode_per_position_acceptance_rates": [0.8, 0.6, 0.4],
}


def _bench(levels: list[dict]) -> dict:
    return {
        "schema_version": 1,
        "model": "m",
        "endpoints": ["http://127.0.0.1:8000/v1"],
        "num_gpus": None,
        "levels": levels,
        "server": {"metrics": True, "server_info": None},
        "cap": {
            "flattens_at_concurrency": None,
            "saturated_output_tok_s": None,
            "queue_grows_at_concurrency": None,
            "max_running_requests": None,
            "source": None,
        },
        "acceptance": None,
        "workload": {
            "method": "random words",
            "isl_tokens": 64,
            "osl_tokens": 32,
            "dataset": None,
            "prompts": 16,
            "exact_fraction": 1.0,
            "ignore_eos": True,
            "stream": True,
            "arrivals": "closed loop",
        },
        "notes": [],
        "stopped": None,
    }


@settings(max_examples=40, deadline=None)
@given(st.lists(level, min_size=1, max_size=3), st.booleans())
def test_a_bench_json_reads_back_and_rewrites_the_same_bytes(levels: list[dict], spec: bool) -> None:
    if spec:
        levels = [{**lv, **SPEC} for lv in levels]
    data = _bench(levels)
    result = BenchResult.from_json(data)
    assert json.dumps(result.to_json(), indent=2) == json.dumps(data, indent=2)
    assert BenchResult.from_json(result.to_json()) == result


def test_the_vllm_names_read_as_one_group_and_only_where_written() -> None:
    base = {"concurrency": 4, "requests": 8, "errors": 0, "duration_s": 2.0, "output_tok_s": 100.0}
    with_spec = BenchLevel.from_json({**base, **SPEC})
    assert with_spec.spec_decode is not None and with_spec.spec_decode.spec_decode_acceptance_rate == 60.0
    assert with_spec.acceptance is not None and with_spec.acceptance.server is not None
    assert with_spec.acceptance.server.per_position == (0.8, 0.6, 0.4)
    assert BenchLevel.from_json(base).spec_decode is None
    assert "spec_decode_acceptance_length" not in BenchLevel.from_json(base).to_json()


def test_a_figure_of_the_wrong_type_is_one_line_naming_its_path() -> None:
    data = _bench([{"concurrency": 4, "requests": "eight", "errors": 0, "duration_s": 2.0, "output_tok_s": 1.0}])
    with pytest.raises(ConfigError) as e:
        BenchResult.from_json(data, "b.json")
    assert "levels[0].requests" in str(e.value) and "'eight'" in str(e.value) and "\n" not in str(e.value)


def test_a_run_summary_reads_the_keys_the_report_draws() -> None:
    summary = {
        "schema_version": 1,
        "model": "m",
        "units_total": 10,
        "stored": 9,
        "errors": 1,
        "elapsed_s": 5.0,
        "output_tokens": 900,
        "output_tok_s": 180.0,
        "requests_per_s": 1.8,
        "latency_e2e": {"p50_ms": 400.0, "p90_ms": 700.0, "p99_ms": 900.0, "mean_ms": 450.0, "count": 9},
        "completion_tokens_histogram": [],  # not declared: ignored
        "export": {"written": 7, "dropped_length": 2, "failed": 0, "unvalidated": 1, "unvalidated_path": "x.jsonl"},
    }
    s = RunSummary.from_json(summary, "summary.json")
    assert (s.stored, s.units_total, s.plan_output_tok_s) == (9, 10, None)
    assert s.latency_e2e is not None and s.latency_e2e.count == 9
    assert s.export == ExportCounts(written=7, dropped_length=2, unvalidated=1, unvalidated_path="x.jsonl")
    assert s.export.left_out() == [(2, "cut by max_tokens")]  # failed 0 is not said
    assert RunSummary.from_json(s.to_json()) == s
    with pytest.raises(ConfigError, match="schema_version"):
        RunSummary.from_json({**summary, "schema_version": 7})


def test_the_level_type_declares_the_keys_bench_writes_in_their_order() -> None:
    # a level whose 2 requests both failed (1 s window): level_dict writes all 46 keys of a level
    # without speculation; the type rewrites them, and in the same order
    written = level_dict(LevelResult(concurrency=2, errors=2, duration_s=1.0))
    assert list(BenchLevel.from_json(written).to_json()) == list(written)
    assert json.dumps(BenchLevel.from_json(written).to_json()) == json.dumps(written)


@pytest.mark.parametrize(
    ("rate", "achieved", "limit", "in_flight"),
    [
        ("inf", 7.6, None, 8.0),  # a closed loop: its concurrency, 8
        (None, 7.6, None, 8.0),  # a file without request_rate: a closed loop
        (2.5, 0.19, None, 0.19),  # open loop: what it held (Little's law), not the 8 requests sent
        (2.5, None, 4, 4.0),  # no achieved figure: its limit
        (2.5, None, None, 8.0),  # neither: the requests it sent
    ],
)
def test_a_level_is_charted_at_the_requests_it_held(rate, achieved, limit, in_flight) -> None:
    level = BenchLevel(
        concurrency=8, achieved_concurrency=achieved, requests=8, errors=0, duration_s=10.0, output_tok_s=100.0,
        max_concurrency=limit, request_rate=rate,
    )  # fmt: skip
    assert level.in_flight == pytest.approx(in_flight)
