"""``generate`` under the faults of issue 11: unfinished or malformed answers, bad rows, a full
disk, two processes on one directory, secrets, and values refused before anything is sent."""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.runner.store import appendlog as rundir_module
from tokenplan.runner.store.appendlog import WriteFailed, iter_records, shard_paths

FAST = {"retry_base_delay_s": 0.01, "probe_interval_s": 0.2, "eject_after_failures": 1000}
CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _prompts(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"prompt {i}"}) + "\n" for i in range(n)))
    return path


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stored(run: Path) -> list[str]:
    return [record["id"] for shard in shard_paths(run / "shards") for _, record in iter_records(shard)]


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


def _scripted(tmp_path: Path, entries: list[dict]) -> FaultServerProcess:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(entries))
    return FaultServerProcess(str(tmp_path), script=str(script))


def _answer(finish: object = "stop", content: object = "done", usage: object = None) -> dict:
    body = {
        "model": "fault-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return {"raw": json.dumps(body)}


def _sse(*chunks: dict, done: bool = True) -> dict:
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")
    return {"raw": raw, "content_type": "text/event-stream"}


def _delta(content: object = None, finish: object = None) -> dict:
    return {
        "model": "fault-model",
        "choices": [{"index": 0, "delta": {} if content is None else {"content": content}, "finish_reason": finish}],
    }


# ---- answers that are not finished are never stored as finished ------------------------------


@pytest.mark.parametrize(
    ("entry", "stream"),
    [
        (_answer("abort"), False),  # vLLM's aborted request
        (_sse(_delta("par"), _delta(None, "abort")), True),  # the same, streamed
        (_sse(_delta("par"), _delta("tial"), done=False), True),  # cut: no finish, no [DONE]
        (_answer(None), False),  # finish_reason missing
        (_answer({"weird": 1}), False),  # not a string
        (_answer("stop", usage={"prompt_tokens": "ten", "completion_tokens": 3}), False),
        (_sse(_delta(12345), _delta(None, "stop")), True),  # delta.content a number
    ],
)
def test_an_unfinished_or_malformed_answer_is_retried_then_recorded_never_stored(
    tmp_path: Path, entry: dict, stream: bool
) -> None:
    _prompts(tmp_path / "in.jsonl", 3)
    with _scripted(tmp_path, [entry]) as server:
        result = generate(_request(tmp_path, server.url, max_attempts=2, stream=stream))
    assert (result.stored, result.errors, result.accounting_ok) == (0, 3, True)
    errors = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert {(e["reason"], e["attempts"]) for e in errors} == {("protocol", 2)}
    assert all(e["received"] for e in errors)  # what came back is kept for the user to see
    # A rerun treats them as not done: against a healthy server every row is stored.
    with FaultServerProcess(str(tmp_path)) as healthy:
        rerun = generate(_request(tmp_path, healthy.url, stream=stream, export=tmp_path / "out.parquet"))
    assert (rerun.stored, rerun.errors, rerun.export_rows) == (3, 0, 3)


def test_an_abort_then_a_good_answer_stores_the_good_one(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 1)
    with _scripted(tmp_path, [_answer("abort"), {"answer": True}]) as server:
        result = generate(_request(tmp_path, server.url))
    (record,) = _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")
    assert result.stored == 1 and record["turns"][0]["attempts"] == 2
    assert record["conversations"][-1]["content"].startswith("reply-")


def test_a_stream_opening_with_ping_and_empty_data_is_stored(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 2)
    entry = _sse(_delta("ok"), _delta(None, "stop"))
    entry["raw"] = "event: ping\ndata:\n\n" + entry["raw"]
    with _scripted(tmp_path, [entry]) as server:
        result = generate(_request(tmp_path, server.url, stream=True))
    assert (result.stored, result.errors) == (2, 0)
    # --stream measures TTFT: the closing lines show it beside E2E (they showed E2E only)
    from tokenplan.report.generate import summary_text

    ttft = result.summary["latency_ttft"]
    assert ttft["count"] == 2
    assert (
        f"latency TTFT  p50 {ttft['p50_ms']:,.0f} ms  p90 {ttft['p90_ms']:,.0f} ms  p99 {ttft['p99_ms']:,.0f} ms  (2 streamed)"
        in (summary_text(result))
    )


def test_an_sglang_error_body_keeps_its_message_in_skipped(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 1)
    body = {
        "object": "error",
        "message": "The input (9000 tokens) is longer than the model's context (8192)",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    # the row is refused; the end-of-run control request (a short prompt, the job's settings) is
    # answered, so the refusal is the row's own and goes to skipped.jsonl with its message
    with _scripted(tmp_path, [{"status": 400, "raw": json.dumps(body)}, {"answer": True}]) as server:
        generate(_request(tmp_path, server.url))
    (skipped,) = _jsonl(tmp_path / "run" / "skipped.jsonl")
    assert skipped["detail"] == body["message"]


def test_an_over_size_answer_fails_its_row_without_a_retry(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 2)
    # --max-answer-bytes 100,000 and a 200,000-character answer.
    with _scripted(tmp_path, [_answer("stop", "x" * 200_000)]) as server:
        result = generate(_request(tmp_path, server.url, max_answer_bytes=100_000))
    assert (result.stored, result.errors) == (0, 2)
    assert {(e["reason"], e["attempts"]) for e in _jsonl(tmp_path / "run" / "errors.jsonl")} == {("oversize", 1)}


# ---- secrets stay off disk ---------------------------------------------------------------------


@pytest.mark.parametrize(("api_key", "echoed"), [("sk-very-secret-0042", "Bearer ***"), (None, "Basic ***")])
def test_endpoint_credentials_and_an_echoed_api_key_never_reach_the_run_directory(
    tmp_path: Path, monkeypatch, api_key: str | None, echoed: str
) -> None:
    _prompts(tmp_path / "in.jsonl", 4)
    if api_key:
        monkeypatch.setenv("OPENAI_API_KEY", api_key)
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    echo = {"status": 400, "raw": json.dumps({"error": {"message": "bad header: {{authorization}}"}})}
    with _scripted(tmp_path, [{"answer": True}, echo]) as server:
        url = server.url.replace("http://", "http://alice:hunter2@")
        result = generate(_request(tmp_path, url, concurrency=1, export=tmp_path / "out.parquet"))
    assert (result.stored, result.skipped) == (2, 2)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()] + [tmp_path / "out.parquet"]
    # base64("alice:hunter2") = "YWxpY2U6aHVudGVyMg=="
    for path in files:
        data = path.read_bytes()
        for secret in (b"hunter2", b"sk-very-secret", b"alice", b"YWxpY2U6aHVudGVyMg"):
            assert secret not in data, (path, secret)
    assert {s["detail"] for s in _jsonl(tmp_path / "run" / "skipped.jsonl")} == {f"bad header: {echoed}"}
    records = _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")
    assert {r["turns"][0]["endpoint"] for r in records} == {server.url}


# ---- rows that cannot be read ------------------------------------------------------------------


def test_bad_rows_go_to_rejects_with_file_line_and_reason_and_the_rest_is_stored(tmp_path: Path) -> None:
    lines = [
        b'{"id": "a", "prompt": "x\\ud800"}',
        b'{"prompt": "y\xed\xa0\x80"}',
        b'{"id": "deep", "prompt": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"}",
        b'{"id": "good", "prompt": "fine"}',
    ]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with FaultServerProcess(str(tmp_path)) as server:
        result = generate(_request(tmp_path, server.url))
    assert (result.stored, result.rejected_rows, result.accounting_ok) == (1, 3, True)
    rejects = _jsonl(tmp_path / "run" / "rejects.jsonl")
    assert [(r["line"], r["file"]) for r in rejects] == [
        (1, str(tmp_path / "in.jsonl")),
        (2, str(tmp_path / "in.jsonl")),
        (3, str(tmp_path / "in.jsonl")),
    ]
    assert "surrogate" in rejects[0]["reason"] and "surrogate" in rejects[1]["reason"]
    assert "nested deeper" in rejects[2]["reason"]


@pytest.mark.parametrize(
    ("name", "data"), [("in.jsonl.zst", b'{"prompt": "not zstd"}\n'), ("in.parquet", b"PAR1 not a parquet file PAR1")]
)
def test_a_file_that_cannot_be_read_is_one_line_exit_2_and_nothing_created(
    tmp_path: Path, name: str, data: bytes
) -> None:
    (tmp_path / name).write_bytes(data)
    done = subprocess.run(
        [
            *CLI,
            str(tmp_path / name),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and name in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


# ---- a full disk -------------------------------------------------------------------------------


def test_a_disk_full_mid_record_stops_cleanly_and_a_resume_stores_every_id_once(tmp_path: Path, monkeypatch) -> None:
    _prompts(tmp_path / "in.jsonl", 60)
    real_write, calls = os.write, {"n": 0}

    def full_after_20(fd: int, data) -> int:
        calls["n"] += 1
        if calls["n"] < 20:
            return real_write(fd, data)
        if calls["n"] == 20:
            return real_write(fd, bytes(data[: len(data) // 2]))  # half a record, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with FaultServerProcess(str(tmp_path)) as server:
        monkeypatch.setattr(rundir_module, "_write", full_after_20)
        with pytest.raises(WriteFailed, match="No space left on device.*stopped sending"):
            generate(_request(tmp_path, server.url, concurrency=2, grace_s=1))
        first = _stored(tmp_path / "run")  # every line is a whole record
        assert 0 < len(first) < 60
        monkeypatch.setattr(rundir_module, "_write", real_write)
        result = generate(_request(tmp_path, server.url))
    ids = _stored(tmp_path / "run")
    assert result.accounting_ok and sorted(ids) == sorted(f"r{i}" for i in range(60)) and len(set(ids)) == 60


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))  # bytes per file; Python ignores SIGXFSZ


def test_a_file_size_limit_ends_the_run_in_one_line_and_a_resume_finishes(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 300)  # ~300 records of ~700 bytes: the shard passes 30 kB
    with FaultServerProcess(str(tmp_path)) as server:
        command = [
            *CLI,
            str(tmp_path / "in.jsonl"),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            server.url,
            "--model",
            "fault-model",
            "--quiet",
            "--concurrency",
            "4",
        ]
        env = {**os.environ, "PYTHONPATH": SRC}
        limited = subprocess.run(
            command, capture_output=True, text=True, timeout=120, env=env, preexec_fn=_limit_file_size
        )
        assert limited.returncode == 2 and "Traceback" not in limited.stderr, limited.stderr
        assert limited.stderr.startswith("error: cannot write") and "File too large" in limited.stderr
        stored_first = len(_stored(tmp_path / "run"))
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert resumed.returncode == 0, resumed.stderr
    ids = _stored(tmp_path / "run")
    assert 0 < stored_first < 300 and len(ids) == len(set(ids)) == 300


# ---- one process per run directory ---------------------------------------------------------------


def test_a_second_process_on_the_same_out_is_refused_and_nothing_is_duplicated(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 40)
    env = {**os.environ, "PYTHONPATH": SRC}
    with FaultServerProcess(str(tmp_path), delay_s=0.2) as server:
        command = [
            *CLI,
            str(tmp_path / "in.jsonl"),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            server.url,
            "--model",
            "fault-model",
            "--quiet",
            "--concurrency",
            "2",
        ]
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lock = tmp_path / "run" / ".lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)):  # readiness: the pid is written
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        second = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        out, err = first.communicate(timeout=120)
    assert second.returncode == 2 and f"pid {first.pid}" in second.stderr and second.stderr.count("\n") == 1
    assert first.returncode == 0, err
    ids = _stored(tmp_path / "run")
    assert len(ids) == len(set(ids)) == 40


def test_a_rerun_drops_duplicate_records_keeping_the_first(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 5)
    with FaultServerProcess(str(tmp_path)) as server:
        generate(_request(tmp_path, server.url))
        shard = tmp_path / "run" / "shards" / "part-00000.jsonl"
        lines = shard.read_text().splitlines(keepends=True)
        copy = json.loads(lines[0])
        copy["conversations"][-1]["content"] = "a later copy"
        shard.write_text("".join(lines) + json.dumps(copy) + "\n" + lines[1])  # two duplicates
        result = generate(_request(tmp_path, server.url))
    assert result.accounting_ok and result.duplicate_records == 0
    assert any("dropped 2 duplicate records" in note for note in result.notes)
    records = _jsonl(shard)
    assert len(records) == 5 and "a later copy" not in shard.read_text()


# ---- values refused before anything is sent -------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "field"),
    [
        (["--temperature", "inf"], "--temperature"),
        (["--temperature", "nan"], "--temperature"),
        (["--seed", str(10**20)], "--seed"),
        (["--max-tokens", str(10**30)], "--max-tokens"),
        (["--n", "100000000"], "--n"),
        (["--extra-body", '{"messages": [{"role": "user", "content": "hijack"}]}'], "--extra-body"),
        (["--extra-body", '{"seed": 1}'], "--extra-body"),
        (["--endpoint", "http://[::1/v1"], "--endpoint"),
    ],
)
def test_a_value_that_makes_no_sense_is_refused_in_one_line_and_nothing_is_created(
    tmp_path: Path, option: list[str], field: str
) -> None:
    _prompts(tmp_path / "in.jsonl", 1)
    endpoint = [] if option[0] == "--endpoint" else ["--endpoint", "http://127.0.0.1:9/v1"]
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "run"), *endpoint, "--model", "m", *option],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert done.returncode == 2 and done.stderr.startswith(f"error: {field} ") and done.stderr.count("\n") == 1, (
        done.stderr
    )
    assert not (tmp_path / "run").exists()
    assert time.monotonic() - started < 30  # generous for a loaded machine; --n 1e8 used to hang


def test_a_plan_with_an_absurd_concurrency_is_refused(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 1)
    (tmp_path / "plan.json").write_text(json.dumps({"recommended": {"concurrency_per_endpoint": 1e12}}))
    with pytest.raises(Exception, match=r"recommended.concurrency_per_endpoint: 1000000000000.0 is not allowed"):
        generate(_request(tmp_path, "http://127.0.0.1:9/v1", plan=tmp_path / "plan.json"))
    assert not (tmp_path / "run").exists()


def test_extra_body_may_replace_an_owned_field_when_the_user_says_so(tmp_path: Path) -> None:
    request = _request(tmp_path, "http://127.0.0.1:9/v1", extra_body={"max_tokens": 9}, extra_body_override=True)
    assert request.sampling.extra_body == {"max_tokens": 9}


def test_an_input_file_whose_name_is_not_utf8_is_generated_and_exported(tmp_path: Path) -> None:
    name = os.fsdecode(b"in-\xff.jsonl")  # Python keeps the byte 0xff as the lone surrogate U+DCFF
    _prompts(tmp_path / name, 3)
    with FaultServerProcess(str(tmp_path)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(tmp_path / name)],
                out_dir=tmp_path / "run",
                endpoints=[server.url],
                model="fault-model",
                export=tmp_path / "out.parquet",
                **FAST,
            )
        )
    assert (result.stored, result.accounting_ok, result.export_rows) == (3, True, 3)
    (record, *_) = _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")
    assert record["source"]["file"].endswith("in-\ufffd.jsonl")
