"""``tokenplan report`` and ``bench --from-json`` check every figure, text and table they draw
from a plan or bench JSON (issue 26): a missing key, text for a number, NaN or a figure whose
printed form overflows is one line naming the key, never a traceback or ``nan`` on the page."""

from __future__ import annotations

import copy
import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tokenplan.api.bench import read_bench_json
from tokenplan.api.plan import PlanRequest, plan
from tokenplan.errors import ConfigError
from tokenplan.files.reports import load_plan
from tokenplan.report.bench import show_bench


@pytest.fixture(scope="module")
def written() -> dict:
    """A plan as ``tokenplan plan --json --deadline 1d`` writes it (8× B200, no speculation: one
    option, a provisioning answer and 80 % bands)."""
    return plan(PlanRequest(gpus=("8xb200",), specs=("none",), deadline_s=86_400)).to_json()


def _plan(tmp_path: Path, written: dict, change) -> Path:
    plan = copy.deepcopy(written)
    change(plan)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return tmp_path / "plan.json"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["job"].pop("isl"), "job.isl: missing"),
        (lambda p: p["job"].update(samples=None), "job.samples: None is not allowed (allowed: an integer)"),
        (lambda p: p.update(engine=None), "engine: None is not allowed (allowed: text)"),
        (lambda p: p["options"][0].pop("bottleneck"), "options[0].bottleneck: missing"),
        (
            lambda p: p["options"][0]["usd_interval"].update(low="x"),
            "options[0].usd_interval.low: 'x' is not allowed (allowed: a finite number)",
        ),
        (
            lambda p: p["options"][0]["usd_interval"].update(high=float("nan")),
            "options[0].usd_interval.high: nan is not allowed (allowed: a finite number)",
        ),
        (
            lambda p: p["options"][0].update(rejected="x"),
            "options[0].rejected: 'x' is not allowed (allowed: a JSON object)",
        ),
        (
            lambda p: p["provisioning"].update(deadline_days=1e308),
            # days are worded from their seconds: 1e308 days × 86,400 s overflows a float
            f"provisioning.deadline_days: 1e+308 is not allowed (allowed: a number ≤ {sys.float_info.max / 86400:g})",
        ),
        (
            lambda p: p["options"][0].update(wall_days=-1.0),
            "options[0].wall_days: -1.0 is not allowed (allowed: a number > 0)",
        ),
        (
            lambda p: p["options"][0].update(output_tok_s_total=0.0),
            "options[0].output_tok_s_total: 0.0 is not allowed (allowed: a number > 0)",
        ),
        (
            lambda p: p["options"][0].update(output_tok_s_total=1e308),
            "options[0].output_tok_s_total: 1e+308 is not allowed (allowed: a number ≤ 1e+12)",
        ),
        (lambda p: p["options"][0].update(count=-8), "options[0].count: -8 is not allowed (allowed: a number > 0)"),
        (
            lambda p: p.update(options=[]),
            "options: [] is not allowed (allowed: one or more options, as `tokenplan plan --json` writes them)",
        ),
        (
            lambda p: p.update(schema_version=2),
            "schema_version: 2 is not allowed (allowed: 1, the schema this tokenplan reads and writes)",
        ),
    ],
    ids=[
        "isl_missing",
        "samples_null",
        "engine_null",
        "bottleneck_missing",
        "band_text",
        "band_nan",
        "rejected_text",
        "deadline_overflows_in_seconds",
        "negative_days",
        "no_throughput",
        "overflowing_throughput",
        "negative_gpu_count",
        "no_option",
        "unknown_schema_version",
    ],
)
def test_a_plan_file_the_report_cannot_draw_is_one_line_naming_the_key(tmp_path, written, change, message) -> None:
    path = _plan(tmp_path, written, change)
    with pytest.raises(ConfigError) as refused:
        load_plan(path)
    assert str(refused.value) == f"{path}: {message}"


def test_a_plan_as_written_reads_back_into_the_same_types(tmp_path, written) -> None:
    back = load_plan(_plan(tmp_path, written, lambda p: None))
    assert back.to_json() == written
    assert back.options[0].chosen is not None and back.options[0].chosen.best == written["options"][0]["best"]
    # a file written before schema_version existed reads as version 1
    assert load_plan(_plan(tmp_path, written, lambda p: p.pop("schema_version"))) == back


