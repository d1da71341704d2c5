"""Inputs that bench, calibrate --from-bench/--from-run and report refuse in one line before any
work: a server the model cannot run, a dataset that cannot be sent, sizes beyond any context,
figures of the wrong type in the JSON files they read (a break-it session found each crashing
or hanging)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from tokenplan.api.bench import BenchRequest, bench, read_bench_json
from tokenplan.api.resolve import PredictRequest, check_server_description
from tokenplan.bench.measure import MAX_LENGTH_TOKENS
from tokenplan.bench.workload import dataset_workload
from tokenplan.errors import ConfigError, InfeasibleError, InputError
from tokenplan.files.reports import load_bench, load_plan
from tokenplan.runner.limits import MAX_CONCURRENCY

SERVER = PredictRequest(model="llama-3.1-8b", gpu="h100-sxm")


@pytest.mark.parametrize(
    ("change", "error", "text"),
    [
        ({"tp": 3, "num_gpus": 3}, InfeasibleError, "TP3 does not divide the 32 attention heads"),
        ({"ep": 4}, InfeasibleError, "EP needs a mixture-of-experts model"),
        ({"num_gpus": 0}, InputError, "num_gpus 0 is not allowed"),
    ],
)
def test_a_server_the_model_cannot_run_is_refused_before_any_measurement(change, error, text) -> None:
    with pytest.raises(error, match=text):
        check_server_description(replace(SERVER, **change))
    check_server_description(SERVER)  # Llama-3.1-8B BF16 (16 GB) runs on one 80 GB H100


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"[" * 100_000, "not valid JSON (nested too deeply)"),
        (b"\xc3\x28{}", "encoding: cannot be read as UTF-8"),  # (ff fe: a UTF-16 mark, tokenplan.sniff's)
        (b'{"messages": [5]}\n', "line 1: 'messages' item 0 is not a message"),
        (b'{"messages": []}\n', "line 1: 'messages' is empty"),
        (b'{"messages": [{"role": "user", "content": null}]}\n', "line 1: 'messages' item 0 has no text 'content'"),
        (b'{"prompt": "  "}\n', "line 1: an empty prompt"),
        # 'messages' there but not a list: said as such, not "no 'messages', 'conversations', …"
        (b'{"messages": "not a list"}\n', "line 1: 'messages' is str, not a non-empty list of turns"),
    ],
    ids=["nested", "not_utf8", "message_not_object", "no_messages", "null_content", "blank_prompt", "messages_text"],
)
def test_a_dataset_that_cannot_be_sent_is_one_line(tmp_path, body, where) -> None:
    f = tmp_path / "d.jsonl"
    f.write_bytes(body)
    with pytest.raises(ConfigError, match=re.escape(where)):
        dataset_workload(str(f), 16, None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"concurrencies": (MAX_CONCURRENCY + 1,)}, "concurrency"),
        ({"isl": MAX_LENGTH_TOKENS + 1}, "isl"),
        ({"osl": MAX_LENGTH_TOKENS + 1}, "osl"),
        ({"deadline_s": float("nan")}, "request_timeout"),
        ({"deadline_s": 0.0}, "request_timeout"),
        ({"warmup_requests": -1}, "warmup"),
    ],
)
def test_sizes_beyond_any_context_and_meaningless_limits_are_refused_before_the_servers(change, field) -> None:
    # The endpoint does not listen: the refusal comes first, from the options alone.
    req = replace(
        BenchRequest(endpoints=("http://127.0.0.1:9/v1",), model="m", concurrencies=(1,), isl=16, osl=4), **change
    )
    with pytest.raises(InputError, match=f"^{field} "):
        bench(req)


def _bench_json(**level: object) -> dict:
    base = {
        "concurrency": 1,
        "requests": 4,
        "errors": 0,
        "duration_s": 1.0,
        "output_tok_s": 100.0,
        "ttft_s": {"p50": 0.1, "p99": 0.2},
    }
    return {"model": "m", "endpoints": ["http://a/v1", "http://b/v1"], "num_gpus": None, "levels": [{**base, **level}]}


def test_bench_files_with_figures_of_the_wrong_type_name_the_field(tmp_path) -> None:
    f = tmp_path / "b.json"
    f.write_text(json.dumps(_bench_json()))
    assert load_bench(f).num_gpus is None  # bench writes null without --num-gpus: accepted
    read_bench_json(str(f))
    f.write_text(json.dumps(_bench_json(output_tok_s="100")))
    with pytest.raises(ConfigError, match=r"levels\[0\]\.output_tok_s: expected a number, got '100'"):
        read_bench_json(str(f))
    f.write_text(json.dumps(_bench_json(tpot_s={"mean": "x"})))
    with pytest.raises(ConfigError, match=r"levels\[0\]\.tpot_s\.mean: expected a number, got 'x'"):
        load_bench(f)


def test_a_plan_file_with_text_for_a_figure_names_the_field(tmp_path) -> None:
    f = tmp_path / "p.json"
    plan = _written_plan()
    plan["options"][0]["output_tok_s_total"] = "53,486"
    f.write_text(json.dumps(plan))
    with pytest.raises(
        ConfigError, match=r"options\[0\]\.output_tok_s_total: '53,486' is not allowed \(allowed: a finite number\)$"
    ):
        load_plan(f)


def _written_plan() -> dict:
    """A plan as ``tokenplan plan --gpu 8xb200 --spec none --json`` writes it."""
    from tokenplan.api.plan import PlanRequest, plan

    return plan(PlanRequest(gpus=("8xb200",), specs=("none",))).to_json()
