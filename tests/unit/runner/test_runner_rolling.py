"""Progress off a terminal: the rolling summary.json and the log line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tokenplan.runner.progress import Snapshot
from tokenplan.runner.rolling import progress_line, rolling_summary


def _snap(stored: int) -> Snapshot:
    return Snapshot(
        units_total=400,
        done_before=0,
        stored=stored,
        skipped=1,
        errors=0,
        rejected=2,
        in_flight={"http://e/v1": 5},
        healthy_endpoints=1,
        output_tokens=1000,
        elapsed_s=3.0,
        output_tok_s_window=413.0,
        output_tok_s_mean=333.3,
        eta_s=61.0,
        plan_output_tok_s=None,
    )


def test_the_rolling_summary_is_written_at_most_every_n_seconds(tmp_path: Path) -> None:
    seen: list[int] = []
    callback = rolling_summary(lambda s: seen.append(s.stored), tmp_path, every_s=3600.0)
    callback(_snap(10))
    callback(_snap(20))  # within the hour: passed on, not written
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert seen == [10, 20] and summary["in_progress"] is True and summary["stored"] == 10
    assert summary["in_flight"] == 5 and not (tmp_path / "summary.json.tmp").exists()
    assert rolling_summary(None, tmp_path, None) is None  # no interval: nothing to wrap


def test_the_log_line_holds_counts_rates_and_eta() -> None:
    assert progress_line(_snap(249)) == (
        "done 250/400 (stored 249, skipped 1, errors 0, rejected 2) | 413 tok/s now, "
        "333 mean | in flight 5 | elapsed 3 s | ETA 1m01s"
    )


def test_the_log_line_says_when_endpoints_are_failing() -> None:
    # a new-user pass: with the only server down the log said "in flight 0" and nothing else;
    # 2 endpoints, 1 taking requests → "1 of 2 endpoints failing"
    snap = replace(_snap(249), in_flight={"http://e/v1": 5, "http://f/v1": 0}, healthy_endpoints=1)
    assert "| in flight 5 | 1 of 2 endpoints failing, probed until they answer | elapsed 3 s" in progress_line(snap)


def test_off_a_terminal_the_cli_logs_one_line_per_interval() -> None:
    import io

    from rich.console import Console

    from tokenplan.cli.generate_trial import log_every

    out = io.StringIO()
    log = log_every(0.0, Console(file=out, width=300))  # every call is past the 0 s interval
    log(_snap(1))
    log(_snap(2))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("done 3/400 (stored 2,")
    quiet = io.StringIO()
    hourly = log_every(3600.0, Console(file=quiet))
    hourly(_snap(1))
    assert quiet.getvalue() == ""  # the first line waits a whole interval
