"""``generate`` against the fault-injecting server: what is retried, skipped, failed, refused."""

from __future__ import annotations

import json
import random
import re
import threading
from pathlib import Path

import pytest
from tests.support.fault_jobs import fault_request as _request
from tests.support.fault_jobs import jsonl as _jsonl
from tests.support.fault_jobs import prompts as _prompts
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.errors import RunDirError, ServerError


def test_500s_429s_and_dropped_connections_are_retried_until_every_row_is_stored(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 200)
    with FaultServerProcess(str(tmp_path), p500=0.15, p429=0.15, pdrop=0.1, seed=3) as server:
        result = generate(_request(tmp_path, server.url, max_attempts=30, concurrency=8))
    assert (result.stored, result.errors, result.accounting_ok) == (200, 0, True)
    attempts = [r["turns"][0]["attempts"] for r in _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")]
    # 40 % of requests fail: with 200 rows, some row needs more than one try (P(none) = 0.6^200 ≈ 0).
    assert max(attempts) > 1 and min(attempts) == 1


def test_a_stalled_request_hits_its_deadline_and_is_sent_again(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 30)
    with FaultServerProcess(str(tmp_path), pstall=0.2, stall_s=30, seed=5) as server:
        result = generate(_request(tmp_path, server.url, deadline_s=0.5, max_attempts=20, concurrency=8))
    assert (result.stored, result.errors) == (30, 0)
    # Each stall costs one 0.5 s deadline; requests are otherwise ~ms, so the slowest unit took ≥ 1 try more.
    assert max(r["turns"][0]["attempts"] for r in _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")) > 1


def test_rows_failing_every_attempt_go_to_errors_and_a_rerun_retries_them(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 7)  # fewer than the 8 rows that make a failure the server's
    with FaultServerProcess(str(tmp_path), p500=1.0) as server:
        failed = generate(_request(tmp_path, server.url, max_attempts=3, eject_after_failures=1000))
    assert (failed.stored, failed.errors, failed.accounting_ok) == (0, 7, True)
    errors = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert {(e["reason"], e["status"], e["attempts"]) for e in errors} == {("status", 500, 3)}
    with FaultServerProcess(str(tmp_path)) as healthy:
        rerun = generate(_request(tmp_path, healthy.url, max_attempts=3))
    assert (rerun.stored, rerun.errors, rerun.accounting_ok) == (7, 0, True)
    assert _jsonl(tmp_path / "run" / "errors.jsonl") == []


def test_a_server_failing_every_request_stops_the_run_after_eight_rows(tmp_path: Path) -> None:
    # 500 to every try of 8 distinct rows with no answer between: the server's fault, not 200 rows'
    # fate; the run stops in one line, the failed rows wait in errors.jsonl, a rerun sends them all.
    _prompts(tmp_path / "in.jsonl", 200)
    with FaultServerProcess(str(tmp_path), p500=1.0) as server:
        with pytest.raises(ServerError, match=r"answered 500 \(.*\) to every try of \d+ rows with no answer between"):
            generate(_request(tmp_path, server.url, max_attempts=2, concurrency=4, eject_after_failures=1000))
    failed = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert 8 <= len(failed) < 200  # stopped early: the first 8 (and those in flight beside them)
    # summary.json holds the counters at the stop and why, still in progress (a rerun finishes
    # it); it kept its last rolling snapshot, "errors": 0 beside these rows (a break-it pass)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["in_progress"] is True and summary["errors"] == len(failed)
    assert "answered 500" in summary["stopped"]
    with FaultServerProcess(str(tmp_path)) as healthy:
        rerun = generate(_request(tmp_path, healthy.url, max_attempts=2))
    assert (rerun.stored, rerun.errors, rerun.accounting_ok) == (200, 0, True)


def test_a_server_answering_an_unusable_200_to_every_request_stops_the_run_after_eight_rows(tmp_path: Path) -> None:
    # A login page or a proxy's HTML answered with 200 to every request is a misconfigured endpoint,
    # not 200 rows' fate: it stops like a server answering 500 to everything (without the stop the
    # run tried every row of the input, the endpoint ejected and probed back between rows).
    _prompts(tmp_path / "in.jsonl", 200)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"status": 200, "raw": "<html>sign in</html>", "content_type": "text/html"}]))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        with pytest.raises(ServerError, match=r"answered with an unusable answer \(answer is not JSON\) to every try"):
            generate(_request(tmp_path, server.url, max_attempts=2, concurrency=4))
    failed = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert 8 <= len(failed) < 200 and {e["reason"] for e in failed} == {"protocol"}
    with FaultServerProcess(str(tmp_path)) as healthy:
        rerun = generate(_request(tmp_path, healthy.url, max_attempts=2))
    assert (rerun.stored, rerun.errors, rerun.accounting_ok) == (200, 0, True)


