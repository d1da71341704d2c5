"""The ``num_requests`` and ``length_distribution`` columns of our copy of ``serving-dev.csv``: the
InferenceX runs among its rows sent ``10 × concurrency`` prompts whose lengths were drawn
uniformly from [0.8 L, L] around the nominal ``isl``/``osl`` L the export keeps. Each fact
quotes its source (SemiAnalysisAI/InferenceX at the commits the data README names).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from tests.support.gap_twins import twins

from tokenplan.files.measurement_fields import nominal_mean
from tokenplan.files.measurements import read_measurements

SERVING = Path(__file__).parents[3] / "data" / "ground-truth" / "serving-dev.csv"
# InferenceX's three nominal shapes (1k1k, 8k1k, 1k8k: `isl`/`osl` of full-sweep-*-scheduler.yml)
SHAPES = {("1024", "1024"), ("8192", "1024"), ("1024", "8192")}


def _inferencex_run(row: dict) -> bool:
    """A row the aiconfigurator export took from InferenceX's results (its DB dump or the dated
    exports 2026-03-25.csv / 2026-04-06.csv), single node, at InferenceX's shapes."""
    source = row["source"]
    exported = "config_id=" in source or re.search(r"source_file=2026-0[34]-\d\d\.csv", source)
    return bool(exported) and (row["isl"], row["osl"]) in SHAPES and row["gpu"] != "gb200"


def test_the_columns_hold_the_benchmark_invocation_of_every_inferencex_run():
    # benchmark scripts (e.g. benchmarks/dsr1_fp8_h200_slurm.sh @ 9596d23d, 2025-10-29; and every
    # script of 2026-04-08 @ 48d35c48): "--num-prompts $(( $CONC * 10 )) --max-concurrency $CONC"
    # "--request-rate inf"; .github/workflows/benchmark-tmpl.yml: "random-range-ratio: default: '0.8'"
    # (167b7244, 2025-11-10) and "RANDOM_RANGE_RATIO: 0.8" (9dc87a68 on); full-sweep-tmpl.yml passes
    # "random-range-ratio: 0.8" (9596d23d).
    with SERVING.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    runs = [r for r in rows if _inferencex_run(r)]
    copies = twins(rows)
    assert runs and len(runs) < len(rows)
    for r in rows:
        if _inferencex_run(r):
            assert r["length_distribution"] == "uniform:0.8"
            assert float(r["num_requests"]) == 10 * float(r["concurrency"])
        elif r["id"] not in copies:  # aiconfigurator's gap-analysis rows (but the 58 copies of an
            # InferenceX run: tests/support/gap_twins.py) and the GB200 multi-node runs: not stated
            assert r["length_distribution"] == r["num_requests"] == ""


def test_the_reader_takes_the_draws_mean_from_the_nominal_length():
    # kimbochen/bench_serving benchmark_serving.py: np.random.randint(int(L * 0.8), L + 1):
    # L = 1,024 → (819 + 1,024) / 2 = 921.5; L = 8,192 → (6,553 + 8,192) / 2 = 7,372.5.
    assert nominal_mean(1024, 0.8) == 921.5
    assert nominal_mean(8192, 0.8) == 7372.5
    assert nominal_mean(1024, None) == 1024
    got = {m.row_id: m for m in read_measurements(str(SERVING)).rows}
    # a 2026-03-25 SGLang DeepSeek-R1 FP8 run at 1k1k, concurrency 128 (the data README's first group)
    row = got["2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c128_tp8_0_ep1_0_300"]
    assert (row.isl_tokens, row.osl_tokens, row.length_low_fraction) == (921.5, 921.5, 0.8)
    assert row.num_requests == 1280  # 10 × 128
    assert row.latency_statistic == "mean"  # the export's ttft_ms/tpot_ms are means (data README)


def test_a_gap_analysis_row_keeps_its_fixed_lengths():
    got = read_measurements(str(SERVING)).rows
    gap = [m for m in got if m.row_id.endswith("_agg_1024x128_c16_tp2_epnone_1")]
    assert gap, "the SGLang H100 Qwen3-32B 1024x128 row"
    assert (gap[0].isl_tokens, gap[0].osl_tokens, gap[0].length_low_fraction, gap[0].num_requests) == (
        1024,
        128,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("column", "cell"),
    [
        ("length_distribution", "uniform:1.5"),
        ("length_distribution", "uniform:"),
        ("num_requests", "12.5"),
        ("num_requests", "-5"),
        # the launch columns (test_serving_launch_columns.py)
        ("memory_fraction", "1.2"),
        ("chunked_prefill_size", "1.5"),
        ("chunked_prefill_size", "-8192"),
        ("disable_radix_cache", "maybe"),
        ("ssm_dtype", "int8"),
    ],
)
def test_a_malformed_run_column_names_the_column(tmp_path, column, cell):
    with SERVING.open(newline="") as fh:
        header, first = fh.readline(), fh.readline()
    fields = next(csv.reader([first]))
    fields[next(csv.reader([header])).index(column)] = cell
    bad = tmp_path / "serving.csv"
    with bad.open("w", newline="") as fh:
        fh.write(header)
        csv.writer(fh, lineterminator="\n").writerow(fields)
    result = read_measurements(str(bad))
    assert not result.rows and column in result.skipped[0].reason and cell in result.skipped[0].reason
