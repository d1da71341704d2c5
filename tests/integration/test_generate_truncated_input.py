"""Issue 26, truncated compressed input: an interrupted copy of a ``.jsonl.zst`` used to store the
rows before the cut, write one "invalid JSON" reject and exit 0 ``[ok]`` (a cut inside the only
block read as an empty file). Now the run says which file broke, at which byte and after which
row, exits 2 and never prints ``[ok]``; rows stored before the break stay and a rerun resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.errors import RunDirError
from tokenplan.runner import prepare as runner_prepare
from tokenplan.runner.input.files import InputBroken
from tokenplan.runner.store.appendlog import iter_records

CLI = [sys.executable, "-c", "import sys; from tokenplan.cli import main; sys.argv[0] = 'tokenplan'; main()"]
# 600 rows of ~260 bytes = ~156 KB decompressed: past the 64 KiB one read decodes, so rows before
# the break are reached when it is read anyway.
ROWS = [{"id": f"r{i:03d}", "prompt": f"question {i} " + "x" * 230} for i in range(600)]


def _zst(path: Path, rows: list[dict]) -> bytes:
    with pa.output_stream(path, compression="zstd") as out:
        out.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    return path.read_bytes()


def _stored(run_dir: Path) -> list[str]:
    return [r["id"] for shard in sorted((run_dir / "shards").glob("*.jsonl")) for _, r in iter_records(shard)]


@pytest.mark.parametrize("keep", ["most", "first block"])
def test_a_truncated_zst_input_is_refused_before_sending_in_one_line(tmp_path: Path, keep: str) -> None:
    whole = _zst(tmp_path / "whole.jsonl.zst", ROWS)
    cut = len(whole) - 5 if keep == "most" else 16
    data = tmp_path / "copy.jsonl.zst"
    data.write_bytes(whole[:cut])
    done = subprocess.run(
        [
            *CLI,
            "generate",
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "[ok]" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith(
        f"error: input {str(data)!r} is truncated or damaged at byte {cut:,} of {cut:,} "
        "(OSError: Truncated compressed stream); last row read: "
    )
    assert not (tmp_path / "run").exists()  # refused before anything was made or sent


def test_a_zst_input_that_breaks_mid_run_stores_the_rows_before_it_exits_2_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    whole = _zst(tmp_path / "whole.jsonl.zst", ROWS)
    data = tmp_path / "in.jsonl.zst"
    data.write_bytes(whole[: len(whole) - 5])
    # as if the file were cut after the up-front check (a copy still being written)
    monkeypatch.setattr(runner_prepare, "check_readable", lambda files: None)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path)) as server:
        from tokenplan.cli import main

        monkeypatch.setattr(
            sys,
            "argv",
            [
                "tokenplan",
                "generate",
                str(data),
                "--out",
                str(run_dir),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--quiet",
            ],
        )
        with pytest.raises(SystemExit) as exited:
            main()
        assert exited.value.code == 2
        out, err = capsys.readouterr()
        assert "[ok]" not in out + err and len(err.strip().splitlines()) == 1
        stored = _stored(run_dir)
        # every row read before the break was sent and stored (the run settled them), in order
        assert stored and sorted(stored) == [f"r{i:03d}" for i in range(len(stored))] and len(stored) < len(ROWS)
        assert err.strip() == (
            f"error: input {str(data)!r} is truncated or damaged at byte {len(whole) - 5:,} of "
            f"{len(whole) - 5:,} (OSError: Truncated compressed stream); last row read: line "
            f"{len(stored):,}; the rest of the file cannot be read: repair or copy it again, "
            "then rerun"
        )
        # the whole file copied again: the input's size changed, so the run directory asks for --force ...
        data.write_bytes(whole)
        with pytest.raises(RunDirError, match=r"inputs"):
            generate(
                GenerateRequest.build(inputs=[str(data)], out_dir=run_dir, endpoints=[server.url], model="fault-model")
            )
        # ... and with it the rerun sends only the rest
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)], out_dir=run_dir, endpoints=[server.url], model="fault-model", force=True
            )
        )
    assert (result.stored, result.already_done, result.accounting_ok) == (len(ROWS), len(stored), True)
    assert sorted(_stored(run_dir)) == [r["id"] for r in ROWS]


def test_the_reader_raises_rather_than_rejecting_when_a_gz_input_breaks(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.gz"
    with pa.output_stream(path, compression="gzip") as out:
        out.write("".join(json.dumps(r) + "\n" for r in ROWS).encode())
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    from tokenplan.runner.input.rows import read_rows

    got = []
    with pytest.raises(InputBroken) as broken:
        got.extend(read_rows([path]))
    assert broken.value.line == len(got) and broken.value.byte == len(whole) // 2
