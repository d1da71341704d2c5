"""Measurement files describe the job as it was run (issue 28, points 1 and 6): columns, not notes.

Values checked against the project's copy of ``dev.csv`` come from the rows' own sources:
the SGLang Qwen3.6 cookbook (sgl-project/sglang ``docs_new/src/snippets/configs/qwen/
qwen3.6-benchmarks.jsx`` @4b7077be: "h200 / 27b / bf16 / high-throughput", max_concurrency 1024:
``ttft_ms: 1413311, tpot_ms: 39.28``; ``qwen3.6.jsx`` at the same commit: ``numPromptsByConc:
{ 1: 8, 16: 64, 1024: 2048, 4096: 8192 }`` and the cell's ``--mem-fraction-static 0.8``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.api.resolve import measurement_request
from tokenplan.files.measurements import THROUGHPUT, read_measurements

DEV = Path(__file__).parents[3] / "data" / "ground-truth" / "dev.csv"

HEADER = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,concurrency,"
    "num_requests,spec_decode,output_tok_s_per_gpu,derived,trust,source_url,ttft_ms_median,tpot_ms_median,"
    "length_distribution,max_running,memory_fraction,engine_version,gpu_variant_stated,notes\n"
)
ROW = "{id},sglang,qwen3.6-27b,h200,1,1,1,1,1,false,bf16,bf16,8192,1024,1024,2048,none,702.4,,high,x,{rest}\n"


def _read(tmp_path, *rests: str):
    path = tmp_path / "m.csv"
    path.write_text(HEADER + "".join(ROW.format(id=i, rest=r) for i, r in enumerate(rests)))
    return read_measurements(str(path))


def test_the_cookbook_row_carries_its_sources_ttft_tpot_and_launch():
    data = read_measurements(str(DEV))
    assert data.kind == THROUGHPUT  # latency columns beside output_tok_s_per_gpu keep a throughput file
    row = next(m for m in data.rows if m.row_id == "106")
    # 1,413,311 ms and 39.28 ms (the cookbook's figures, medians) in seconds
    assert (row.ttft_s, row.tpot_s) == pytest.approx((1413.311, 0.03928))
    assert (row.num_requests, row.memory_fraction, row.engine_version) == (2048, 0.8, "sglang 0.5.16")
    assert (row.length_low_fraction, row.length_set, row.gpu_variant_stated) == (None, None, True)
    # Little's law on the run: 702.4 output tok/s × 39.28 ms = 27.6 requests past their first token
    assert row.output_tok_s_per_gpu * row.tpot_s == pytest.approx(27.59, abs=0.01)
    # the launch's fraction reaches the prediction as --memory-fraction
    assert measurement_request(row).memory_fraction == 0.8


def test_every_cookbook_row_states_ttft_and_tpot_and_the_known_tpots_hold():
    rows = {m.row_id: m for m in read_measurements(str(DEV)).rows}
    cookbook = [m for m in rows.values() if m.model.startswith("qwen3.6")]
    assert len(cookbook) == 12 and all(m.ttft_s and m.tpot_s for m in cookbook)
    # TPOT of the concurrency-1,024 cells, ms (the brief's list, checked against the source)
    known = {"106": 39.28, "109": 34.71, "115": 29.35, "120": 27.90, "125": 26.07}
    assert {k: round(rows[k].tpot_s * 1e3, 2) for k in known} == known


def test_job_columns_read_and_bad_values_skip_with_one_line(tmp_path):
    data = _read(
        tmp_path,
        "734,5.61,fixed,,0.8,sglang 0.5.16,true,",
        "734,5.61,uniform:0.8,48,,,false,",
        "734,5.61,,,1.5,,,",
        "734,5.61,,,,,maybe,",
    )
    fixed, uniform = data.rows
    assert (fixed.memory_fraction, fixed.max_running, fixed.gpu_variant_stated) == (0.8, None, True)
    assert (uniform.length_low_fraction, uniform.max_running, uniform.gpu_variant_stated) == (0.8, 48, False)
    assert uniform.engine_version is None and uniform.memory_fraction is None
    assert [s.reason for s in data.skipped] == [
        "malformed: column memory_fraction value '1.5' is not in (0, 1] (or blank)",
        "malformed: column gpu_variant_stated value 'maybe' is not one of true, false (or blank)",
    ]


def test_a_file_without_the_job_columns_reads_as_before(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text(
        "id,engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu\n"
        "1,sglang,qwen3.6-27b,h200,1,1,8192,1024,16,100\n"
    )
    (row,) = read_measurements(str(path)).rows
    assert (row.memory_fraction, row.max_running, row.engine_version, row.ttft_s) == (None, None, None, None)
    assert row.gpu_variant_stated is True  # a file that does not say names the variant in its gpu key


def test_a_stated_dp_must_be_num_gpus_over_tp_times_pp(tmp_path):
    # dp is derived from num_gpus / (tp × pp); a stated one that is not a whole number ≥ 1, or says
    # otherwise, is a typo: the row is refused with the column named, not read as something else
    path = tmp_path / "dp.csv"
    head = "id,engine,model,gpu,num_gpus,tp,pp,dp,isl,osl,concurrency,output_tok_s_per_gpu\n"
    body = "".join(
        f"{i},sglang,llama-3.1-8b,h100-sxm,8,2,1,{dp},1024,1024,64,1000\n"
        for i, dp in enumerate(("-1", "abc", "8", "4", ""))
    )
    path.write_text(head + body)
    data = read_measurements(str(path))
    assert [m.row_id for m in data.rows] == ["3", "4"]  # 8 / (2 × 1) = 4, and blank
    reasons = [s.reason for s in data.skipped]
    assert any("column dp value '8' is not num_gpus / (tp × pp) = 8 / 2" in r for r in reasons)
    assert len(reasons) == 3
