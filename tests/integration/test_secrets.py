"""Issue 26: no secret of a run reaches a file, a printed line or a report.

The secrets: a password in ``user:password@``, the Basic token sent for it, a bearer key
(``$OPENAI_API_KEY``) and a key in the endpoint's query string. The fault server echoes what it
was sent (``{{authorization}}``, the bare ``{{credential}}``, the ``{{target}}`` with its query)
into refusals (skipped.jsonl), server errors and malformed answers (errors.jsonl), a fatal 401
(the error line), and into the content of a 200 answer (the stored record and the export). Every
file written under the run directory and the export, ``bench --save``'s JSON, ``report``'s HTML
and every printed line are searched for each secret.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.fault_server import FaultServerProcess  # noqa: E402

SRC = str(Path(__file__).resolve().parents[2] / "src")
PASSWORD = "hunter2-pw"
# base64("alice:hunter2-pw"): "ali"→YWxp, "ce:"→Y2U6, "hun"→aHVu, "ter"→dGVy, "2-p"→Mi1w, "w"→dw==
BASIC = "YWxpY2U6aHVudGVyMi1wdw=="
BEARER = "sk-bearer-test-4711"
QUERY_KEY = "qk-query-secret-9321"
SECRETS = (PASSWORD, BASIC, BEARER, QUERY_KEY)
ECHO = "auth={{authorization}} bare={{credential}} target={{target}}"


def _cli(args: list[str], api_key: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = SRC
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return subprocess.run(
        [sys.executable, "-c", "from tokenplan.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _endpoint(server: FaultServerProcess) -> str:
    return f"http://alice:{PASSWORD}@127.0.0.1:{server.port}/v1?key={QUERY_KEY}&api-version=2024-02-01"


def _no_secret_in(paths: list[Path], printed: str) -> None:
    assert paths
    for path in paths:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, (path, secret)
    for secret in SECRETS:
        assert secret not in printed, secret


def _server(tmp_path: Path, entries: list[dict]) -> FaultServerProcess:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(entries))
    return FaultServerProcess(str(tmp_path), script=str(script), log_requests=str(tmp_path / "requests.jsonl"))


def _answer_echoing() -> dict:
    body = {
        "model": "fault-model",
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "echo " + ECHO, "reasoning_content": ECHO},
            }
        ],
    }
    return {"status": 200, "raw": json.dumps(body)}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("api_key", [None, BEARER], ids=["basic-auth", "bearer-key"])
def test_generate_writes_and_prints_no_secret(tmp_path: Path, api_key: str | None) -> None:
    # One unit per script entry (concurrency 1, one attempt each), in order: a normal answer, a 200
    # answer echoing everything (stored, exported), a 400 echo (skipped), a 500 echo and an
    # unparseable 200 echo (errors).
    entries = [
        {"answer": True},
        _answer_echoing(),
        {"status": 400, "raw": json.dumps({"error": {"message": "refused " + ECHO}})},
        {"status": 500, "raw": json.dumps({"error": {"message": "failed " + ECHO}})},
        {"status": 200, "raw": "not json " + ECHO},
    ]
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(len(entries)))
    )
    # two units end in errors.jsonl, so the export goes to the partial name (runner.store.export.partial_path)
    run_dir, export = tmp_path / "run", tmp_path / "out.partial.parquet"
    with _server(tmp_path, entries) as server:
        done = _cli(
            [
                "generate",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(run_dir),
                "--endpoint",
                _endpoint(server),
                "--model",
                "fault-model",
                "--concurrency",
                "1",
                "--max-attempts",
                "1",
                "--export",
                str(tmp_path / "out.parquet"),
            ],
            api_key,
        )
    assert export.exists(), done.stderr
    # What was sent: the credentials (Basic, or the bearer key) and the query string, every request.
    sent = _jsonl(tmp_path / "requests.jsonl")
    assert {r["authorization"] for r in sent} == {f"Bearer {api_key}" if api_key else f"Basic {BASIC}"}
    assert all(r["target"].endswith(f"?key={QUERY_KEY}&api-version=2024-02-01") for r in sent)
    # Each sink got its case: stored records (one echoing), skipped, errors.
    records = _jsonl(run_dir / "shards" / "part-00000.jsonl")
    assert len(records) == 2
    assert {t["endpoint"] for r in records for t in r["turns"]} == {
        f"http://127.0.0.1:{server.port}/v1?key=***&api-version=***"
    }
    scheme = "Bearer" if api_key else "Basic"
    # The query's key is masked; api-version is configuration, not a secret, and stays in the text.
    masked = f"auth={scheme} *** bare=*** target=/v1/chat/completions?key=***&api-version=2024-02-01"
    assert sorted(r["conversations"][-1]["content"] for r in records)[0] == "echo " + masked
    assert [s["detail"] for s in _jsonl(run_dir / "skipped.jsonl")] == ["refused " + masked]
    errors = _jsonl(run_dir / "errors.jsonl")
    assert sorted(e["reason"] for e in errors) == ["protocol", "status"]
    exported = json.dumps(pq.read_table(export).to_pylist(), default=str)  # Parquet pages are compressed
    assert "echo " + masked in exported
    for secret in SECRETS:
        assert secret not in exported, secret
    _no_secret_in([p for p in run_dir.rglob("*") if p.is_file()], done.stdout + done.stderr)


@pytest.mark.parametrize("api_key", [None, BEARER], ids=["basic-auth", "bearer-key"])
def test_a_fatal_answer_echoing_the_credentials_prints_no_secret(tmp_path: Path, api_key: str | None) -> None:
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "r0", "prompt": "p0"}) + "\n")
    denied = {"status": 401, "raw": json.dumps({"error": {"message": "denied " + ECHO}})}
    with _server(tmp_path, [denied]) as server:
        done = _cli(
            [
                "generate",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                _endpoint(server),
                "--model",
                "fault-model",
                "--max-attempts",
                "1",
            ],
            api_key,
        )
    assert done.returncode != 0 and "401 (denied auth=" in done.stderr, done.stderr
    _no_secret_in([p for p in (tmp_path / "run").rglob("*") if p.is_file()], done.stdout + done.stderr)


def test_a_rerun_with_a_rotated_query_key_resumes_the_same_run(tmp_path: Path) -> None:
    # The run directory is bound to the job (model, sampling, inputs), not to the endpoint's
    # secrets: a new key in the query string continues the run, and nothing of either key is kept.
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(4)))
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path)) as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        first = _cli(
            [
                "generate",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(run_dir),
                "--endpoint",
                f"{base}?key={QUERY_KEY}",
                "--model",
                "fault-model",
                "--limit",
                "2",
                "--json",
            ],
            None,
        )
        second = _cli(
            [
                "generate",
                str(tmp_path / "in.jsonl"),
                "--out",
                str(run_dir),
                "--endpoint",
                f"{base}?key={QUERY_KEY}-rotated",
                "--model",
                "fault-model",
                "--json",
            ],
            None,
        )
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    summary = json.loads(second.stdout)
    # --limit 2 stored r0, r1; the rerun finds them done and sends r2, r3: 2 + 2 = 4 stored
    # (summary.json covers the whole run: 4 requests; this invocation's own are 2).
    assert (summary["already_done"], summary["this_invocation"]["requests"], summary["stored"]) == (2, 2, 4)
    assert summary["requests"] == 4
    _no_secret_in(
        [p for p in run_dir.rglob("*") if p.is_file()], first.stdout + first.stderr + second.stdout + second.stderr
    )


BENCH = [
    "--model",
    "fault-model",
    "--concurrency",
    "1",
    "--num-prompts",
    "6",
    "--warmup",
    "0",
    "--isl",
    "16",
    "--osl",
    "4",
    "--no-metrics",
]


@pytest.mark.parametrize("api_key", [None, BEARER], ids=["basic-auth", "bearer-key"])
def test_bench_and_report_write_and_print_no_secret(tmp_path: Path, api_key: str | None) -> None:
    # Chats 1-2 are bench's length probes; then every third request fails with an echo (error samples).
    echo500 = {"status": 500, "raw": json.dumps({"error": {"message": "failed " + ECHO}})}
    with _server(tmp_path, [{"answer": True}, {"answer": True}, echo500]) as server:
        done = _cli(["bench", "--endpoint", _endpoint(server), *BENCH, "--save", str(tmp_path / "bench.json")], api_key)
    # Requests failed, so the sweep is saved and printed, then exits 2 with one line saying so.
    assert done.returncode == 2 and "requests failed (2 of 6 at concurrency 1)" in done.stderr, done.stderr
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["endpoints"] == [f"http://127.0.0.1:{server.port}/v1?key=***&api-version=***"]
    samples = data["levels"][0]["error_samples"]
    scheme = "Bearer" if api_key else "Basic"
    assert samples and set(samples) == {
        f"status 500: failed auth={scheme} *** bare=*** target=/v1/chat/completions?key=***&api-version=2024-02-01"
    }
    report = _cli(["report", "--bench", str(tmp_path / "bench.json"), "-o", str(tmp_path / "report.html")], None)
    assert report.returncode == 0, report.stderr
    assert f"127.0.0.1:{server.port}/v1?key=***" in (tmp_path / "report.html").read_text()
    _no_secret_in(
        [tmp_path / "bench.json", tmp_path / "report.html"], done.stdout + done.stderr + report.stdout + report.stderr
    )


def test_a_bench_error_line_and_an_old_bench_file_show_no_secret(tmp_path: Path) -> None:
    denied = {"status": 401, "raw": json.dumps({"error": {"message": "denied " + ECHO}})}
    with _server(tmp_path, [denied]) as server:
        done = _cli(["bench", "--endpoint", _endpoint(server), *BENCH], None)
    assert done.returncode != 0 and "401" in done.stderr, done.stderr
    assert f"127.0.0.1:{server.port}/v1?key=***&api-version=***" in done.stderr
    # A bench file saved before endpoints were stored masked: its table and its report mask them.
    with FaultServerProcess(str(tmp_path)) as healthy:
        saved = _cli(["bench", "--endpoint", healthy.url, *BENCH, "--save", str(tmp_path / "old.json")], None)
    assert saved.returncode == 0, saved.stderr
    old = json.loads((tmp_path / "old.json").read_text())
    old["endpoints"] = [_endpoint(server)]
    (tmp_path / "old.json").write_text(json.dumps(old))
    table = _cli(["bench", "--from-json", str(tmp_path / "old.json")], None)
    report = _cli(["report", "--bench", str(tmp_path / "old.json"), "-o", str(tmp_path / "report.html")], None)
    assert table.returncode == 0 and report.returncode == 0, table.stderr + report.stderr
    assert f"127.0.0.1:{server.port}/v1?key=***" in table.stdout
    _no_secret_in(
        [tmp_path / "report.html"],
        done.stdout + done.stderr + table.stdout + table.stderr + report.stdout + report.stderr,
    )


@pytest.mark.parametrize("spelling", ["separate", "equals"])
def test_a_bench_fit_profile_names_its_command_without_the_secrets(tmp_path: Path, spelling: str) -> None:
    # The profile's provenance (also the bench JSON's "fit") quotes the command line that fitted it;
    # `--endpoint URL` and `--endpoint=URL` must both reach it as display_url shows them.
    with FaultServerProcess(str(tmp_path)) as server:
        url = f"http://alice:{PASSWORD}@127.0.0.1:{server.port}/v1?key={QUERY_KEY}"
        endpoint = ["--endpoint", url] if spelling == "separate" else [f"--endpoint={url}"]
        fit = ["--fit", "-o", str(tmp_path / "profile.json"), "--config", "llama-3.1-8b", "--gpu", "h100-sxm"]
        done = _cli(["bench", *endpoint, *BENCH, "--save", str(tmp_path / "bench.json"), *fit], None)
    assert done.returncode == 0, done.stderr
    provenance = json.loads((tmp_path / "profile.json").read_text())["provenance"]
    masked = f"http://127.0.0.1:{server.port}/v1?key=***"
    assert (f"--endpoint {masked} " if spelling == "separate" else f"--endpoint={masked} ") in provenance
    _no_secret_in([tmp_path / "profile.json", tmp_path / "bench.json"], done.stdout + done.stderr)
