"""Issue 15, outputs and defaults: request bodies, truncated thinking, exports, limits, sampling."""

from __future__ import annotations

import asyncio
import json
import resource
from pathlib import Path

import pytest

from tokenplan.client.openai import Completion, Timings, Usage
from tokenplan.errors import InputError
from tokenplan.files.plan_hint import plan_max_tokens
from tokenplan.runner.defaults import choose_sampling, read_generation_config
from tokenplan.runner.input.shapes import Message, Row, parse_row
from tokenplan.runner.limits import RESERVE_FDS, check_open_files
from tokenplan.runner.requests import (
    BodyConflict,
    Sampling,
    Sent,
    prompt_prefixes,
    request_body,
    run_unit,
    stored_record,
    work_units,
)
from tokenplan.runner.store.export import batch_line, export_lines, specforge_line
from tokenplan.runner.store.record import OutputRecord


def test_extra_body_nested_objects_merge_with_tokenplans_own() -> None:
    sampling = Sampling(max_tokens=8, thinking=False, extra_body={"chat_template_kwargs": {"reasoning_effort": "low"}})
    body = request_body("m", [], sampling, seed=1)
    assert body["chat_template_kwargs"] == {"enable_thinking": False, "reasoning_effort": "low"}


def test_extra_body_contradicting_an_option_is_a_conflict_naming_the_path() -> None:
    sampling = Sampling(max_tokens=8, thinking=False, extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    with pytest.raises(
        BodyConflict,
        match=r"chat_template_kwargs\.enable_thinking: --extra-body sets True but "
        r"tokenplan's options set False",
    ):
        request_body("m", [], sampling, seed=1)
    # the same value twice is no conflict; a top-level scalar stays --extra-body's to override
    same = Sampling(
        max_tokens=8, thinking=True, extra_body={"chat_template_kwargs": {"enable_thinking": True}, "max_tokens": 9}
    )
    assert request_body("m", [], same, seed=1)["max_tokens"] == 9


def test_a_rows_batch_overrides_win_over_the_job_sampling() -> None:
    sampling = Sampling(max_tokens=4096, temperature=0.6, extra_body={"chat_template_kwargs": {"x": 1}})
    body = request_body(
        "m", [], sampling, seed=1, overrides={"max_tokens": 77, "temperature": 0.0, "chat_template_kwargs": {"y": 2}}
    )
    assert (body["max_tokens"], body["temperature"], body["chat_template_kwargs"]) == (77, 0.0, {"x": 1, "y": 2})


def _send(content: str, finish: str, reasoning: str | None = None):
    async def send(messages, turn, retry):
        return Sent(Completion(content, reasoning, finish, Usage(3, 5, None), Timings(0.0, 1.0), "m"), "e", 1, 7)

    return send


def test_a_length_cut_answer_inside_an_unclosed_think_becomes_truncated_reasoning() -> None:
    unit = list(work_units(Row("r", (Message("user", "q"),), "prompt", "f", 1), 1))[0]
    record = asyncio.run(run_unit(unit, "complete", "keep", 0, _send("<think>\nstep one, step tw", "length")))
    assert record.conversations[-1] == {"role": "assistant", "content": "", "reasoning_content": "step one, step tw"}
    assert record.turns[0].reasoning_truncated is True and record.turns[0].length_flag is True
    # (a closed <think>…</think> was already split by the client into content and reasoning)
    closed = asyncio.run(run_unit(unit, "complete", "keep", 0, _send("b", "length", reasoning="a")))
    assert closed.conversations[-1]["content"] == "b" and closed.turns[0].reasoning_truncated is False
    # a stop finish that happens to start with <think> is left as the server gave it (not cut by max_tokens)
    odd = asyncio.run(run_unit(unit, "complete", "keep", 0, _send("<think>x", "stop")))
    assert odd.conversations[-1] == {"role": "assistant", "content": "<think>x"}


def test_the_record_keeps_the_rows_fields_and_overrides() -> None:
    row = parse_row(
        {
            "custom_id": "c",
            "category": "math",
            "body": {"messages": [{"role": "user", "content": "q"}], "max_tokens": 5},
        },
        "f",
        1,
    )
    unit = list(work_units(row, 1))[0]
    answered = asyncio.run(run_unit(unit, "complete", "keep", 0, _send("a", "stop")))
    record = stored_record(unit, answered, "m", {"temperature": 0.0}).to_json()
    assert record["fields"] == {"category": "math"} and record["request_overrides"] == {"max_tokens": 5}
    # the row's place and the job's values, after the row's own (the order every version wrote)
    assert list(record) == [
        "id",
        "conversations",
        "turns",
        "request_overrides",
        "fields",
        "source_id",
        "sample_index",
        "model",
        "sampling",
        "source",
    ]
    assert (record["source_id"], record["sample_index"], record["source"]) == ("c", 0, {"file": "f", "line": 1})


def test_regenerate_keeps_tool_calls_and_regenerates_the_answer_after_the_tool() -> None:
    u = Message("user", "add 1 and 2")
    call = Message("assistant", "", (("tool_calls", [{"id": "c"}]),))
    tool = Message("tool", "3", (("tool_call_id", "c"),))
    final = Message("assistant", "It is 3.")
    # one request, after the tool answer; the tool-calling turn is context, the final answer regenerated
    assert prompt_prefixes((u, call, tool, final), "regenerate") == [[u, call, tool]]
    assert prompt_prefixes((u, call, tool, final), "complete") == [[u, call, tool]]


def test_generation_config_do_sample_false_means_greedy_and_only_present_keys_are_read(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "eos_token_id": 2})
    )
    assert read_generation_config(tmp_path) == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    greedy = tmp_path / "g.json"
    greedy.write_text(json.dumps({"do_sample": False, "temperature": 0.7}))
    assert read_generation_config(greedy) == {"temperature": 0.0}
    with pytest.raises(InputError, match="--generation-config"):
        read_generation_config(tmp_path / "missing.json")


