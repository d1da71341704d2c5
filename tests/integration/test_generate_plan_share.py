"""A run on fewer endpoints than its plan's launch runs servers compares itself with its share of
the plan's tok/s (runner.prepare.plan_share_tok_s), in summary.json as in the progress line; a
new-user pass read "plan 65,577" beside a run on 1 of the plan's 8 servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.fault_jobs import fault_request, prompts
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.generate import generate
from tokenplan.files.plan_hint import PlanHint
from tokenplan.runner.prepare import NoPlan, plan_share_tok_s


def _plan(tmp_path: Path, servers: int | None) -> Path:
    recommended = {"option": "8× b200", "concurrency_per_endpoint": 4, "output_tok_s_total": 65_000.0,
                   "num_replicas": 8, "configuration": "TP1×DP8"}  # fmt: skip
    if servers is not None:
        recommended["num_servers"] = servers
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"schema_version": 1, "model": "fault-model", "recommended": recommended}))
    return path


@pytest.mark.parametrize(("servers", "expected"), [(8, 8_125.0), (1, 65_000.0), (None, 65_000.0)])
def test_the_summary_compares_with_the_share_of_the_plan_the_run_was_given(tmp_path, servers, expected) -> None:
    # 1 endpoint of a plan whose launch runs 8 servers: 65,000 × 1/8 = 8,125 tok/s; a plan of one
    # server (vLLM's DP behind one), or one written before num_servers, is compared whole
    prompts(tmp_path / "in.jsonl", 3)
    with FaultServerProcess(str(tmp_path)) as server:
        done = generate(fault_request(tmp_path, server.url, plan=_plan(tmp_path, servers)))
    assert done.stored == 3
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["plan_output_tok_s"] == pytest.approx(expected)


def test_the_share_is_the_whole_figure_with_as_many_endpoints_as_servers_or_no_plan() -> None:
    hint = PlanHint(concurrency_per_endpoint=4, output_tok_s_total=65_000.0, num_replicas=8, num_servers=8)
    assert plan_share_tok_s(hint, 2) == pytest.approx(16_250.0)  # 65,000 × 2/8
    assert plan_share_tok_s(hint, 8) == plan_share_tok_s(hint, 12) == 65_000.0
    assert plan_share_tok_s(NoPlan(), 1) is None
