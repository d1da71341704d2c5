"""An answer that calls tools, end to end through the fault server: its ``tool_calls`` are kept on
the stored assistant turn (OpenAI's message form: id, type, function name and arguments) and go
with it into the exports; a training row whose answer only calls (blank text) goes to
``train.unvalidated.jsonl`` (SpecForge's validator refuses blank content), one with text beside its
calls stays in ``train.jsonl``; both count under ``export.tool_calls``,
never as "no answer text". Streamed answers carry the calls in pieces (``delta.tool_calls``), joined
as the OpenAI SDK joins them. Every expected value is written out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from tests.support.fault_server import FaultServerProcess
from tests.support.specforge_rules import validator_problem

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.runner.store.appendlog import iter_records, shard_paths
from tokenplan.runner.store.export import export_run

FAST = {"retry_base_delay_s": 0.01, "probe_interval_s": 0.2, "eject_after_failures": 1000}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
WEATHER = {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
TIME = {"id": "call_10", "type": "function", "function": {"name": "get_time", "arguments": '{"tz":"CET"}'}}
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}


def _batch_line(custom_id: str, question: str) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": question}], "tools": TOOLS}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


def _whole(message: dict, finish: str) -> dict:
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": "fault-model",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": USAGE,
    }
    return {"status": 200, "raw": json.dumps(body)}


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"model": "fault-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse(*chunks: dict) -> dict:
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return {"status": 200, "raw": raw, "content_type": "text/event-stream"}


def _run(tmp_path: Path, lines: list[str], script: list[dict], **options) -> tuple:
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "script.json").write_text(json.dumps(script))
    sent = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), script=str(tmp_path / "script.json"), log_bodies=str(sent)) as server:
        request = GenerateRequest.build(
            inputs=[str(tmp_path / "in.jsonl")],
            out_dir=tmp_path / "run",
            endpoints=[server.url],
            model="fault-model",
            concurrency=1,  # one request at a time: the k-th request gets the k-th scripted answer
            export=str(tmp_path / "train.jsonl"),
            **FAST,
            **options,
        )
        result = generate(request)
        rerun = generate(request)
    bodies = [json.loads(line) for line in sent.read_text().splitlines()]
    return result, rerun, bodies


def _stored(tmp_path: Path) -> dict[str, dict]:
    return {r["id"]: r for shard in shard_paths(tmp_path / "run" / "shards") for _, r in iter_records(shard)}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_tool_calls_are_stored_and_exported_beside_the_training_file(tmp_path: Path) -> None:
    lines = [
        _batch_line("t0", "Weather in Paris?"),
        _batch_line("t1", "Weather and time?"),
        '{"id": "p0", "prompt": "Hi"}',
    ]
    script = [
        _whole({"content": None, "tool_calls": [WEATHER]}, "tool_calls"),
        _whole(
            {"content": "Let me check.", "reasoning_content": "need tools", "tool_calls": [WEATHER, TIME]}, "tool_calls"
        ),
        _whole({"content": "Hello!", "reasoning_content": "greet", "tool_calls": []}, "stop"),  # vLLM's [] is no call
    ]
    result, rerun, bodies = _run(tmp_path, lines, script)
    assert (result.stored, result.errors, result.accounting_ok) == (3, 0, True)
    assert bodies[0]["tools"] == TOOLS  # the row's tools were sent
    stored = _stored(tmp_path)
    assert stored["t0"]["conversations"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER]},
    ]
    assert stored["t1"]["conversations"][1] == {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "need tools",
        "tool_calls": [WEATHER, TIME],
    }
    assert stored["p0"]["conversations"][1] == {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"}
    assert [stored[i]["turns"][0].get("tool_calls") for i in ("t0", "t1", "p0")] == [1, 2, None]
    # the training file keeps the rows with text (t1's calls beside its text: SpecForge's validator
    # reads role and content, its parser keeps tool_calls); the call with blank text goes to the
    # companion file, whole
    main = _jsonl(tmp_path / "train.jsonl")
    assert sorted(row["id"] for row in main) == ["p0", "t1"]
    t1 = next(row for row in main if row["id"] == "t1")
    assert t1["conversations"][1] == {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "need tools",
        "tool_calls": [WEATHER, TIME],
    }
    assert all(validator_problem(row) is None for row in main)
    side = _jsonl(tmp_path / "train.unvalidated.jsonl")
    assert side == [
        {
            "method": "POST",
            "url": "/v1/chat/completions",
            "id": "t0",
            "conversations": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [WEATHER]},
            ],
            "status": "success",
        },
    ]
    export = result.summary["export"]
    # 3 rows written, 1 of them aside, 2 with a generated call (t0 aside, t1 in the main file)
    assert (export["written"], export["unvalidated"], export["tool_calls"], export["dropped_empty_answer"]) == (
        3,
        1,
        2,
        0,
    )
    # done is done: the rerun sends nothing more
    assert (rerun.stored, rerun.already_done, len(bodies)) == (3, 3, 3)
    # Parquet: the calls on the assistant message (arrow.json text)
    export_run(tmp_path / "run", tmp_path / "run.parquet", "parquet")
    rows = {row["id"]: row for row in pq.read_table(tmp_path / "run.parquet").to_pylist()}
    assert json.loads(rows["t1"]["conversations"][1]["tool_calls"]) == [WEATHER, TIME]
    assert rows["p0"]["conversations"][1]["tool_calls"] is None
    # OpenAI Batch output: the message as the server would give it back
    export_run(tmp_path / "run", tmp_path / "batch.jsonl", "openai-batch")
    batch = {line["custom_id"]: line for line in _jsonl(tmp_path / "batch.jsonl")}
    choice = batch["t0"]["response"]["body"]["choices"][0]
    assert (choice["message"]["tool_calls"], choice["finish_reason"]) == ([WEATHER], "tool_calls")


def test_streamed_tool_calls_are_joined_from_their_pieces(tmp_path: Path) -> None:
    pieces = _sse(
        _chunk({"role": "assistant", "content": None}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "call_10", "type": "function", "function": {"name": "get_time"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Paris"}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz":"CET"}'}}]}),
        _chunk({}, "tool_calls"),
        {"model": "fault-model", "choices": [], "usage": USAGE},
    )
    result, rerun, bodies = _run(tmp_path, [_batch_line("t0", "Weather in Paris?")], [pieces], stream=True)
    assert (result.stored, result.errors, rerun.already_done, len(bodies)) == (1, 0, 1, 1)
    record = _stored(tmp_path)["t0"]
    assert record["conversations"][1] == {"role": "assistant", "content": "", "tool_calls": [WEATHER, TIME]}
    turn = record["turns"][0]
    assert (turn["finish_reason"], turn["tool_calls"], turn["ttft_s"] is not None) == ("tool_calls", 2, True)
    assert _jsonl(tmp_path / "train.jsonl") == []
    (line,) = _jsonl(tmp_path / "train.unvalidated.jsonl")
    assert line["conversations"][1]["tool_calls"] == [WEATHER, TIME]
    assert (result.summary["export"]["unvalidated"], result.summary["export"]["tool_calls"]) == (1, 1)


def test_a_call_in_an_earlier_turn_is_sent_with_the_next_request(tmp_path: Path) -> None:
    # regenerate: the second request shows the model the first answer as stored, calls included
    row = {
        "id": "r0",
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        ],
    }
    script = [_whole({"content": "", "tool_calls": [WEATHER]}, "tool_calls"), _whole({"content": "done"}, "stop")]
    result, _, bodies = _run(tmp_path, [json.dumps(row)], script)
    assert result.stored == 1
    assert bodies[1]["messages"] == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER]},
        {"role": "user", "content": "q2"},
    ]
    assert _stored(tmp_path)["r0"]["conversations"] == [
        *bodies[1]["messages"],
        {"role": "assistant", "content": "done"},
    ]
    assert [t.get("tool_calls") for t in _stored(tmp_path)["r0"]["turns"]] == [1, None]


def test_a_tool_calls_finish_with_no_call_and_no_text_is_an_error_not_a_stored_answer(tmp_path: Path) -> None:
    script = [_whole({"content": None}, "tool_calls")]
    result, rerun, _ = _run(tmp_path, [_batch_line("t0", "Weather in Paris?")], script, max_attempts=2)
    assert (result.stored, result.errors, rerun.stored) == (0, 1, 0)
    (error,) = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert error["detail"] == (
        "empty answer: content null, no reasoning, no tool call, finish_reason 'tool_calls', completion_tokens 7"
    )


def test_a_messages_rows_own_tools_are_sent_and_its_call_kept(tmp_path: Path) -> None:
    # a break-it pass: a messages row's top-level tools (OpenAI function definitions) were kept in
    # the export and never sent; they go with its request now, as a Batch line's body.tools do
    line = json.dumps(
        {
            "id": "m0",
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": TOOLS,
            "tool_choice": "auto",
        }
    )
    result, _, bodies = _run(tmp_path, [line], [_whole({"content": "", "tool_calls": [WEATHER]}, "tool_calls")])
    assert (result.stored, result.errors) == (1, 0)
    assert (bodies[0]["tools"], bodies[0]["tool_choice"]) == (TOOLS, "auto")
    assert _stored(tmp_path)["m0"]["conversations"][1] == {"role": "assistant", "content": "", "tool_calls": [WEATHER]}
