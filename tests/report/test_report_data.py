"""The numbers behind the charts: hand-checked helpers, agreement with ``plan()``'s table, the
terminal chart's grid, the PNG files, and one-line errors for bad report inputs."""

from __future__ import annotations

import json
import subprocess

import pytest

from tokenplan.api.plan import PlanRequest, plan_report_data
from tokenplan.api.report import report_inputs, report_warnings
from tokenplan.errors import ConfigError, InputError, RunDirError
from tokenplan.files.reports import load_bench, load_plan, load_run_summary
from tokenplan.planning.curves import SpeedupPoint, breakeven, concurrency_grid, pareto_front
from tokenplan.planning.results import PlanReportData
from tokenplan.report.text_charts import line_chart
from tokenplan.units import S_PER_DAY


@pytest.fixture(scope="module")
def report_data() -> PlanReportData:
    """The default plan (Qwen3.6-27B, 914,000 samples, 4× RTX PRO 6000 vs 8× B200) with every chart."""
    return plan_report_data(PlanRequest())


@pytest.fixture(scope="module")
def data(report_data: PlanReportData) -> dict:
    """Its JSON form, as ``plan --json`` writes the plan part."""
    return report_data.to_json()


def test_concurrency_grid_is_geometric_from_one_to_the_limit():
    # 5 points from 1 to 16: ratio 16^(1/4) = 2 → 1, 2, 4, 8, 16
    assert concurrency_grid(16, points=5) == [1, 2, 4, 8, 16]
    # the limit is floored and always included: 10.7 → 1, 2, 3, 6, 10 (ratio 10^(1/4) ≈ 1.778: 1.78, 3.16, 5.62)
    assert concurrency_grid(10.7, points=5) == [1, 2, 3, 6, 10]
    assert concurrency_grid(0.4) == [1]


def test_pareto_front_keeps_points_nothing_beats_on_time_and_cost():
    # (days, $): A (1, 500) fastest; B (2, 300) cheaper; C (2, 400) beaten by B; D (3, 300) beaten by B;
    # E (4, 100) cheapest; F has no price.
    pts = [(1, 500), (2, 300), (2, 400), (3, 300), (4, 100), (0.5, None)]
    assert pareto_front(pts) == {0, 1, 4}


def test_breakeven_interpolates_in_log_concurrency():
    def p(c: float, s: float) -> SpeedupPoint:
        return SpeedupPoint(c, c, s, 1.0, s)

    # speed-up 1.5 at 10 and 0.5 at 1,000: crosses 1 halfway in log10 → 10^2 = 100
    assert breakeven((p(1, 2.0), p(10, 1.5), p(1000, 0.5))) == pytest.approx(100.0)
    assert breakeven((p(1, 2.0), p(10, 1.2))) is None
    assert breakeven((p(1, 0.9), p(10, 0.8))) == 1


def test_chosen_curves_and_costs_agree_with_the_plan_table(data):
    by_option = {o["option"]: o for o in data["plan"]["options"]}
    chosen = [c for c in data["throughput"] if c["chosen"]]
    assert sorted(c["option"] for c in chosen) == sorted(by_option)
    for c in chosen:
        o = by_option[c["option"]]
        assert c["configuration"] == o["best"]
        # the sweep ends at the memory limit, where the plan's own evaluation runs
        assert max(p["output_tok_s_total"] for p in c["points"]) == pytest.approx(o["output_tok_s_total"], rel=1e-6)
        concurrencies = [p["concurrency"] for p in c["points"]]
        assert concurrencies == sorted(concurrencies) and concurrencies[0] >= 1
        # and no further than two doublings past what the replicas run at once (the plateau), or memory
        assert concurrencies[-1] == min(4 * c["running_max_concurrency"], c["memory_max_concurrency"])
    for p in data["cost_time"]:
        if p["chosen"]:
            o = by_option[p["option"]]
            assert p["wall_s"] / S_PER_DAY == pytest.approx(o["wall_days"], rel=1e-9)
            assert p["usd"] == pytest.approx(o["usd"], rel=1e-9)
    assert len(data["cost_time"]) == sum(
        o["configurations"] - sum(o["rejected"].values()) for o in data["plan"]["options"]
    )


def test_memory_bars_fill_the_gpu_and_state_is_the_running_batch_share(data):
    # Qwen3.6-27B state per sequence at TP1: 48 Gated DeltaNet layers × (48 value heads × 128 × 128 × 4 B
    # fp32 recurrent state + conv state 10,240 channels × 3 (kernel 4 − 1) × 2 B) = 48 × 3,207,168
    # = 153,944,064 bytes; the cache pool holds it, so state = batch × 153,944,064.
    for m in data["memory"]:
        total = m["weight_bytes"] + m["kv_bytes"] + m["state_bytes"] + m["reserve_bytes"]
        assert total == pytest.approx(m["gpu_bytes"], rel=1e-9)
        assert m["state_bytes"] == pytest.approx(m["batch_per_replica"] * 153_944_064, rel=1e-9)


def test_speedup_is_spec_over_plain_at_the_same_concurrency(data):
    assert data["speedup"], "the default plan searches MTP on Qwen3.6-27B"
    for c in data["speedup"]:
        for p in c["points"]:
            assert p["speedup"] == pytest.approx(p["output_tok_s_spec"] / p["output_tok_s_plain"])


