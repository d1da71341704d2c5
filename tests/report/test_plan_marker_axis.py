"""The plan's ◆ in the measured-vs-planned chart sits on the bench's axis: a bench level's
concurrency is its requests in flight over every endpoint it drove (bench.sweep: workers go
round-robin over the endpoints), the plan's ``concurrency_per_endpoint`` is per server, so the
marker is at that times the endpoints benched (a break-it pass: at 447 it sat 8× left of an
8-endpoint sweep)."""

from __future__ import annotations

import pytest
from tests.report.conftest import bench_level

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.bench_schema import BenchResult

pytest.importorskip("plotly")


def test_the_plan_marker_is_the_per_endpoint_figure_times_the_endpoints_benched() -> None:
    from tokenplan.report.measured_figures import bench_throughput_figure

    result = plan(PlanRequest(gpus=("8xb200",), specs=("none",)))
    chosen = result.options[0].chosen
    assert chosen is not None
    urls = [f"http://127.0.0.1:{30000 + i}/v1" for i in range(8)]
    data = {"model": "qwen3.6-27b", "endpoints": urls, "num_gpus": 8, "server": {}, "cap": {},
            "levels": [bench_level(512, 41_000.0), bench_level(4096, 60_000.0)]}  # fmt: skip
    bench = BenchResult.from_json(data, "bench JSON")
    fig = bench_throughput_figure(bench, result)
    (marker,) = [t for t in fig.data if t.marker.symbol == "diamond"]
    # e.g. 447 per endpoint × 8 endpoints = 3,576 in flight, on the axis of the levels 512 and 4,096
    assert list(marker.x) == [chosen.concurrency_per_endpoint * 8]
    assert "over the 8 endpoints benched" in marker.hovertemplate


def test_a_run_without_a_plan_figure_has_no_planned_bar() -> None:
    # two runs, one started from a plan (8,125 tok/s) and one not: the second gets no bar at all,
    # where it drew a 0 "planned" bar
    from tokenplan.report.measured_figures import runs_figure
    from tokenplan.run_summary import RunSummary

    common = {"model": "m", "units_total": 10, "stored": 10, "errors": 0, "elapsed_s": 5.0, "output_tokens": 500}
    runs = [
        RunSummary(**common, output_tok_s=100.0, plan_output_tok_s=8_125.0, run_dir="a"),
        RunSummary(**common, output_tok_s=90.0, run_dir="b"),
    ]
    (planned,) = [t for t in runs_figure(runs, None).data if t.name == "planned"]
    assert list(planned.y) == [8_125.0, None]
