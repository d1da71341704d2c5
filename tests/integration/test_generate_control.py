"""generate's control request (runner/refusals.py, runner/control.py): before a job-wide refusal
verdict, the endpoint that refused rows is asked the job's settings on a one-line prompt; at the
end of a run, each endpoint holding refusals without one is asked too; a prompt that leaves less
room than max_tokens is sent again with the room left."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.support.fault_jobs import fault_request as _request
from tests.support.fault_jobs import jsonl as _jsonl
from tests.support.fault_jobs import prompts as _prompts
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import interrupt_when_logged

from tokenplan.api.generate import generate
from tokenplan.errors import ServerError

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]


def test_too_long_rows_together_at_the_start_of_a_sorted_file_are_their_own_refusals(tmp_path: Path) -> None:
    # The file sorted the other way: 12 rows over the served context first, then 88 short ones.
    # The first 8 refusals come before any answer; the control request (the job's settings on a
    # one-line prompt, under 20 tokens + 100 ≤ 1,000) is answered, so the refusals stay held until
    # the short rows are answered, and are then the rows' own. Before, the 8 made a job-wide verdict
    # that no rerun could clear (the rows stayed first in the file).
    import json as _json

    rows = [{"id": f"l{i}", "prompt": "x" * 5000} for i in range(12)]
    rows += [{"id": f"s{i}", "prompt": f"short {i}"} for i in range(88)]
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    log = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), context=1000, log_bodies=str(log)) as server:
        done = generate(_request(tmp_path, server.url, max_tokens=100, concurrency=4))
    # one control request beside the 100 rows, with the job's settings; it is not a row: nothing
    # of it is stored
    controls = [b for b in _jsonl(log) if b["messages"][0]["content"] == "Reply with the single word OK."]
    assert len(_jsonl(log)) == 101 and len(controls) == 1 and controls[0]["max_tokens"] == 100
    assert (done.stored, done.skipped, done.errors, done.accounting_ok) == (88, 12, 0, True)
    assert {r["id"] for r in _jsonl(tmp_path / "run" / "skipped.jsonl")} == {f"l{i}" for i in range(12)}


def test_rows_all_too_long_for_settings_the_server_accepts_end_as_job_wide(tmp_path: Path) -> None:
    # Every row is over the context, and the control (a short prompt) is answered: no row is
    # answered by the end, so the refusal is still job-wide (nothing final), and the message says
    # that the settings are accepted and the rows themselves are refused.
    import json as _json

    rows = [{"id": f"l{i}", "prompt": "x" * 5000} for i in range(20)]
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    with FaultServerProcess(str(tmp_path), context=1000) as server:
        with pytest.raises(
            ServerError, match="refused 20 rows in a row.*answers a short prompt with the job's settings"
        ):
            generate(_request(tmp_path, server.url, max_tokens=100, concurrency=4))
    assert _jsonl(tmp_path / "run" / "skipped.jsonl") == []
    assert len(_jsonl(tmp_path / "run" / "errors.jsonl")) == 20


def _long_then_short(tmp_path: Path, long: int, short: int, long_first: bool = True) -> None:
    import json as _json

    rows = [{"id": f"l{i}", "prompt": "x" * 5000} for i in range(long)]  # over a 1,000-token context
    shorts = [{"id": f"s{i}", "prompt": f"short {i}"} for i in range(short)]
    rows = rows + shorts if long_first else shorts + rows
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))


def test_a_resumed_run_whose_leftover_rows_are_too_long_skips_them(tmp_path: Path) -> None:
    # 30 short rows, then 20 too long for the served context. A first run with --limit 30 stores
    # the 30; the rerun sends only the 20, all refused, none answered in that run. Its control
    # request is answered, and an earlier run answered rows of this job: the 20 are the rows' own
    # refusals (skipped). Before, the end-of-run rule counted them as job-wide on every rerun
    # (a break-it pass).
    _long_then_short(tmp_path, 20, 30, long_first=False)
    with FaultServerProcess(str(tmp_path), context=1000) as server:
        first = generate(_request(tmp_path, server.url, max_tokens=100, concurrency=2, limit=30))
        again = generate(_request(tmp_path, server.url, max_tokens=100, concurrency=2))
    assert (first.stored, first.skipped, first.accounting_ok) == (30, 0, True)
    assert (again.stored, again.skipped, again.errors, again.accounting_ok) == (30, 20, 0, True)  # stored: the job's


def test_too_long_rows_split_over_two_endpoints_are_their_own_refusals(tmp_path: Path) -> None:
    # 20 too-long rows then one short one over two endpoints: each endpoint refuses its share; the
    # short row is answered by one of them, and the other, which answered only its control
    # request, held rows refused for what they hold (skipped), not a job-wide verdict (a rerun
    # of the leftovers, 4 per endpoint, below the streak, said "a setting every request carries").
    _long_then_short(tmp_path, 20, 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        FaultServerProcess(str(tmp_path / "a"), context=1000) as a,
        FaultServerProcess(str(tmp_path / "b"), context=1000) as b,
    ):
        done = generate(_request(tmp_path, a.url, endpoints=[a.url, b.url], max_tokens=100, concurrency=2))
    assert (done.stored, done.skipped, done.errors, done.accounting_ok) == (1, 20, 0, True)


def test_a_control_request_that_gets_no_answer_is_not_called_refused(tmp_path: Path) -> None:
    # Eight rows refused (vLLM's context message), then the server answers 503 to everything,
    # the control request's tries included: the stop says the control got no answer, not that
    # "a short prompt with the same settings" was refused too (a break-it pass).
    import json as _json

    _prompts(tmp_path / "in.jsonl", 20)
    refusal = {
        "status": 400,
        "raw": _json.dumps({"error": {"message": "This model's maximum context length is 4096 tokens."}}),
    }
    busy = {"status": 503, "raw": _json.dumps({"error": {"message": "server busy"}})}
    script = tmp_path / "script.json"
    script.write_text(_json.dumps([refusal] * 8 + [busy] * 200))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        with pytest.raises(ServerError) as stopped:
            generate(_request(tmp_path, server.url, concurrency=1))
    said = str(stopped.value)
    assert "got no answer (503" in said and "the same settings too" not in said, said
    assert _jsonl(tmp_path / "run" / "skipped.jsonl") == []


@pytest.mark.slow
def test_ctrl_c_during_a_control_request_stops_within_the_grace(tmp_path: Path) -> None:
    # Too-long rows are refused at once; the control request's answer takes 60 s. A Ctrl-C while
    # it is out stops the run within its 1 s grace; it waited out the control (a break-it pass).
    _long_then_short(tmp_path, 12, 0)
    log = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), context=1000, delay_s=60, log_bodies=str(log)) as server:
        command = [*CLI, str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "run"), "--endpoint", server.url]
        command += ["--model", "fault-model", "--max-tokens", "100", "--concurrency", "1", "--grace-s", "1"]
        # SIGINT once the control is out
        returncode, err, took_s = interrupt_when_logged(
            command, log, lambda text: "Reply with the single word OK." in text, timeout_s=60
        )
    assert returncode == 130 and "Traceback" not in err, err
    assert took_s < 15, took_s  # the 1 s grace and the shutdown, not the control's 60 s
    assert _jsonl(tmp_path / "run" / "skipped.jsonl") == []  # the held refusals stay unfinal


@pytest.mark.parametrize("status", [400, 422])
def test_a_prompt_that_leaves_less_room_than_max_tokens_is_sent_again_with_the_room(
    tmp_path: Path, status: int
) -> None:
    # 400: vLLM's message; 422: Hugging Face TGI's, whose rows were skipped instead (a break-it pass).
    # Context 4,096 (the fault server counts len(messages JSON) // 4 tokens), max_tokens 3,500 (a
    # plan's cap below the context): a prompt of "x" × 8,000 is 8,033 characters of messages JSON,
    # 2,008 tokens, and 2,008 + 3,500 passes 4,096. The server's refusal states both, so the request
    # is sent again with the 4,096 − 2,008 − 1 = 2,087 tokens left (one under the sum: SGLang refuses a
    # sum equal to its context) and answered; before, the row was skipped for good
    # (a break-it pass: 18 of 40 rows lost beside a plan that said answers stop at the context).
    import json as _json

    rows = [{"id": f"m{i}", "prompt": "x" * 8000} for i in range(6)] + [{"id": "s", "prompt": "short"}]
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    with FaultServerProcess(str(tmp_path), context=4096, context_status=status) as server:
        done = generate(_request(tmp_path, server.url, max_tokens=3500, concurrency=2))
    assert (done.stored, done.skipped, done.errors, done.accounting_ok) == (7, 0, 0, True)
    records = {r["id"]: r for r in _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")}
    prompt = len(_json.dumps([{"role": "user", "content": "x" * 8000}])) // 4  # 8,033 // 4 = 2,008
    assert records["m0"]["turns"][0]["max_tokens"] == 4096 - prompt - 1 == 2087


def test_a_row_too_long_for_a_tgi_server_is_that_rows_refusal(tmp_path: Path) -> None:
    # Hugging Face TGI answers a prompt whose tokens + max_new_tokens pass its context with 422
    # ("Input validation error: …", router InferError::ValidationError). One such row among 29
    # short ones is the row's own outcome (skipped.jsonl), not the job's: as a fatal status it
    # stopped every rerun after a few rows (a break-it pass).
    _long_then_short(tmp_path, 1, 29, long_first=False)
    with FaultServerProcess(str(tmp_path), context=1000, context_status=422) as server:
        done = generate(_request(tmp_path, server.url, max_tokens=100, concurrency=4))
    assert (done.stored, done.skipped, done.errors, done.accounting_ok) == (29, 1, 0, True)
    (skipped,) = _jsonl(tmp_path / "run" / "skipped.jsonl")
    assert skipped["id"] == "l0" and skipped["status"] == 422


def test_a_server_that_withholds_every_answer_stops_after_eight_rows_and_a_control(tmp_path: Path) -> None:
    # content_filter on every request, the control's one-line prompt too ("e" is in every prompt and
    # in "Reply with the single word OK."): the run stops after 8 rows (2 more may be in flight at
    # concurrency 2) instead of sending all 40 through every try (a break-it pass).
    _prompts(tmp_path / "in.jsonl", 40)
    with FaultServerProcess(str(tmp_path), filter_word="e") as server:
        with pytest.raises(ServerError, match="no finished answer .*content_filter.* nor to a short prompt"):
            generate(_request(tmp_path, server.url, concurrency=2, max_attempts=2))
    assert 8 <= len(_jsonl(tmp_path / "run" / "errors.jsonl")) <= 10


def test_rows_whose_answers_are_withheld_are_their_own_when_the_control_is_answered(tmp_path: Path) -> None:
    # 10 rows holding a filtered word first, then 20 plain rows: the 8th filtered row asks the
    # endpoint, whose one-line control prompt is answered, so the run goes on: 20 stored, the 10
    # in errors.jsonl (not final), no stop. Counted as the server's fault, such a file stopped
    # every rerun before its plain rows.
    import json as _json

    rows = [{"id": f"f{i}", "prompt": f"forbidden {i}"} for i in range(10)]
    rows += [{"id": f"p{i}", "prompt": f"plain {i}"} for i in range(20)]
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    with FaultServerProcess(str(tmp_path), filter_word="forbidden") as server:
        done = generate(_request(tmp_path, server.url, concurrency=2, max_attempts=2))
    assert (done.stored, done.errors, done.accounting_ok) == (20, 10, True)


def test_a_prompt_whose_bound_fills_the_context_is_sized_by_the_servers_refusal(tmp_path: Path) -> None:
    # No --max-tokens and no plan: each request asks for Llama-2-70B's context (4,096) less its
    # prompt's bound, 64 + 32 + 5,028 JSON bytes = 5,124 > 4,096 for a prompt of 5,000 "x". It asks
    # 4,095 (one under the context); the server counts the prompt as 5,033 // 4 = 1,258 tokens,
    # refuses 1,258 + 4,095 > 4,096 with vLLM's message, and the row is sent again with
    # 4,096 − 1,258 − 1 = 2,837 (one under the sum, which SGLang refuses too). Before, it asked max_tokens 1 and stored that answer as done (a
    # break-it pass).
    import json as _json

    (tmp_path / "in.jsonl").write_text(_json.dumps({"id": "long", "prompt": "x" * 5000}) + "\n")
    log = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), context=4096, model="llama-2-70b", log_bodies=str(log)) as server:
        done = generate(_request(tmp_path, server.url, model="llama-2-70b"))
    assert (done.stored, done.skipped, done.errors) == (1, 0, 0)
    assert [body["max_tokens"] for body in _jsonl(log)] == [4095, 2837]