def test_sampling_order_option_then_plan_then_generation_config_then_fallback() -> None:
    config = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    chosen = choose_sampling(
        {"max_tokens": None, "temperature": None, "top_p": 0.8, "top_k": None},
        32768,
        Path("plan.json"),
        config,
        Path("gc.json"),
    )
    assert (chosen.max_tokens, chosen.temperature, chosen.top_p, chosen.top_k) == (32768, 0.6, 0.8, 20)
    assert "max_tokens 32,768 (the plan plan.json's output cap)" in chosen.notes
    assert "sampling from gc.json: temperature 0.6, top_k 20" in chosen.notes
    bare = choose_sampling({}, None, None, None, None)
    # 32,768: `tokenplan plan`'s default output cap (issue 26: a 4,096 default cut ~16 % of its answers)
    assert (bare.max_tokens, bare.temperature, bare.context_tokens) == (32768, 0.0, None)
    assert any("greedy" in n and "Qwen3" in n for n in bare.notes)
    in_context = choose_sampling({}, None, None, None, None, (40960, "max_position_embeddings of x"))
    assert (in_context.max_tokens, in_context.context_tokens) == (40960, 40960)
    assert in_context.notes[0].startswith(
        "max_tokens: the model's context 40,960 (max_position_embeddings of x) less each prompt"
    )


def test_a_plan_cap_past_the_models_context_asks_each_request_for_what_its_context_leaves() -> None:
    # Llama-2-70B's 4,096-token context under the default plan's 32,768-token cap: as max_tokens
    # every request was refused (a break-it pass). Each now asks for min(32,768, 4,096 − its prompt);
    # a cap below the context is sent as it is (the job's identity is unchanged there).
    context = (4096, "max_position_embeddings of meta-llama/Llama-2-70b-hf")
    past = choose_sampling({}, 32768, Path("plan.json"), None, None, context)
    assert (past.max_tokens, past.context_tokens) == (32768, 4096)
    assert past.notes[0] == (
        "max_tokens 32,768 (the plan plan.json's output cap), less each prompt where the two pass the "
        "model's context 4,096 (max_position_embeddings of meta-llama/Llama-2-70b-hf)"
    )
    within = choose_sampling({}, 2048, Path("plan.json"), None, None, context)
    assert (within.max_tokens, within.context_tokens) == (2048, None)