def test_an_endpoint_set_aside_at_the_start_is_said_not_passed_over(tmp_path: Path) -> None:
    # One of three endpoints refuses connections and one serves another model: the run goes on with
    # the third, and says so (it said nothing: a typo in one port ran the job at a third of its speed).
    _prompts(tmp_path / "in.jsonl", 20)
    with FaultServerProcess(str(tmp_path)) as good, FaultServerProcess(str(tmp_path), model="other") as other:
        request = _request(tmp_path, good.url, endpoints=[good.url, "http://u:pw-1234@127.0.0.1:1/v1", other.url])
        result = generate(request)
    assert (result.stored, result.accounting_ok) == (20, True)
    [warning] = [n for n in result.notes if "endpoints not used" in n]
    assert warning.startswith("warning: 2 of 3 endpoints not used until a probe finds them serving 'fault-model'")
    assert "http://127.0.0.1:1/v1 (transport" in warning and f"{other.url} (serves other)" in warning
    assert "pw-1234" not in warning


_MESSAGE = {"role": "assistant", "content": "hi"}
_COUNTS = {"prompt_tokens": 3, "completion_tokens": -5}


@pytest.mark.parametrize(
    ("answer", "stream", "detail"),
    [
        (  # a usage count that is no count
            {"choices": [{"index": 0, "message": _MESSAGE, "finish_reason": "stop"}], "usage": _COUNTS},
            False,
            "usage.completion_tokens is -5, not a token count",
        ),
        (  # content that is no text
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": 12345}, "finish_reason": "stop"}]},
            False,
            "choices[0].message.content is int, not a string",
        ),
        (  # a streamed delta whose content is no text
            {"choices": [{"index": 0, "delta": {"content": 12345}, "finish_reason": "stop"}]},
            True,
            "delta.content is int, not a string",
        ),
    ],
)
def test_a_server_sending_counts_or_texts_of_the_wrong_type_to_every_request_stops_after_eight_rows(
    tmp_path: Path, answer: dict, stream: bool, detail: str
) -> None:
    # The fault table: a malformed 200 answer ("usage not counts, content not text") on every try
    # of 8 distinct rows with no answer between stops the run like an HTML page to everything. These
    # were left out of the stop: a server sending them to every request sent all 200 rows to
    # errors.jsonl, each after every try. One request at a time, one try each: rows r0…r7 fail, then
    # the stop (8 rows, no row after them is sent).
    _prompts(tmp_path / "in.jsonl", 200)
    raw = f"data: {json.dumps(answer)}\n\ndata: [DONE]\n\n" if stream else json.dumps(answer)
    entry = {"status": 200, "raw": raw, "content_type": "text/event-stream" if stream else "application/json"}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([entry]))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        with pytest.raises(ServerError, match=r"answered with an unusable answer \(" + re.escape(detail)):
            generate(_request(tmp_path, server.url, max_attempts=1, concurrency=1, stream=stream))
    failed = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert [e["id"] for e in failed] == [f"r{i}" for i in range(8)]
    assert {(e["reason"], e["attempts"]) for e in failed} == {("protocol", 1)}


