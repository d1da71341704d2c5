"""Issue 26, the run's outcome: a 4xx on every row is a configuration error, not 50 skipped rows
``[ok]``; skipped rows can be sent again; a server that refuses ``seed``; a second Ctrl-C."""

from __future__ import annotations

import json
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.support.fault_jobs import fault_request as _request
from tests.support.fault_jobs import jsonl as _jsonl
from tests.support.fault_jobs import prompts as _prompts
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import wait_for_stored

from tokenplan.api.generate import generate
from tokenplan.errors import ServerError

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]


def test_max_tokens_above_the_served_context_stops_the_run_and_the_corrected_command_finishes(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 50)
    # Each prompt is [{"role": "user", "content": "prompt N"}]: ≤ 44 characters → ≤ 11 tokens for the
    # server (len // 4), so 11 + 8,192 > 4,096 is refused for every row and 11 + 1,024 fits.
    with FaultServerProcess(str(tmp_path), context=4096) as server:
        with pytest.raises(ServerError) as stopped:
            generate(_request(tmp_path, server.url, max_tokens=8192, concurrency=4))
        message = str(stopped.value)
        assert "\n" not in message and "rows in a row with 400" in message
        assert "This model's maximum context length is 4096 tokens" in message  # the server's own words
        run = tmp_path / "run"
        assert _jsonl(run / "skipped.jsonl") == []  # nothing final
        refused = _jsonl(run / "errors.jsonl")
        # At least the 8 that decided it; at most those plus the 4 in flight when it stopped.
        assert 8 <= len(refused) <= 12 and {e["status"] for e in refused} == {400}
        # The corrected command: no stored answer yet, so no "different job" refusal and no --force.
        fixed = generate(_request(tmp_path, server.url, max_tokens=1024, concurrency=4))
    assert (fixed.stored, fixed.skipped, fixed.errors, fixed.accounting_ok) == (50, 0, 0, True)
    assert any("held no stored answer" in note for note in fixed.notes)


def test_a_job_smaller_than_eight_rows_all_refused_alike_is_a_configuration_error_too(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 5)
    with FaultServerProcess(str(tmp_path), p400=1.0) as server:
        with pytest.raises(ServerError, match=r"refused 5 rows in a row with 400 \('injected 400: context too long'\)"):
            generate(_request(tmp_path, server.url))
    assert _jsonl(tmp_path / "run" / "skipped.jsonl") == []
    assert sorted(e["id"] for e in _jsonl(tmp_path / "run" / "errors.jsonl")) == [f"r{i}" for i in range(5)]


def test_refusals_between_answers_are_the_rows_own_and_are_skipped(tmp_path: Path) -> None:
    rows, p400, seed = 60, 0.3, 11
    _prompts(tmp_path / "in.jsonl", rows)
    # One request at a time in row order, each drawing once from the server's Random(seed): row k is
    # refused exactly when draw k < 0.3 (no other fault is configured, and 400 is not retried).
    draws = random.Random(seed)
    expected = {f"r{k}" for k in range(rows) if draws.random() < p400}
    streak = longest = 0
    for k in range(rows):
        streak = streak + 1 if f"r{k}" in expected else 0
        longest = max(longest, streak)
    assert 0 < longest < 8  # the premise: no eight refusals in a row for this seed
    with FaultServerProcess(str(tmp_path), p400=p400, seed=seed) as server:
        result = generate(_request(tmp_path, server.url, concurrency=1))
    assert (result.stored, result.skipped, result.errors, result.accounting_ok) == (
        rows - len(expected),
        len(expected),
        0,
        True,
    )
    assert {s["id"] for s in _jsonl(tmp_path / "run" / "skipped.jsonl")} == expected


def test_retry_skipped_sends_the_skipped_rows_again(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 60)
    with FaultServerProcess(str(tmp_path), p400=0.3, seed=11) as server:
        first = generate(_request(tmp_path, server.url, concurrency=1))
    assert first.skipped > 0 and first.accounting_ok
    with FaultServerProcess(str(tmp_path)) as healthy:
        plain = generate(_request(tmp_path, healthy.url))
        assert (plain.stored, plain.skipped) == (first.stored, first.skipped)  # skipped is final by default
        again = generate(_request(tmp_path, healthy.url, retry_skipped=True))
    assert (again.stored, again.skipped, again.errors, again.accounting_ok) == (60, 0, 0, True)
    assert len(_jsonl(tmp_path / "run" / "skipped.retried.jsonl")) == first.skipped


def test_a_server_that_rejects_seed_stops_the_run_and_no_seed_finishes_it(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 20)
    log = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), reject_seed=1, log_bodies=str(log)) as server:
        with pytest.raises(ServerError, match="Unrecognized request argument supplied: seed.*--no-seed"):
            generate(_request(tmp_path, server.url, concurrency=2))
        log.unlink()
        result = generate(_request(tmp_path, server.url, concurrency=2, seed=None))
    assert (result.stored, result.errors, result.accounting_ok) == (20, 0, True)
    sent = _jsonl(log)
    assert len(sent) == 20 and not any("seed" in body for body in sent)
    records = _jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")
    assert {r["turns"][0]["seed"] for r in records} == {None} and records[0]["sampling"]["seed"] is None


