"""summary.json's plan figure over a run of several invocations: each invocation's share of the
plan (for the endpoints it was given), weighted by its sending time, as the run-wide tok/s is
(runner.store.invocations.run_totals). It was the latest invocation's share alone."""

from __future__ import annotations

import json
from pathlib import Path

from tokenplan.runner.store.invocations import LOG_NAME, run_totals


def _lines(run_dir: Path, *entries: dict) -> None:
    (run_dir / LOG_NAME).write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_the_plan_figure_is_each_invocations_share_weighted_by_its_sending_time(tmp_path: Path) -> None:
    # an hour on all 8 servers (share 80,000 tok/s), an hour on 1 of them (10,000), and a line
    # written before lines carried the plan (not weighed): (80,000 × 3,600 + 10,000 × 3,600) /
    # 7,200 = 45,000 tok/s, against which the run-wide rate over both hours is read
    _lines(
        tmp_path,
        {"invocation": "a", "elapsed_s": 3600, "requests": 10, "output_tokens": 100, "plan_output_tok_s": 80_000.0},
        {"invocation": "b", "elapsed_s": 3600, "requests": 10, "output_tokens": 100, "plan_output_tok_s": 10_000.0},
        {"invocation": "c", "elapsed_s": 100, "requests": 1, "output_tokens": 10},
    )
    assert run_totals(tmp_path).plan_output_tok_s == 45_000.0


def test_no_plan_or_an_unusable_one_gives_none(tmp_path: Path) -> None:
    _lines(
        tmp_path,
        {"invocation": "a", "elapsed_s": 60, "requests": 1, "output_tokens": 5, "plan_output_tok_s": None},
        {"invocation": "b", "elapsed_s": 60, "requests": 1, "output_tokens": 5, "plan_output_tok_s": "x"},
        {"invocation": "c", "elapsed_s": 60, "requests": 1, "output_tokens": 5, "plan_output_tok_s": -1},
    )
    assert run_totals(tmp_path).plan_output_tok_s is None