def test_each_request_asks_what_its_prompt_leaves_of_the_context_or_lets_the_server_say() -> None:
    # The bound: 64 + Σ(32 + JSON bytes of each message). A prompt of "q": {"role":"user",
    # "content":"q"} is 29 bytes → 64 + 32 + 29 = 125, so 2,048 − 125 = 1,923 tokens of room.
    # A prompt of 3,000 "x": 3,028 bytes → a bound of 3,124 > 2,048: it asks 2,047, one under the
    # context, so that the server's refusal states the prompt's tokens and the room
    # (runner.control.context_room); before, it asked 1 token and stored that answer as done.
    sampling = Sampling(max_tokens=32768, context_tokens=2048)
    short = request_body("m", [{"role": "user", "content": "q"}], sampling, seed=1)
    assert short["max_tokens"] == 2048 - (64 + 32 + 29) == 1923
    long = request_body("m", [{"role": "user", "content": "x" * 3000}], sampling, seed=1)
    assert long["max_tokens"] == 2047


def test_the_plans_output_cap_is_read_from_the_number_or_the_text() -> None:
    assert plan_max_tokens({"job": {"osl_cap_tokens": 32768.0}}) == 32768
    assert plan_max_tokens({"job": {"osl": "lognormal mean 2,500, σ 1, cap 32,768"}}) == 32768
    assert plan_max_tokens({"job": {"osl": "fixed 1,024"}}) is None and plan_max_tokens({}) is None


RECORD_JSON = {
    "id": "c1",
    "source_id": "c1",
    "model": "m",
    "fields": {"category": "math", "id_hint": 1},
    "conversations": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
    ],
    "turns": [
        {
            "finish_reason": "stop",
            "length_flag": False,
            "reasoning_truncated": False,
            "usage": {"prompt_tokens": 3, "completion_tokens": 5},
            "model": "m",
        }
    ],
}

RECORD = OutputRecord.from_json(RECORD_JSON)


def test_specforge_line_keeps_the_input_fields_reasoning_content_and_says_success() -> None:
    # SpecForge renamed "thinking" to "reasoning_content" in afa1f4fb (2026-03-17) and its validator
    # requires status "success" (scripts/validate_regenerated_data.py, 69e18e6b); an input that was
    # itself a SpecForge output brings its own status, which the export's replaces.
    record = OutputRecord.from_json({**RECORD_JSON, "fields": {**RECORD_JSON["fields"], "status": "error"}})
    assert specforge_line(record) == {
        "category": "math",
        "id_hint": 1,
        "status": "success",
        "id": "c1",
        "conversations": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning_content": "r"},
        ],
    }


def test_batch_line_has_the_openai_batch_output_fields() -> None:
    line = batch_line(RECORD)
    assert list(line) == ["id", "custom_id", "response", "error"] and line["error"] is None
    assert line["custom_id"] == "c1" and line["id"].startswith("batch_req_")
    response = line["response"]
    assert response["status_code"] == 200 and response["request_id"].startswith("req_")
    body = response["body"]
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "a", "reasoning_content": "r"}
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}  # 3 + 5
    assert batch_line(RECORD) == line  # ids derive from the unit id: a rerun writes the same line


def test_export_filters_count_what_they_leave_out(tmp_path: Path) -> None:
    shards = tmp_path / "run" / "shards"
    shards.mkdir(parents=True)
    cut = {
        **RECORD_JSON,
        "id": "cut",
        "turns": [{**RECORD_JSON["turns"][0], "length_flag": True, "reasoning_truncated": True}],
    }
    think = {**RECORD_JSON, "id": "think", "turns": [{**RECORD_JSON["turns"][0], "reasoning_truncated": True}]}
    (shards / "part-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (RECORD_JSON, cut, think)))
    counts = export_lines(tmp_path / "run", tmp_path / "out.jsonl", "jsonl", drop_length=True, require_think_close=True)
    assert (counts.written, counts.dropped_length, counts.dropped_think_open) == (1, 1, 1)
    assert [json.loads(x)["id"] for x in (tmp_path / "out.jsonl").read_text().splitlines()] == ["c1"]


def test_the_soft_open_file_limit_is_raised_and_a_concurrency_beyond_the_hard_limit_refused() -> None:
    check_open_files(10)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard or hard == resource.RLIM_INFINITY
    if hard != resource.RLIM_INFINITY:
        with pytest.raises(InputError, match=rf"at most {hard - RESERVE_FDS:,} requests in flight"):
            check_open_files(hard)
