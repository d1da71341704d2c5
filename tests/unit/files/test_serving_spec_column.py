"""The ``spec_decode`` column of serving files (our copy of ``serving-dev.csv``, last column) is read
as ``dev.csv``'s is and reaches the prediction.

The values in the project's copy of ``serving-dev.csv`` were read by hand from SemiAnalysisAI/InferenceX:
each dated SGLang row is a run started by the ``perf-changelog.yaml`` entry of its day (the data
README lists the groups). A row is filled with the ``-mtp`` config's script settings where only an
``-mtp`` config's search space (``.github/configs/nvidia-master.yaml`` at that commit) holds its
point (ISL/OSL, launch TP/EP, concurrency), ``none`` where only non-MTP configs hold it, and left
blank where both ran that point that day. Each test quotes the lines it rests on.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tests.support.gap_twins import serving_rows, twins

from tokenplan.api.resolve import measurement_request, resolve, resolve_case
from tokenplan.calibration.validate import Case
from tokenplan.files.measurements import read_measurements

SERVING = Path(__file__).parents[3] / "data" / "ground-truth" / "serving-dev.csv"


def _cells() -> dict[str, str]:
    with open(SERVING, newline="") as fh:
        return {r["id"]: r["spec_decode"] for r in csv.DictReader(fh)}


def _rows() -> dict:
    return {m.row_id: m for m in read_measurements(str(SERVING)).rows}


def test_rows_only_an_mtp_config_could_have_run_carry_its_script_settings():
    cells, rows = _cells(), _rows()
    # 2026-03-20: the only Qwen3.5 B200 entry that day is 35d4bb36 "Add Qwen3.5 FP8 B200 SGLang MTP
    # config (#898)", config-keys qwen3.5-fp8-b200-sglang-mtp: "{ tp: 4, ep: 1, conc-start: 4,
    # conc-end: 256, spec-decoding: mtp }"; benchmarks/single_node/qwen3.5_fp8_b200_mtp.sh:
    # "SPECULATIVE_NUM_STEPS=3", "SPECULATIVE_DRAFT_TOKENS=4", "SPECULATIVE_EAGLE_TOPK=1",
    # "--speculative-algorithm EAGLE"
    qwen = "2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c256_tp4_ep1_1957"
    assert cells[qwen] == "mtp (eagle steps=3 draft_tokens=4 topk=1)"
    assert rows[qwen].spec == "mtp:3"  # 3 draft steps
    # 2026-03-25, 12ba0ae0 (#943) ran dsr1-fp8-b200-sglang, 1k1k "{ tp: 8, ep: 1, conc-start: 4,
    # conc-end: 64 }", and dsr1-fp8-b200-sglang-mtp, "{ tp: 8, ep: 1, conc-start: 4, conc-end: 512,
    # spec-decoding: mtp }": TP 8 at concurrency 128 > 64 is the -mtp run;
    # benchmarks/single_node/dsr1_fp8_b200_mtp.sh: "SPECULATIVE_NUM_STEPS=2",
    # "SPECULATIVE_DRAFT_TOKENS=3", "SPECULATIVE_EAGLE_TOPK=1"
    dsr1 = "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c128_tp8_0_ep1_0_300"
    assert cells[dsr1] == "mtp (eagle steps=2 draft_tokens=3 topk=1)"
    assert (rows[dsr1].num_gpus, rows[dsr1].concurrency, rows[dsr1].spec) == (8, 128, "mtp:2")
    # 8k1k: the non-MTP config's TP 8 entry is "{ tp: 8, ep: 1, conc-start: 4, conc-end: 4 }", so
    # TP 8 at concurrency 8 is the -mtp run
    assert rows["2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_8192x1024_c8_tp8_ep1_133"].spec == "mtp:2"


def test_mtp_rows_are_predicted_with_speculative_decoding():
    rows = _rows()
    qwen = rows["2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c256_tp4_ep1_1957"]
    assert measurement_request(qwen).spec == "mtp:3"
    spec = resolve(measurement_request(qwen)).config.spec
    assert (spec.method, spec.draft_tokens) == ("mtp", 3)
    # every MTP row of the file is accepted (both models have MTP layers): none is skipped
    mtp = [m for m in rows.values() if m.spec != "none" and m.engine == "sglang"]
    # the Qwen3.5 FP8 B200 2026-03-20 run and the DeepSeek-R1 FP8 B200 -mtp points, and the
    # gap-analysis rows that copy one of the former (tests/support/gap_twins.py)
    copies = twins(serving_rows())
    assert len([m for m in mtp if m.row_id not in copies]) == 35 + 18
    assert all(m.model == "qwen3.5-397b-a17b" for m in mtp if m.row_id in copies)
    assert all(isinstance(resolve_case(m), Case) for m in mtp)


def test_rows_no_mtp_config_ran_are_none():
    cells = _cells()
    # TP 4 is only in the non-MTP config ("{ tp: 4, ep: 1, conc-start: 4, conc-end: 32 }", 8k1k);
    # dsr1_fp8_b200_mtp.sh: "# MTP only supports TP=8 for now"
    assert cells["2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_8192x1024_c16_tp4_0_ep1_0_297"] == "none"
    # 12ba0ae0's entry names dsr1-fp4-b200-sglang and no FP4 -mtp key
    assert cells["dsr1_b200_sglang_fp4_agg_1024x1024_c128_cfg201"] == "none"
    # 2025-11-02 (workflow job bmk-b200-fp4, dsr1-tmpl.yml @ e06929c7): no file under benchmarks/ or
    # runners/launch_b200* mentions speculative/MTP/EAGLE then (the first *mtp* file on main is
    # bf345672, 2026-01-14); that workflow's only MTP jobs are GB200 multi-node ("mtp-mode: 'on'")
    assert cells["dsr1_b200_sglang_fp4_agg_8192x1024_c32_cfg99"] == "none"
    # dsr1-fp8-b300-sglang @ 5b302f14, 8k1k "{ tp: 4, ep: 1, conc-start: 4, conc-end: 32 }"; the
    # same day's dsr1-fp8-b300-sglang-mtp (f8543f9d) has TP 8 only
    assert cells["dsr1_b300_sglang_fp8_agg_8192x1024_c16_cfg720"] == "none"


def test_points_both_configs_ran_that_day_stay_blank():
    cells, rows = _cells(), _rows()
    # 1k1k TP 8 concurrency 16: inside both dsr1-fp8-b200-sglang (4-64) and -mtp (4-512) @ 12ba0ae0
    assert cells["dsr1_b200_sglang_fp8_agg_1024x1024_c16_cfg87"] == ""
    # qwen3.5-fp8-b300-sglang @ c0f62a2e and qwen3.5-fp8-b300-sglang-mtp @ 28752f61, both
    # 2026-04-17 UTC, both "{ tp: 4, ep: 1, conc-start: 4, conc-end: 256 }"
    assert cells["qwen3_5_b300_sglang_fp8_agg_1024x1024_c256_cfg716"] == ""
    # blank reads as no speculation, as before the column
    assert rows["qwen3_5_b300_sglang_fp8_agg_1024x1024_c256_cfg716"].spec == "none"


def test_a_serving_file_without_the_column_reads_as_before(tmp_path):
    header = "id,engine,model,gpu,precision,isl,osl,concurrency,tp,pp,ttft_ms,tpot_ms"
    row = "1,sglang,deepseek-r1,b200,fp8,1024,1024,128,8,1,1400,28"
    without = tmp_path / "without.csv"
    without.write_text(f"{header}\n{row}\n")
    with_column = tmp_path / "with.csv"
    with_column.write_text(f"{header},spec_decode\n{row},mtp (eagle steps=2 draft_tokens=3 topk=1)\n{row},none\n")
    [plain] = read_measurements(str(without)).rows
    stated, none = read_measurements(str(with_column)).rows
    assert (plain.spec, stated.spec, none.spec) == ("none", "mtp:2", "none")
