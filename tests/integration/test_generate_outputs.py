"""What ``generate`` reports and keeps: blank input lines in the accounting, and an --export that
fails after the run (checked up front, so only a disk that fills or a directory removed meanwhile)
loses nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.runner import prepare as runner_prepare


def _input(path: Path) -> Path:
    # 3 rows; line 2 empty, line 4 whitespace, and two blank lines at the end: 4 blank lines.
    path.write_text('{"id": "a", "prompt": "x"}\n\n{"id": "b", "prompt": "y"}\n   \n{"id": "c", "prompt": "z"}\n\n\n')
    return path


def test_blank_lines_are_counted_in_the_summary_and_the_accounting_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    data = _input(tmp_path / "in.jsonl")
    with FaultServerProcess(str(tmp_path)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)], out_dir=tmp_path / "run", endpoints=[server.url], model="fault-model"
            )
        )
        assert (result.units_total, result.stored, result.rejected_rows, result.blank_lines) == (3, 3, 0, 4)
        assert json.loads((tmp_path / "run" / "summary.json").read_text())["blank_lines"] == 4
        assert (tmp_path / "run" / "rejects.jsonl").read_text() == ""  # blank lines are not rejects
        from tokenplan.cli import main

        monkeypatch.setattr(
            sys,
            "argv",
            [
                "tokenplan",
                "generate",
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--quiet",
            ],
        )
        main()
    out = capsys.readouterr().out
    assert "units         3 = 3 stored + 0 skipped + 0 errors  [ok]" in out
    assert "rejected rows 0 (see rejects.jsonl), blank lines 4 (not rows)   done before this run 3" in out


def test_an_export_failing_after_the_run_keeps_the_records_and_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    data = _input(tmp_path / "in.jsonl")
    gone = tmp_path / "gone" / "x.parquet"  # its directory is missing when the export runs
    monkeypatch.setattr(runner_prepare, "check_output_file", lambda *args: None)  # as if it vanished meanwhile
    with FaultServerProcess(str(tmp_path)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)], out_dir=tmp_path / "run", endpoints=[server.url], model="fault-model", export=gone
            )
        )
        assert (result.stored, result.accounting_ok, result.export_rows) == (3, True, None)
        assert result.export_error.startswith(f"--export {str(gone)!r} failed (")
        assert "No such file or directory" in result.export_error and "\n" not in result.export_error
        assert result.export_error.endswith(
            f"); every record is kept in {tmp_path / 'run'}: rerun the same command to export again"
        )
        assert (tmp_path / "run" / "summary.json").exists()
        from tokenplan.cli import main

        monkeypatch.setattr(
            sys,
            "argv",
            [
                "tokenplan",
                "generate",
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--quiet",
                "--export",
                str(gone),
            ],
        )
        with pytest.raises(SystemExit) as exited:
            main()
        captured = capsys.readouterr()
        assert exited.value.code == 2
        assert "units         3 = 3 stored + 0 skipped + 0 errors  [ok]" in captured.out  # the summary first
        assert captured.err.splitlines()[-1] == f"error: {result.export_error}"  # after the notes
        assert captured.err.count("error:") == 1 and "Traceback" not in captured.err
        # The same command once the directory is back: nothing is sent again, the export is written.
        gone.parent.mkdir()
        again = generate(
            GenerateRequest.build(
                inputs=[str(data)], out_dir=tmp_path / "run", endpoints=[server.url], model="fault-model", export=gone
            )
        )
    assert (again.already_done, again.export_rows, again.export_error) == (3, 3, None)
    assert sorted(p.name for p in gone.parent.iterdir()) == ["x.parquet"]  # no leftover .tmp


@pytest.mark.parametrize("n", [1, 3])
def test_an_input_mostly_rejected_is_said_to_be_perhaps_the_wrong_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, n: int
) -> None:
    # 1 usable row and 2 rows without a prompt or messages: more rejected (2) than used (1), the
    # sign of an input in a shape generate does not read; the run itself is done (exit 0). Rows
    # against rows: with --n 3 the one row makes 3 units, and comparing the 2 rejected rows with
    # those 3 units said nothing (a break-it pass).
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "text": "y"}\n{"id": "c", "text": "z"}\n')
    from tokenplan.cli import main

    with FaultServerProcess(str(tmp_path)) as server:
        argv = ["tokenplan", "generate", str(data), "--out", str(tmp_path / "run"), "--endpoint", server.url]
        sampling = ["--n", str(n), "--temperature", "0.7"]
        monkeypatch.setattr(sys, "argv", [*argv, "--model", "fault-model", "--quiet", *sampling])
        main()
    captured = capsys.readouterr()
    assert f"units         {n} = {n} stored + 0 skipped + 0 errors  [ok]" in captured.out
    (line,) = [line for line in captured.err.splitlines() if line.startswith("warning: 2 rows were rejected")]
    assert "and 1 used: the input's shape may not be one generate reads" in line
