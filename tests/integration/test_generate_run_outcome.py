"""Issue 26, what a run says about itself: a failed start binds no job, summary.json is the run's
over all invocations, the max_tokens default and the greedy warnings are said."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from tests.support.fault_jobs import fault_request as _request
from tests.support.fault_jobs import jsonl as _jsonl
from tests.support.fault_jobs import prompts as _prompts
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import generate
from tokenplan.errors import RunDirError, ServerError

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]
CATALOG = Path(__file__).resolve().parents[2] / "src" / "tokenplan" / "catalog" / "models"


def test_a_run_that_failed_before_any_answer_takes_the_corrected_command_without_force(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 10)
    with FaultServerProcess(str(tmp_path)) as server:
        with pytest.raises(ServerError, match="no endpoint is ready for model 'fault-modle'"):
            generate(_request(tmp_path, server.url, model="fault-modle", max_tokens=64))  # a typo
        assert not (tmp_path / "run" / "manifest.json").exists()  # the endpoints are checked first
        fixed = generate(_request(tmp_path, server.url, max_tokens=64))
        assert (fixed.stored, fixed.accounting_ok) == (10, True)
        # Once an answer is stored, the directory is bound: another configuration needs --force.
        with pytest.raises(RunDirError, match=r"different job \(sampling\.max_tokens: 64 → 128\)"):
            generate(_request(tmp_path, server.url, max_tokens=128))
        # A --force that finds no server leaves the directory bound to its job: the first
        # command still resumes it without --force.
        manifest = (tmp_path / "run" / "manifest.json").read_bytes()
        with pytest.raises(ServerError, match="no endpoint is ready"):
            generate(_request(tmp_path, server.url, model="fault-modle", max_tokens=128, force=True))
        assert (tmp_path / "run" / "manifest.json").read_bytes() == manifest
        again = generate(_request(tmp_path, server.url, max_tokens=64))
        assert (again.stored, again.already_done, again.accounting_ok) == (10, 10, True)


def test_summary_json_is_the_runs_over_all_invocations(tmp_path: Path) -> None:
    _prompts(tmp_path / "in.jsonl", 30)
    with FaultServerProcess(str(tmp_path), tokens=16) as server:
        first = generate(_request(tmp_path, server.url, limit=10))
        second = generate(_request(tmp_path, server.url))
        third = generate(_request(tmp_path, server.url, export=tmp_path / "out.jsonl"))  # exports only
    assert (first.summary["requests"], second.summary["requests"]) == (10, 30)
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s == third.summary
    # 30 requests in all, each answered with min(16, max_tokens) = 16 completion tokens: 480 tokens
    assert (s["invocations"], s["requests"], s["output_tokens"]) == (2, 30, 480)
    assert s["this_invocation"]["requests"] == 0 and s["this_invocation"]["output_tokens"] == 0
    # newuser finding 14: the closing summary of the rerun that sent nothing says whose figures it shows
    from tokenplan.report.generate import summary_text

    assert "  (the run's 2 earlier invocations; this one sent nothing)" in summary_text(third)
    assert "this one sent nothing" not in summary_text(second)
    # latency percentiles do not add up over invocations: the line says whose they are
    assert "(20 requests, the latest invocation's)" in summary_text(third)  # the second sent 30 - 10
    assert s["elapsed_s"] == pytest.approx(
        first.summary["this_invocation"]["elapsed_s"] + second.summary["this_invocation"]["elapsed_s"]
    )
    assert s["output_tok_s"] == pytest.approx(480 / s["elapsed_s"]) and s["output_tok_s"] > 0
    assert sum(b["requests"] for b in s["completion_tokens_histogram"]) == 30
    assert s["latency_e2e"]["count"] == 20  # the latest invocation that sent requests: 20 of them
    assert len(_jsonl(tmp_path / "run" / "invocations.jsonl")) == 2


def test_the_default_max_tokens_is_the_models_context_less_each_prompt_and_is_said(tmp_path: Path) -> None:
    model_dir = tmp_path / "Qwen3-8B"
    model_dir.mkdir()
    shutil.copy(CATALOG / "qwen3-8b.json", model_dir / "config.json")  # max_position_embeddings 40,960
    data = _prompts(tmp_path / "in.jsonl", 12)
    log = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), model=str(model_dir), log_bodies=str(log)) as server:
        done = subprocess.run(
            [
                *CLI,
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                str(model_dir),
                "--n",
                "2",
                "--thinking",
                "on",
                "--temperature",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "note: max_tokens: the model's context 40,960 (max_position_embeddings of " in done.stderr
    # newuser finding 14: notes were wrapped at 80 columns off a terminal; one line each, as warnings
    note = next(line for line in done.stderr.splitlines() if line.startswith("note: max_tokens:"))
    assert note.endswith("--max-tokens or --plan sets it")
    assert (
        "warning: --n 2 at temperature 0 (greedy decoding): the 2 samples of each row will be identical" in done.stderr
    )
    assert "warning: thinking on at temperature 0 (greedy decoding): some models loop" in done.stderr
    sent = _jsonl(log)
    assert len(sent) == 24
    for body in sent:
        # 40,960 less the bound on the prompt: 64 + per message (32 + its JSON bytes); "prompt 7" → 36
        # bytes ('{"role":"user","content":"prompt 7"}') → 40,960 − 132 = 40,828.
        expected = 40_960 - 64 - sum(32 + len(orjson.dumps(m)) for m in body["messages"])
        assert body["max_tokens"] == expected
    seven = [b for b in sent if b["messages"][0]["content"] == "prompt 7"]
    assert {b["max_tokens"] for b in seven} == {40_828}
    records = [
        json.loads(line) for p in (tmp_path / "run" / "shards").glob("*.jsonl") for line in p.read_text().splitlines()
    ]
    assert {r["turns"][0]["max_tokens"] for r in records if r["source_id"] == "r7"} == {40_828}


def test_records_of_units_the_input_no_longer_holds_are_kept_apart(tmp_path: Path) -> None:
    # 10 rows stored; then the same directory with --limit 4, and with a 6-row input under --force:
    # 10 − 4 = 6 and 10 − 6 = 4 records are for units the input does not hold. They are kept and
    # counted apart, and the accounting of this input's units holds (it used to report a mismatch).
    _prompts(tmp_path / "in.jsonl", 10)
    with FaultServerProcess(str(tmp_path)) as server:
        assert generate(_request(tmp_path, server.url)).stored == 10
        limited = generate(_request(tmp_path, server.url, limit=4))
        assert (limited.units_total, limited.stored, limited.outside_input, limited.accounting_ok) == (4, 4, 6, True)
        _prompts(tmp_path / "in.jsonl", 6)  # the first 6 rows of the same prompts
        shrunk = generate(_request(tmp_path, server.url, force=True))
    assert (shrunk.units_total, shrunk.stored, shrunk.already_done, shrunk.outside_input) == (6, 6, 6, 4)
    assert shrunk.accounting_ok and shrunk.summary["outside_input"] == 4
    from tokenplan.report.generate import summary_text

    assert "kept apart    4 records in the run directory are for units this input does not hold" in (
        summary_text(shrunk)
    )


def test_an_input_edited_to_the_same_size_is_another_job_and_an_old_manifest_still_resumes(tmp_path: Path) -> None:
    # break-it finding: "prompt 5" → "PROMPT 5" kept the file's size, and the rerun kept the stale
    # answer under [ok]; the manifest fingerprinted names and sizes only. Now each input's SHA-256 too.
    _prompts(tmp_path / "in.jsonl", 10)
    manifest = tmp_path / "run" / "manifest.json"
    with FaultServerProcess(str(tmp_path)) as server:
        assert generate(_request(tmp_path, server.url)).stored == 10
        original = (tmp_path / "in.jsonl").read_bytes()
        edited = original.replace(b'"prompt 5"', b'"PROMPT 5"')
        assert len(edited) == len(original) and edited != original
        (tmp_path / "in.jsonl").write_bytes(edited)
        with pytest.raises(RunDirError, match=r"different job \(inputs: .*'sha256'"):
            generate(_request(tmp_path, server.url))
        # A manifest written before inputs had a digest (names and sizes) is the same job: it resumes.
        (tmp_path / "in.jsonl").write_bytes(original)
        old = json.loads(manifest.read_text())
        old["job"]["inputs"] = [{k: v for k, v in f.items() if k != "sha256"} for f in old["job"]["inputs"]]
        from tokenplan.runner.store.manifest import fingerprint

        old["fingerprint"] = fingerprint(old["job"])
        manifest.write_text(json.dumps(old))
        again = generate(_request(tmp_path, server.url))
    assert (again.already_done, again.accounting_ok) == (10, True)
    assert "sha256" in json.loads(manifest.read_text())["job"]["inputs"][0]  # rewritten with the digest
