"""A finished run's figures for ``calibrate --from-run``: summary, manifest, mean prompt length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.errors import ConfigError, InputError
from tokenplan.runner.store.record import OutputRecord
from tokenplan.runner.store.rundir import RunDir
from tokenplan.runner.store.summary import mean_prompt_tokens, read_run_summary

JOB = {"model": "served-model", "sampling": {"temperature": 0.0}}


def _record(unit_id: str, *prompt_tokens: int | None) -> dict:
    return {"id": unit_id, "turns": [{"usage": None if t is None else {"prompt_tokens": t}} for t in prompt_tokens]}


def test_the_mean_prompt_length_counts_every_turn_with_usage_and_passes_over_a_torn_line(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB, shard_max_bytes=1)  # one record per shard: the mean spans shards
    run.write_done(OutputRecord.from_json(_record("a", 10, 30)))
    run.write_done(OutputRecord.from_json(_record("b", 20, None)))  # a turn without usage is not counted
    run.close()
    last = sorted((tmp_path / "shards").glob("part-*.jsonl"))[-1]
    with last.open("ab") as fh:
        fh.write(b'{"id": "c", "turns": [{"usage": {"prompt_t')  # a torn tail: read over, not cut
    # (10 + 30 + 20) / 3 turns = 20 tokens
    assert mean_prompt_tokens(tmp_path) == 20.0
    assert last.read_bytes().endswith(b'"prompt_t')  # nothing was repaired by a reader


def test_no_usage_anywhere_gives_none(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, JOB)
    run.write_done(OutputRecord.from_json(_record("a", None)))
    run.close()
    assert mean_prompt_tokens(tmp_path) is None


def test_summary_and_manifest_are_read_and_a_missing_one_names_the_directory(tmp_path: Path) -> None:
    RunDir.open(tmp_path, JOB).close()  # writes manifest.json
    with pytest.raises(InputError, match="summary.json"):
        read_run_summary(tmp_path)
    (tmp_path / "summary.json").write_text(
        json.dumps({"requests": 4, "output_tokens": 400, "output_tok_s": 80.0, "latency_ttft": {"mean_ms": 12.5}})
    )
    run = read_run_summary(tmp_path)
    assert (run.requests, run.output_tokens, run.output_tok_s, run.ttft_mean_ms, run.model) == (
        4,
        400,
        80.0,
        12.5,
        "served-model",
    )
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        read_run_summary(tmp_path)


def test_the_requests_in_flight_are_the_runs_where_every_invocation_kept_the_same(tmp_path: Path) -> None:
    from tokenplan.runner.store.invocations import run_totals

    def totals(*lines: dict) -> int | None:
        (tmp_path / "invocations.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        return run_totals(tmp_path).as_summary()["requests_in_flight"]

    def line(requests: int, in_flight: object = None) -> dict:
        base = {"elapsed_s": 10.0, "requests": requests, "output_tokens": 8 * requests}
        return base if in_flight is None else {**base, "requests_in_flight": in_flight}

    # 2 endpoints × 32 in both invocations: 64; resumed at 16 per endpoint (32): no one figure
    assert totals(line(100, 64), line(50, 64)) == 64
    assert totals(line(100, 64), line(50, 32)) is None
    # an invocation that answered nothing does not count; one of an earlier release (no field)
    # or a hand edit leaves the run without a figure
    assert totals(line(100, 64), line(0, 32)) == 64
    assert totals(line(100, 64), line(50)) is None and totals(line(100, True)) is None


def test_calibrate_from_run_takes_the_runs_own_requests_in_flight(tmp_path: Path) -> None:
    from tokenplan.api.bench import run_measurement
    from tokenplan.api.resolve import PredictRequest

    RunDir.open(tmp_path, JOB).close()
    summary = {"requests": 4, "output_tokens": 400, "output_tok_s": 80.0, "latency_ttft": None}
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "requests_in_flight": 64}))
    desc = PredictRequest(model="qwen3-8b", gpu="h100-sxm", isl=1000.0)
    assert read_run_summary(tmp_path).requests_in_flight == 64
    assert run_measurement(str(tmp_path), desc).concurrency == 64.0
    # --concurrency wins over the run's own
    from dataclasses import replace

    assert run_measurement(str(tmp_path), replace(desc, concurrency=8)).concurrency == 8.0
    # a run that states none (an earlier release) still asks for --concurrency, saying why
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    from tokenplan.errors import MissingOptionError

    with pytest.raises(MissingOptionError, match="its summary.json states none"):
        run_measurement(str(tmp_path), desc)
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "requests_in_flight": 0}))
    with pytest.raises(ConfigError, match="requests_in_flight: 0 is not allowed"):
        read_run_summary(tmp_path)