_OVER = {"prompt_tokens": 3, "completion_tokens": 999_999}  # a request capped at 64
_REASONING_OVER = {"prompt_tokens": 3, "completion_tokens": 7, "completion_tokens_details": {"reasoning_tokens": 50}}
_FINISHED = {"choices": [{"index": 0, "message": _MESSAGE, "finish_reason": "stop"}]}
_STREAMED = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
_IMPOSSIBLE_OVER = "usage.completion_tokens is 999,999, more than the request's max_tokens (allowed: 0 to 64)"


@pytest.mark.parametrize(
    ("raw", "stream", "detail"),
    [
        (json.dumps({**_FINISHED, "usage": _OVER}), False, _IMPOSSIBLE_OVER),
        (  # the usage chunk after the last text chunk, as include_usage sends it
            f"data: {json.dumps(_STREAMED)}\n\ndata: {json.dumps({'choices': [], 'usage': _OVER})}\n\ndata: [DONE]\n\n",
            True,
            _IMPOSSIBLE_OVER,
        ),
        (
            json.dumps({**_FINISHED, "usage": _REASONING_OVER}),
            False,
            "usage.reasoning_tokens is 50, more than usage.completion_tokens, which includes them (allowed: 0 to 7)",
        ),
    ],
)
def test_a_server_claiming_impossible_token_counts_is_sent_malformed_answers(
    tmp_path: Path, raw: str, stream: bool, detail: str
) -> None:
    # A break-it pass: completion_tokens 999,999 for max_tokens 64 was stored and the summary said
    # 33 M tok/s. More tokens than the request allowed, or more reasoning tokens than the completion
    # tokens holding them, are malformed usage as a count of -5 is: each try fails (2 here), the
    # row goes to errors.jsonl with what came back, and 8 rows so answered stop the run; nothing
    # is stored and no token is counted.
    _prompts(tmp_path / "in.jsonl", 20)
    script = tmp_path / "script.json"
    kind = "text/event-stream" if stream else "application/json"
    script.write_text(json.dumps([{"status": 200, "raw": raw, "content_type": kind}]))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        with pytest.raises(ServerError, match=r"answered with an unusable answer \(" + re.escape(detail)):
            generate(_request(tmp_path, server.url, max_attempts=2, concurrency=1, stream=stream, max_tokens=64))
    failed = _jsonl(tmp_path / "run" / "errors.jsonl")
    assert [e["id"] for e in failed] == [f"r{i}" for i in range(8)]
    assert {(e["reason"], e["detail"], e["attempts"]) for e in failed} == {("protocol", detail, 2)}
    assert all('"reasoning_tokens": 50' in e["received"] or "999999" in e["received"] for e in failed)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["stored"], summary["output_tokens"]) == (0, 0)


def test_rows_the_model_answers_empty_fail_alone_and_the_rows_after_them_are_answered(tmp_path: Path) -> None:
    # An empty answer (content "", finish "stop") is what the model made of a row's prompt, not a
    # malformed answer: 10 such rows in a row at one request at a time (more than the 8 of the
    # job-wide stop) stopped the run before row 11, and every rerun again, so rows 11-40 were never
    # sent. Now the 8th asks the endpoint the job's settings on a one-line prompt (runner.unanswered),
    # which it answers: the rows are their own and the run goes on.
    import json as _json

    rows = [{"id": f"s{i}", "prompt": f"silent {i}"} for i in range(10)]
    rows += [{"id": f"r{i}", "prompt": f"prompt {i}"} for i in range(30)]
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    with FaultServerProcess(str(tmp_path), filter_word="silent", withhold="empty") as server:
        result = generate(_request(tmp_path, server.url, max_attempts=1, concurrency=1))
    assert (result.stored, result.errors, result.accounting_ok) == (30, 10, True)
    assert {e["reason"] for e in _jsonl(tmp_path / "run" / "errors.jsonl")} == {"protocol"}