@contextmanager
def _healthy_and_seed_refusing(tmp_path: Path) -> Iterator[tuple[FaultServerProcess, FaultServerProcess]]:
    """Two fault servers, each in its own folder: one that answers, one that refuses ``seed``."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with FaultServerProcess(str(tmp_path / "a")) as good, FaultServerProcess(str(tmp_path / "b"), reject_seed=1) as bad:
        yield good, bad


def test_one_misconfigured_endpoint_among_healthy_ones_is_a_job_wide_refusal(tmp_path: Path) -> None:
    # Endpoint A answers; endpoint B refuses seed. A's answers do not make B's refusals final
    # (a break-it pass found 9 of 200 rows skipped for good): the run stops naming B, nothing is in
    # skipped.jsonl, and the rerun on A alone stores every row.
    _prompts(tmp_path / "in.jsonl", 60)
    with _healthy_and_seed_refusing(tmp_path) as (good, bad):
        # 8 refusals start the control request; B's requests in flight meanwhile (≤ 2) join them
        with pytest.raises(ServerError, match=f"the server at {bad.url} refused (8|9|10) rows in a row with 400"):
            generate(_request(tmp_path, good.url, endpoints=[good.url, bad.url], concurrency=2))
        assert _jsonl(tmp_path / "run" / "skipped.jsonl") == []
        again = generate(_request(tmp_path, good.url, concurrency=2))
    assert (again.stored, again.skipped, again.errors, again.accounting_ok) == (60, 0, 0, True)


def test_a_small_job_over_a_healthy_and_a_misconfigured_endpoint_marks_nothing_final(tmp_path: Path) -> None:
    # 5 rows over A (answers) and B (refuses seed): B gets about 2 rows, below the streak of 8.
    # A break-it pass saw "3 stored + 2 skipped [ok]"; at the end B, which never answered while A
    # did, refused both alike: the run stops naming B, and nothing is in skipped.jsonl.
    _prompts(tmp_path / "in.jsonl", 5)
    with _healthy_and_seed_refusing(tmp_path) as (good, bad):
        with pytest.raises(ServerError, match=f"the server at {bad.url} refused"):
            generate(_request(tmp_path, good.url, endpoints=[good.url, bad.url], concurrency=1))
    assert _jsonl(tmp_path / "run" / "skipped.jsonl") == []


def test_too_long_rows_together_at_the_end_of_a_sorted_file_are_their_own_refusals(tmp_path: Path) -> None:
    # A file sorted by length: 88 short rows, then 12 whose prompts alone pass the served context.
    # The fault server counts len(messages JSON) // 4 tokens: "x" * 5,000 is over 1,250 tokens,
    # + 100 > 1,000; the short ones are under 20. The server answered the 88 first, so the 12
    # refusals are the rows' own (skipped); before, the eight in a row made a job-wide verdict
    # that no rerun could clear (a break-it pass).
    import json as _json

    rows = [{"id": f"s{i}", "prompt": f"short {i}"} for i in range(88)]
    rows += [{"id": f"l{i}", "prompt": "x" * 5000} for i in range(12)]
    (tmp_path / "in.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    with FaultServerProcess(str(tmp_path), context=1000) as server:
        done = generate(_request(tmp_path, server.url, max_tokens=100, concurrency=4))
    assert (done.stored, done.skipped, done.errors, done.accounting_ok) == (88, 12, 0, True)
    assert {r["id"] for r in _jsonl(tmp_path / "run" / "skipped.jsonl")} == {f"l{i}" for i in range(12)}


def test_the_cli_says_a_job_wide_refusal_in_one_line_and_exits_2(tmp_path: Path) -> None:
    data = _prompts(tmp_path / "in.jsonl", 30)
    with FaultServerProcess(str(tmp_path), reject_seed=1) as server:
        done = subprocess.run(
            [
                *CLI,
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--concurrency",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr and "[ok]" not in done.stdout
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "rows in a row with 400" in errors[0]
        both = subprocess.run(
            [
                *CLI,
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--seed",
                "3",
                "--no-seed",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert both.returncode == 2 and both.stderr == (
            "error: --no-seed '--seed 3' is not allowed (allowed: one of --seed N or --no-seed)\n"
        )
        fixed = subprocess.run(
            [
                *CLI,
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--concurrency",
                "2",
                "--no-seed",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert fixed.returncode == 0, fixed.stderr
    assert "30 = 30 stored + 0 skipped + 0 errors  [ok]" in fixed.stdout


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_with_exit_130_and_no_traceback(tmp_path: Path) -> None:
    data = _prompts(tmp_path / "in.jsonl", 200)
    # Half the requests stall for 60 s, so the first Ctrl-C's 60 s grace has requests to wait for.
    with FaultServerProcess(str(tmp_path), pstall=0.5, stall_s=60, seed=2) as server:
        command = [
            *CLI,
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            server.url,
            "--model",
            "fault-model",
            "--concurrency",
            "8",
            "--grace-s",
            "60",
        ]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_stored(tmp_path / "run", 0, proc)
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
        reader.start()
        proc.send_signal(signal.SIGINT)
        # Two signals sent back to back are one pending signal to the kernel: wait until the first was heard.
        seen = []
        while not any("a second Ctrl-C (or SIGTERM) stops at once" in line for line in seen):
            seen.append(lines.get(timeout=60))
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        took_s = time.monotonic() - started
    reader.join(timeout=30)  # stderr ends with the process: the reader has every line
    err = "".join(seen) + "".join(lines.get() for _ in range(lines.qsize()))
    assert proc.returncode == 130 and "Traceback" not in err and "CancelledError" not in err, err
    assert "error: interrupted twice: stopped at once" in err
    assert took_s < 30  # not the 60 s grace: the second signal cut it short
    # summary.json holds the counters at the stop and why, not the last rolling snapshot (a
    # new-user pass); still in_progress: a rerun finishes the run
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["in_progress"] is True and summary["stopped"].startswith("interrupted twice")