def _bench(tmp_path: Path, **level) -> str:
    base = {"concurrency": 64, "requests": 256, "errors": 0, "duration_s": 60.0, "output_tok_s": 12_000.0}
    (tmp_path / "b.json").write_text(json.dumps({"model": "m", "num_gpus": None, "levels": [{**base, **level}]}))
    return str(tmp_path / "b.json")


def test_bench_from_json_prints_a_dash_for_figures_a_saved_file_leaves_out(tmp_path) -> None:
    out = io.StringIO()
    show_bench(Console(file=out, width=200), read_bench_json(_bench(tmp_path)).result, None)
    row = next(line for line in out.getvalue().splitlines() if "12,000" in line)
    # conc 64, achieved –, reqs 256, err 0, req/s –, out tok/s 12,000, then 10 columns not in the file
    assert [cell.strip() for cell in row.split("│")[1:-1]] == ["64", "–", "256", "0", "–", "12,000"] + ["–"] * 10


@pytest.mark.parametrize(
    ("level", "message"),
    [
        ({"e2e_s": {"p50": -1.0}}, "levels[0].e2e_s.p50: -1.0 is not allowed (allowed: a number ≥ 0)"),
        (
            {"ttft_s": {"p99": 1e308}},
            f"levels[0].ttft_s.p99: 1e+308 is not allowed (allowed: a number ≤ {sys.float_info.max / 1e3:g})",
        ),
        ({"achieved_concurrency": "x"}, "levels[0].achieved_concurrency: expected a number, got 'x'"),
        # what calibrate --from-bench refuses, report and bench --from-json refuse too
        ({"output_tok_s": -5.0}, "levels[0].output_tok_s: -5.0 is not allowed (allowed: a finite number ≥ 0)"),
        (
            {"server": {"kv_usage_max": "full"}},
            "levels[0].server.kv_usage_max: 'full' is not allowed (allowed: a number)",
        ),
    ],
    ids=["negative_latency", "latency_overflows_in_ms", "achieved_text", "negative_throughput", "server_counter_text"],
)
def test_a_saved_bench_file_the_table_cannot_print_is_one_line(tmp_path, level, message) -> None:
    path = _bench(tmp_path, **level)
    with pytest.raises(ConfigError) as refused:
        read_bench_json(path)
    assert str(refused.value) == f"{path}: {message}"


def test_a_bench_file_or_run_summary_of_an_unknown_schema_version_is_refused_in_one_line(tmp_path) -> None:
    from tokenplan.files.reports import load_bench, load_run_summary

    path = _bench(tmp_path)
    data = json.loads(Path(path).read_text())
    Path(path).write_text(json.dumps({**data, "schema_version": 9}))
    allowed = "9 is not allowed (allowed: 1, the schema this tokenplan reads and writes)"
    for read in (load_bench, read_bench_json):
        with pytest.raises(ConfigError) as refused:
            read(path)
        assert str(refused.value) == f"{path}: schema_version: {allowed}"
    summary = {"model": "m", "units_total": 1, "stored": 1, "errors": 0, "elapsed_s": 1.0, "output_tokens": 5}
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "output_tok_s": 5.0, "schema_version": 9}))
    with pytest.raises(ConfigError) as refused:
        load_run_summary(tmp_path)
    assert str(refused.value) == f"{tmp_path / 'summary.json'}: schema_version: {allowed}"


def test_a_run_summary_still_in_progress_says_so_in_report_and_calibrate(tmp_path) -> None:
    # A run going (or killed) leaves summary.json in its rolling form: report said "model: missing"
    # and calibrate --from-run "positive numbers", read as damage by a break-it pass.
    from tokenplan.errors import RunDirError
    from tokenplan.files.reports import load_run_summary
    from tokenplan.runner.store.summary import read_run_summary

    rolling = {"schema_version": 1, "in_progress": True, "stored": 3, "output_tokens": 24, "elapsed_s": 1.5}
    (tmp_path / "summary.json").write_text(json.dumps(rolling))
    (tmp_path / "manifest.json").write_text(json.dumps({"job": {"model": "m"}}))
    for read in (load_run_summary, read_run_summary):
        with pytest.raises(RunDirError, match="the run is going, or was stopped before it finished"):
            read(tmp_path)