def test_a_control_request_answered_while_rows_are_still_out_does_not_end_the_run(tmp_path: Path) -> None:
    # A break-it pass: every row withheld (content_filter), more rows than the 8 of the streak, all
    # in flight at once, 2 tries each with a backoff up to 1 s between. The 8th row to fail its
    # second try asks the control request, which the server answers at once (its prompt holds no
    # filtered word) while the other 4 rows wait out their backoff; its end woke the loop that waits
    # for the last row, which then cancelled those 4 unwritten after the grace and ended with
    # "accounting mismatch: 8 errors … the input has 12 units". The run must settle every row: 12
    # rows, each failing both tries, 12 errors and nothing else.
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"r{i}", "prompt": f"bad {i}"}) + "\n" for i in range(12))
    )
    with FaultServerProcess(str(tmp_path), filter_word="bad") as server:
        result = generate(
            _request(
                tmp_path,
                server.url,
                max_attempts=2,
                concurrency=12,
                retry_base_delay_s=1.0,
                grace_s=0.05,
                eject_after_failures=1000,
            )
        )
    assert (result.stored, result.skipped, result.errors, result.accounting_ok) == (0, 0, 12, True)
    assert {(e["reason"], e["attempts"]) for e in _jsonl(tmp_path / "run" / "errors.jsonl")} == {("protocol", 2)}


def test_an_endpoint_that_answers_no_chat_request_beside_a_healthy_one_is_said(tmp_path: Path) -> None:
    # A break-it pass: one of three endpoints lists the model but answers 500 to every chat request;
    # the pool ejects it and probes it back in turn, the others answer its rows, and the run ended
    # [ok] without a word about the capacity lost.
    _prompts(tmp_path / "in.jsonl", 30)
    with FaultServerProcess(str(tmp_path)) as good, FaultServerProcess(str(tmp_path), p500=1.0) as bad:
        result = generate(_request(tmp_path, good.url, endpoints=[good.url, bad.url]))
    assert (result.stored, result.errors, result.accounting_ok) == (30, 0, True)
    [warning] = [n for n in result.notes if "answered none of their requests" in n]
    assert warning.startswith(
        f"warning: 1 of 2 endpoints answered none of their requests, which the others answered: {bad.url} ("
    )
    assert "requests failed; the last: status 500" in warning
    # summary.json says which server did the work: the good one answered all 30 rows (one request
    # each), the bad one none, and failed at least its first try (a 500 ejects it after 5 in a row)
    served = {e["endpoint"]: e for e in result.summary["this_invocation"]["endpoints"]}
    assert served[good.url]["requests_answered"] == 30 and served[good.url]["requests_failed"] == 0
    assert served[bad.url]["requests_answered"] == 0 and served[bad.url]["requests_failed"] >= 1
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["this_invocation"]["endpoints"] == list(
        served.values()
    )


def test_a_400_is_not_retried_and_the_row_is_skipped_with_its_status(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 40)
    # One request at a time in row order, each drawing once from the server's Random(7): row k is
    # refused when draw k < 0.2 — refusals between answers, so each is its row's own. (Every row
    # refused alike is a configuration error instead: test_generate_refusals.py.)
    draws = random.Random(7)
    expected = {f"r{k}" for k in range(40) if draws.random() < 0.2}
    with FaultServerProcess(str(tmp_path), p400=0.2, seed=7) as server:
        result = generate(_request(tmp_path, server.url, concurrency=1))
    assert (result.stored, result.skipped, result.errors) == (40 - len(expected), len(expected), 0)
    skipped = _jsonl(tmp_path / "run" / "skipped.jsonl")
    assert {s["id"] for s in skipped} == expected
    assert {(s["reason"], s["status"]) for s in skipped} == {("refused", 400)}


def test_a_401_ends_the_run_with_one_clear_error(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 5)
    with FaultServerProcess(str(tmp_path), p401=1.0) as server:
        with pytest.raises(ServerError, match="answered 401"):
            generate(_request(tmp_path, server.url))


