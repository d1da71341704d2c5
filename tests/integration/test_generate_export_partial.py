"""An ``--export`` never puts part of a job, or nothing, under the name a training pipeline waits
for: a run with units left in ``errors.jsonl`` writes ``NAME.partial.SUFFIX`` (the rerun that
settles them writes NAME and removes it), and an export no stored record can go in writes nothing
and exits 2 (a new-user pass found ``train.jsonl`` holding 38 of 50 rows after an incomplete run,
and an empty ``train.jsonl`` after an ``[ok]`` run with exit 0)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import GenerateRequest, generate


def _input(path: Path) -> Path:
    path.write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y"}\n{"id": "c", "prompt": "z"}\n')
    return path


def _request(tmp_path: Path, url: str, export: Path, **options: object) -> GenerateRequest:
    return GenerateRequest.build(
        inputs=[str(tmp_path / "in.jsonl")],
        out_dir=tmp_path / "run",
        endpoints=[url],
        model="fault-model",
        export=export,
        concurrency=1,
        max_attempts=1,
        **options,
    )


def test_an_incomplete_run_exports_under_the_partial_name_and_the_complete_one_replaces_it(tmp_path: Path) -> None:
    _input(tmp_path / "in.jsonl")
    # The third request of the first server answers 500 and the run gives one try: 2 stored, 1 error.
    script = tmp_path / "script.json"
    boom = {"status": 500, "raw": '{"error": {"message": "boom"}}', "content_type": "application/json"}
    script.write_text(json.dumps([{"answer": True}, {"answer": True}, boom]))
    train = tmp_path / "out" / "train.jsonl"
    train.parent.mkdir()
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        first = generate(_request(tmp_path, server.url, train))
    assert (first.stored, first.errors, first.export_rows) == (2, 1, 2)
    assert sorted(p.name for p in train.parent.iterdir()) == ["train.partial.jsonl"]
    assert len((train.parent / "train.partial.jsonl").read_text().splitlines()) == 2
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["export"]["partial"] is True
    assert summary["export"]["path"] == str(train.parent / "train.partial.jsonl")
    from tokenplan.report.generate import summary_text

    assert summary_text(first).splitlines()[-1] == (
        f"exported      2 rows to {train.parent / 'train.partial.jsonl'}; partial: 1 unit waits in "
        "errors.jsonl, so not train.jsonl: the rerun that settles it writes train.jsonl and removes this file"
    )
    with FaultServerProcess(str(tmp_path)) as server:  # every request answered: the error is sent again
        second = generate(_request(tmp_path, server.url, train))
    assert (second.stored, second.errors, second.export_rows) == (3, 0, 3)
    assert sorted(p.name for p in train.parent.iterdir()) == ["train.jsonl"]  # the partial file removed
    assert len(train.read_text().splitlines()) == 3
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["export"]["partial"] is False


def test_an_export_no_record_can_go_in_writes_nothing_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _input(tmp_path / "in.jsonl")
    # Every answer cut by max_tokens while thinking: reasoning, no answer text (SpecForge's
    # validator refuses such a turn, so the training file leaves it out).
    cut = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "fault-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "", "reasoning_content": "thinking"},
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"status": 200, "raw": json.dumps(cut), "content_type": "application/json"}]))
    train = tmp_path / "train.jsonl"
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        from tokenplan.cli import main

        argv = ["tokenplan", "generate", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "run")]
        argv += ["--endpoint", server.url, "--model", "fault-model", "--max-tokens", "2", "--quiet"]
        monkeypatch.setattr(sys, "argv", [*argv, "--export", str(train)])
        with pytest.raises(SystemExit) as exited:
            main()
    captured = capsys.readouterr()
    assert exited.value.code == 2
    assert "units         3 = 3 stored + 0 skipped + 0 errors  [ok]" in captured.out
    assert "exported" not in captured.out  # nothing was written
    assert captured.err.splitlines()[-1] == (
        f"error: --export {str(train)!r}: none of the 3 stored records can go in it (3 no answer text, e.g. "
        f"cut by max_tokens while thinking), so nothing was written; the records are kept in {tmp_path / 'run'}"
    )
    assert not train.exists() and "Traceback" not in captured.err
