"""Issue 26 end to end, through the fault server: a row no record can hold is rejected before
sending and never stops the run or a rerun; an answer that is not really finished is not stored
as finished; option values no request or record can carry are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.runner.store.appendlog import iter_records, shard_paths
from tokenplan.runner.store.export import export_run

FAST = {"retry_base_delay_s": 0.01, "probe_interval_s": 0.2, "eject_after_failures": 1000}
CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]
SRC = str(Path(__file__).resolve().parents[2] / "src")
USER = {"role": "user", "content": "u"}
# One bad row per case of the issue, each with the reason it must be rejected for (the start of it).
BAD_ROWS = [
    ('{"id": "deep", "prompt": "p", "meta": ' + "[" * 300 + "]" * 300 + "}", "meta: nested more than 252 levels"),
    (
        r'{"id": "calls", "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "",'
        r' "tool_calls": [{"id": "\ud800"}]}, {"role": "tool", "content": "t"}, {"role": "user", "content": "v"}]}',
        "messages[1].tool_calls[0].id: lone UTF-16 surrogate",
    ),
    (
        r'{"custom_id": "batch", "body": {"messages": [{"role": "user", "content": "u"}], "stop": ["\udc00"]}}',
        "body.stop[0]: lone UTF-16 surrogate",
    ),
    ('{"id": "nan", "prompt": "p", "score": NaN}', "score: nan is not a finite number"),
    ('{"id": "inf", "prompt": "p", "score": Infinity}', "score: inf is not a finite number"),
    ('{"id": "big", "prompt": "p", "n": 36893488147419103232}', "n: integer 36893488147419103232 is outside"),
]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stored(run: Path) -> dict[str, dict]:
    return {record["id"]: record for shard in shard_paths(run / "shards") for _, record in iter_records(shard)}


def _request(tmp_path: Path, url: str, **options) -> GenerateRequest:
    return GenerateRequest.build(
        **{
            "inputs": [str(tmp_path / "in.jsonl")],
            "out_dir": tmp_path / "run",
            "endpoints": [url],
            "model": "fault-model",
            **FAST,
            **options,
        }
    )


def _scripted(tmp_path: Path, entries: list[dict], name: str = "script.json") -> FaultServerProcess:
    script = tmp_path / name
    script.write_text(json.dumps(entries))
    return FaultServerProcess(str(tmp_path), script=str(script))


def _answer(message: dict, finish: str = "stop", completion_tokens: int = 500) -> dict:
    body = {
        "model": "fault-model",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens},
    }
    return {"raw": json.dumps(body)}


def test_rows_no_record_can_hold_are_rejected_before_sending_and_reruns_finish(tmp_path: Path) -> None:
    good = [json.dumps({"id": f"g{i}", "prompt": f"prompt {i}", "tags": {"k": [i]}}) for i in range(3)]
    lines = [good[0], *(line for line, _ in BAD_ROWS), good[1], good[2]]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    sent = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), log_bodies=str(sent)) as server:
        first = generate(_request(tmp_path, server.url))
        rerun = generate(_request(tmp_path, server.url))
    # 9 lines: 3 good rows stored, 6 rejected with their reasons, in input order (lines 2–7).
    assert (first.stored, first.rejected_rows, first.errors, first.accounting_ok) == (3, 6, 0, True)
    assert sorted(_stored(tmp_path / "run")) == ["g0", "g1", "g2"]
    rejects = _jsonl(tmp_path / "run" / "rejects.jsonl")
    assert [r["line"] for r in rejects[:6]] == [2, 3, 4, 5, 6, 7]
    for reject, (_, reason) in zip(rejects, BAD_ROWS):
        assert reject["reason"].startswith(reason), reject
    # nothing of a bad row was sent: each request asked one of the three good prompts
    asked = {body["messages"][-1]["content"] for body in _jsonl(sent)}
    assert asked == {"prompt 0", "prompt 1", "prompt 2"}
    # the rerun reads the same rows, rejects the same six again, sends nothing and stores nothing twice
    assert (rerun.stored, rerun.already_done, rerun.rejected_rows, rerun.accounting_ok) == (3, 3, 6, True)
    assert len(_jsonl(sent)) == 3


def test_an_empty_answer_is_retried_then_an_error_and_a_rerun_stores_the_real_answer(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "r0", "prompt": "p"}\n')
    with _scripted(tmp_path, [_answer({"content": None})]) as server:
        first = generate(_request(tmp_path, server.url, max_attempts=3))
    assert (first.stored, first.errors) == (0, 1) and _stored(tmp_path / "run") == {}
    (error,) = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert error["reason"] == "protocol" and error["attempts"] == 3
    assert error["detail"] == ("empty answer: content null, no reasoning, finish_reason 'stop', completion_tokens 500")
    with _scripted(tmp_path, [_answer({"content": "the answer"}, completion_tokens=2)], "good.json") as server:
        rerun = generate(_request(tmp_path, server.url))
    assert rerun.stored == 1
    assert _stored(tmp_path / "run")["r0"]["conversations"][-1] == {"role": "assistant", "content": "the answer"}


def test_raw_harmony_channels_are_stored_as_reasoning_and_answer(tmp_path: Path) -> None:
    # The cookbook's example answer (openai-cookbook articles/openai-harmony.md), as trtllm-serve
    # returned it in content (NVIDIA/TensorRT-LLM#9256).
    raw = (
        '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|>'
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>"
    )
    (tmp_path / "in.jsonl").write_text('{"id": "r0", "prompt": "What is 2 + 2?"}\n')
    with _scripted(tmp_path, [_answer({"content": raw}, completion_tokens=30)]) as server:
        result = generate(_request(tmp_path, server.url))
    assert result.stored == 1
    answer = _stored(tmp_path / "run")["r0"]["conversations"][-1]
    assert answer == {
        "role": "assistant",
        "content": "2 + 2 = 4.",
        "reasoning_content": 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.',
    }
    export_run(tmp_path / "run", tmp_path / "train.jsonl", "jsonl")
    (line,) = _jsonl(tmp_path / "train.jsonl")
    assert "<|" not in json.dumps(line)  # no Harmony marker reaches the training file


def test_harmony_with_a_tool_call_and_no_final_answer_is_an_error_not_a_stored_answer(tmp_path: Path) -> None:
    raw = '<|channel|>commentary<|message|>{"path": "/", "name_pattern": "*Chen*"}<|end|>'  # TensorRT-LLM#9256
    (tmp_path / "in.jsonl").write_text('{"id": "r0", "prompt": "p"}\n')
    with _scripted(tmp_path, [_answer({"content": raw})]) as server:
        result = generate(_request(tmp_path, server.url, max_attempts=2))
    assert (result.stored, result.errors) == (0, 1)
    (error,) = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert error["reason"] == "protocol" and "channel 'commentary' in the answer" in error["detail"]


def _cli(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "in.jsonl").write_text('{"id": "r0", "prompt": "p"}\n')
    return subprocess.run(
        [
            *CLI,
            str(tmp_path / "in.jsonl"),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": SRC, **(env or {})},
    )


@pytest.mark.parametrize(
    ("options", "start", "says"),
    [
        # --extra-body is read by the bounded loader (tokenplan.loaders, MAX_NESTING = 64 levels)
        (
            ["--extra-body", '{"a": ' + "[" * 300 + "]" * 300 + "}"],
            "error: --extra-body ",
            "nested deeper than 64 levels",
        ),
        (
            ["--extra-body", '{"a": ' + "[" * 5000 + "]" * 5000 + "}"],
            "error: --extra-body ",
            "nested deeper than 64 levels",
        ),
        (["--extra-body", '{"logit_bias": {"1": NaN}}'], "error: --extra-body ", "extra_body.logit_bias.1: nan is not"),
        (
            ["--extra-body", '{"min_tokens": 18446744073709551616}'],
            "error: --extra-body ",
            "extra_body.min_tokens: integer 18446744073709551616 is outside",
        ),
        (
            ["--extra-body", '{"max_completion_tokens": 99}'],
            "error: --extra-body ",
            "max_completion_tokens (max_tokens's other name: use --max-tokens)",
        ),
    ],
)
def test_an_extra_body_no_request_or_record_can_carry_is_refused_in_one_line(
    tmp_path: Path, options: list[str], start: str, says: str
) -> None:
    done = _cli(tmp_path, *options)
    assert done.returncode == 2 and done.stderr.startswith(start) and done.stderr.count("\n") == 1, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr) < 1000  # the value is shortened, not printed 300 levels deep
    assert not (tmp_path / "run").exists()


def test_max_completion_tokens_in_extra_body_is_allowed_with_the_override(tmp_path: Path) -> None:
    request = _request(
        tmp_path, "http://127.0.0.1:9/v1", extra_body={"max_completion_tokens": 9}, extra_body_override=True
    )
    assert request.sampling.extra_body == {"max_completion_tokens": 9}


def test_an_api_key_with_a_line_break_is_refused_by_name_before_anything_is_sent(tmp_path: Path) -> None:
    done = _cli(tmp_path, "--api-key-env", "TP_KEY", env={"TP_KEY": "sk-secret-value\r\n"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: --api-key-env 'TP_KEY' is not allowed")
    assert "U+000D at character 16" in done.stderr  # "sk-secret-value" is 15 characters, then CR
    assert "secret" not in done.stdout + done.stderr
    assert not (tmp_path / "run").exists()