def test_a_server_restart_mid_run_ejects_the_endpoint_and_probes_it_back(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 400)
    with FaultServerProcess(str(tmp_path), delay_s=0.01) as server:
        restart = threading.Timer(0.8, server.restart)
        restart.start()
        result = generate(_request(tmp_path, server.url, max_attempts=50, eject_after_failures=2, concurrency=4))
        restart.join()
        restarted_before_the_end = result.summary["elapsed_s"] > 0.8
    assert (result.stored, result.errors, result.accounting_ok) == (400, 0, True)
    assert restarted_before_the_end  # 400 requests at 4 in flight × ≥ 10 ms each take ≥ 1 s


def test_a_different_configuration_on_an_existing_run_dir_is_refused_unless_forced(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 3)
    with FaultServerProcess(str(tmp_path)) as server:
        generate(_request(tmp_path, server.url, temperature=0.0))
        with pytest.raises(RunDirError, match=r"temperature.*0\.0.*0\.7.*--force"):
            generate(_request(tmp_path, server.url, temperature=0.7))
        forced = generate(_request(tmp_path, server.url, temperature=0.7, force=True))
    assert forced.already_done == 3


def test_two_endpoints_share_the_load(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 60)
    with FaultServerProcess(str(tmp_path), delay_s=0.02) as a, FaultServerProcess(str(tmp_path), delay_s=0.02) as b:
        request = GenerateRequest.build(
            inputs=[str(tmp_path / "in.jsonl")],
            out_dir=tmp_path / "run",
            endpoints=[a.url, b.url],
            model="fault-model",
            concurrency=4,
        )
        generate(request)
    used = [r["turns"][0]["endpoint"] for r in _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")]
    # Least outstanding requests with 4 slots each: both endpoints take a real share.
    assert used.count(a.url) >= 15 and used.count(b.url) >= 15


def test_a_server_listing_the_model_but_dropping_every_chat_request_stops_the_run(tmp_path: Path) -> None:
    # GET /models answers, every chat request is dropped (a transport failure, which a restart also
    # gives, so the 8-row rule leaves it to the pool): ejected after 5 in a row, put back by the
    # probe, ejected again; the 3rd readmission with nothing answered since the first stops the run.
    # Before, each of the 300 rows went through all its tries: 300 / 8 in flight × 3 tries.
    _prompts(tmp_path / "in.jsonl", 300)
    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        with pytest.raises(ServerError, match="answers GET /models but no chat request"):
            generate(_request(tmp_path, server.url, max_attempts=3, concurrency=8))
    assert len(_jsonl(tmp_path / "run" / "errors.jsonl")) < 300  # the rest were never sent to the end
    with FaultServerProcess(str(tmp_path)) as healthy:  # nothing lost: a rerun stores every row
        rerun = generate(_request(tmp_path, healthy.url, max_attempts=3))
    assert (rerun.stored, rerun.errors, rerun.accounting_ok) == (300, 0, True)


def test_a_dead_but_listing_server_beside_a_wrong_port_stops_the_run(tmp_path: Path) -> None:
    # The second endpoint refuses connections (set aside at the start, never put back); the first
    # lists the model and drops every chat request. Before, the pool waited for the second to come
    # back and the 300 rows went through all their tries on the first; now it stops as for the
    # first alone, naming both, and a rerun on a healthy server stores every row.
    _prompts(tmp_path / "in.jsonl", 300)
    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        endpoints = [server.url, "http://127.0.0.1:1/v1"]
        with pytest.raises(ServerError, match=r"no endpoint answers chat requests: 1 of 2 answer GET /models") as e:
            generate(_request(tmp_path, server.url, endpoints=endpoints, max_attempts=3, concurrency=8))
    assert "http://127.0.0.1:1/v1 (out: transport" in str(e.value)
    assert len(_jsonl(tmp_path / "run" / "errors.jsonl")) < 300
    with FaultServerProcess(str(tmp_path)) as healthy:
        rerun = generate(_request(tmp_path, healthy.url, max_attempts=3))
    assert (rerun.stored, rerun.errors, rerun.accounting_ok) == (300, 0, True)
