"""``tokenplan generate`` as a user runs it: one-line errors, exit codes, Ctrl-C and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import wait_for_stored

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]


def _rows(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(n)))
    return path


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            ["--mode", "sideways"],
            "error: --mode 'sideways' is not allowed (allowed: one of 'regenerate' or 'complete')",
        ),
        (["--on-length", "truncate"], "error: --on-length 'truncate' is not allowed"),
        (["--thinking", "maybe"], "error: --thinking 'maybe' is not allowed"),
        (["--extra-body", "[1]"], "error: --extra-body '[1]' is not allowed (allowed: a JSON object"),
        (["--concurrency", "0"], "error: --concurrency 0 is not allowed"),
        (
            ["--temperature", "0.7", "--extra-body", '{"temperature": 1.5}'],
            "error: --extra-body {'temperature': 1.5} is not allowed (allowed: no temperature (use --temperature: ",
        ),
        (
            ["--thinking", "on", "--extra-body", '{"chat_template_kwargs": 5}'],
            "error: --extra-body {'chat_template_kwargs': 5} is not allowed (allowed: chat_template_kwargs as an object",
        ),
        (["--temperature", "-1"], "error: --temperature -1 is not allowed (allowed: a number from 0 to 100)\n"),
        # both bounds said, whichever is broken (it said "≤ 1" for 2 and "> 0" for -1: a new-user pass)
        (["--top-p", "2"], "error: --top-p 2 is not allowed (allowed: a number above 0 and at most 1)\n"),
        (["--top-p", "-1"], "error: --top-p -1 is not allowed (allowed: a number above 0 and at most 1)\n"),
        (
            ["--endpoint", "http://127.0.0.1:9/v1/"],
            "error: --endpoint ['http://127.0.0.1:9/v1', 'http://127.0.0.1:9/v1'] is not allowed (allowed: "
            "each server once ('http://127.0.0.1:9/v1' is given twice))\n",
        ),
        (
            ["--endpoint", "notaurl"],
            "error: --endpoint ['http://127.0.0.1:9/v1', 'notaurl'] is not allowed (allowed: "
            "http(s) base URLs such as http://127.0.0.1:8000/v1; 'notaurl': the scheme must be "
            "http or https)\n",
        ),
    ],
)
def test_a_bad_option_is_one_line_naming_it_and_exit_2(tmp_path: Path, option: list[str], message: str) -> None:
    data = _rows(tmp_path / "in.jsonl", 1)
    done = subprocess.run(
        [
            *CLI,
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            *option,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_an_unreachable_endpoint_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data = _rows(tmp_path / "in.jsonl", 1)
    done = subprocess.run(
        [*CLI, str(data), "--out", str(tmp_path / "run"), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (
        2,
        "error: no endpoint is ready for model 'm': http://127.0.0.1:9/v1 (transport: ConnectError)\n",
    )


@pytest.mark.slow
def test_ctrl_c_stops_resumably_and_the_same_command_finishes(tmp_path: Path) -> None:
    data = _rows(tmp_path / "in.jsonl", 2000)
    with FaultServerProcess(str(tmp_path), delay_s=0.05) as server:
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
            "4",
            "--grace-s",
            "5",
        ]
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_stored(tmp_path / "run", 0, first)  # its SIGINT handler is installed once it stores
        first.send_signal(signal.SIGINT)
        out, _ = first.communicate(timeout=30)
        assert first.returncode == 130 and "interrupted: rerun the same command to resume" in out
        second = subprocess.run([*command[:-4], "--concurrency", "64"], capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "2,000 = 2,000 stored + 0 skipped + 0 errors  [ok]" in second.stdout


def _generate(tmp_path: Path, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    data = _rows(tmp_path / "in.jsonl", 1)
    return subprocess.run(
        [*CLI, str(data), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", *options],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _one_line_exit_2(done: subprocess.CompletedProcess, expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr == expected + "\n" and "Traceback" not in done.stderr


def test_an_out_dir_that_cannot_be_made_or_is_a_file_is_refused_before_sending(tmp_path: Path) -> None:
    # Had the checks passed, the unreachable endpoint would be the error: these come first.
    if Path("/proc/self").exists():
        _one_line_exit_2(
            _generate(tmp_path, "--out", "/proc/forbidden"),
            "error: --out '/proc/forbidden' is not allowed (allowed: a directory to create or reuse "
            "(cannot create it: No such file or directory))",
        )
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    _one_line_exit_2(
        _generate(tmp_path, "--out", str(afile)),
        f"error: --out {str(afile)!r} is not allowed (allowed: a directory to create or reuse; "
        "this path is an existing file)",
    )
    assert afile.read_text() == "keep me"


def test_an_export_path_is_checked_before_the_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _one_line_exit_2(
        _generate(tmp_path, "--out", str(run), "--export", "/nonexistent/dir/x.parquet"),
        "error: --export '/nonexistent/dir/x.parquet' is not allowed (allowed: a Parquet file path in "
        "an existing, writable directory; /nonexistent/dir does not exist)",
    )
    _one_line_exit_2(
        _generate(tmp_path, "--out", str(run), "--export", str(tmp_path)),
        f"error: --export {str(tmp_path)!r} is not allowed (allowed: a Parquet file path in an "
        "existing, writable directory; this path is a directory)",
    )
    assert not run.exists()  # nothing made for a command that was refused


def test_a_named_api_key_variable_that_is_unset_is_refused(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NOPE_UNSET", "OPENAI_API_KEY")}
    _one_line_exit_2(
        _generate(tmp_path, "--out", str(tmp_path / "run"), "--api-key-env", "NOPE_UNSET", env=env),
        "error: --api-key-env 'NOPE_UNSET' is not allowed (allowed: the name of a set, non-empty "
        "environment variable holding the API key ($NOPE_UNSET is unset or empty; leave "
        "--api-key-env out for a server that needs no key))",
    )
    # The default variable may be unset (a local server needs no key): it goes on to the server.
    _one_line_exit_2(
        _generate(tmp_path, "--out", str(tmp_path / "run"), env=env),
        "error: no endpoint is ready for model 'm': http://127.0.0.1:9/v1 (transport: ConnectError)",
    )


def test_a_plan_for_another_model_is_a_warning_before_sending(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": "qwen3.6-27b", "recommended": {"concurrency_per_endpoint": 48}}))
    done = _generate(tmp_path, "--out", str(tmp_path / "run"), "--plan", str(plan))
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"warning: the plan {plan} was made for model 'qwen3.6-27b', but --model is 'm': its concurrency and "
        "throughput may not fit this model",
        "error: no endpoint is ready for model 'm': http://127.0.0.1:9/v1 (transport: ConnectError)",
    ]


def test_a_run_whose_rows_all_failed_is_not_ok_and_exits_2_and_an_empty_input_is_refused(tmp_path: Path) -> None:
    # Every request answers 500: the rows end in errors.jsonl (a rerun sends them again), so the run
    # has work undone: never "[ok]", one line after the summary, exit 2.
    data = _rows(tmp_path / "in.jsonl", 3)
    with FaultServerProcess(str(tmp_path), p500=1.0) as server:
        done = subprocess.run(
            [*CLI, str(data), "--out", str(tmp_path / "run"), "--endpoint", server.url, "--model", "fault-model"]
            + ["--max-attempts", "2", "--quiet"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        "[ok]" not in done.stdout
        and "3 = 0 stored + 0 skipped + 3 errors  [incomplete: 3 in errors.jsonl]" in done.stdout
    )
    errors = [line for line in done.stderr.splitlines() if not line.startswith("note: ")]
    assert errors == [
        f"error: 3 of 3 units failed every try (the reasons are in {tmp_path / 'run' / 'errors.jsonl'}); "
        "rerun the same command to send them again"
    ]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with FaultServerProcess(str(tmp_path)) as healthy:
        nothing = subprocess.run(
            [*CLI, str(empty), "--out", str(tmp_path / "run2"), "--endpoint", healthy.url, "--model", "fault-model"]
            + ["--quiet"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert nothing.returncode == 2 and "[ok]" not in nothing.stdout
    assert [line for line in nothing.stderr.splitlines() if not line.startswith("note: ")] == [
        f"error: input '{empty}' is not allowed (allowed: at least one row (it holds none))"
    ]