def test_line_chart_draws_a_hand_placed_grid():
    # x 1 → 100 on 3 log columns (0, 1, 2), y 0 → 10 on 3 rows: y 0, 5, 10 at columns 0, 1, 2
    chart = line_chart([("s", [(1, 0), (100, 10)])], width=3, height=3)
    assert chart.splitlines()[:3] == ["10 ┤  ●", " 5 ┤ ● ", " 0 ┤●  "]
    assert chart.splitlines()[-1] == "● s"


def test_plan_pngs_are_written(report_data, tmp_path):
    from tokenplan.report.png import write_plan_pngs

    paths = write_plan_pngs(report_data, tmp_path / "png")
    assert [p.name for p in paths] == ["throughput.png", "roofline.png", "cost_time.png", "memory.png", "speedup.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_report_inputs_load_runs_bench_and_plan(run_dir, bench_file, tmp_path, data):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(data["plan"]))
    inputs = report_inputs([str(run_dir)], str(plan_file), str(bench_file)).to_json()
    assert inputs["runs"][0]["run_dir"] == str(run_dir) and inputs["runs"][0]["output_tok_s"] == 347.2
    assert inputs["bench"]["num_gpus"] == 8 and inputs["plan"]["model"] == "qwen3.6-27b"
    # all three of qwen3.6-27b: nothing to warn of
    assert report_warnings(report_inputs([str(run_dir)], str(plan_file), str(bench_file))) == []


def test_a_plan_for_another_model_than_the_measurements_is_warned_of(run_dir, bench_file, tmp_path, data):
    # new-user finding: a qwen3.6-27b plan beside a tiny-qwen3 run and bench gave no word
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({**data["plan"], "model": "llama-3.1-8b"}))
    lines = report_warnings(report_inputs([str(run_dir)], str(plan_file), str(bench_file)))
    assert lines == [
        f"the plan was made for model 'llama-3.1-8b', but run {run_dir} measured 'qwen3.6-27b': its planned "
        "figures do not describe that measurement",
        "the plan was made for model 'llama-3.1-8b', but the bench measured 'qwen3.6-27b': its planned figures do "
        "not describe that measurement",
    ]


def test_bad_report_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(InputError):
        report_inputs([])
    with pytest.raises(RunDirError, match="no such run directory"):
        load_run_summary(tmp_path / "missing")
    with pytest.raises(RunDirError, match="no summary.json"):
        load_run_summary(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": "m",\n "levels": [}')
    with pytest.raises(ConfigError, match="line 2: not valid JSON"):
        load_bench(bad)
    bad.write_text(json.dumps({"model": "m", "num_gpus": 8, "levels": [{"concurrency": 1}]}))
    with pytest.raises(ConfigError, match=r"levels\[0\]\.requests: missing"):
        load_bench(bad)
    # a bench file given as --plan: said as no plan (it said "engine: missing", a new-user pass)
    with pytest.raises(ConfigError, match=r"not the output of `tokenplan plan --json` \(it has no 'job' and no"):
        load_plan(bad)
    bad.write_text(json.dumps({"model": "m", "num_gpus": "eight", "levels": []}))
    with pytest.raises(ConfigError, match="num_gpus: expected a number"):
        load_bench(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigError, match=r"top level: \[1, 2\] is not allowed \(allowed: a JSON object"):
        load_plan(bad)


def test_report_command_exits_2_with_one_line(tmp_path, tokenplan_cmd):
    done = subprocess.run(
        [*tokenplan_cmd, "report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope'}: no such run directory"]
    assert not (tmp_path / "r.html").exists()


def test_a_sweep_ends_at_the_engines_running_cap_where_memory_holds_more():
    # Llama-3.1-8B FP8 on one B200 under vLLM, 128 + 128 tokens a request: the KV pool holds thousands
    # of sequences (128 KiB of BF16 KV a token × 256 = 32 MiB each, ~150 GB free), while the
    # engine runs at most its max_num_seqs, 1,024 on a GPU of ≥ 70 GiB and not an A100 (vLLM's
    # EngineArgs defaults, catalog/engines.yaml V2). A new-user pass saw a 1-layer model's sweep
    # run to 11.7 million in flight.
    req = PlanRequest(
        model="llama-3.1-8b",
        gpus=("1xb200",),
        engine="vllm",
        weight_dtypes=("fp8",),
        specs=("none",),
        samples=100_000,
        isl_mean=128,
        isl_sigma=0,
        osl_mean=128,
        osl_sigma=0,
    )
    curves = plan_report_data(req, ("throughput",)).to_json()["throughput"]
    chosen = next(c for c in curves if c["chosen"])
    assert chosen["memory_max_concurrency"] > 4 * 1024 and chosen["running_max_concurrency"] == 1024
    # two doublings past the cap, where the rate is flat: 4 × 1,024 = 4,096, not the memory limit
    assert chosen["points"][-1]["concurrency"] == 4096
    assert chosen["points"][-1]["output_tok_s_total"] == pytest.approx(
        next(p for p in chosen["points"] if p["concurrency"] >= 1024)["output_tok_s_total"], rel=1e-9
    )
