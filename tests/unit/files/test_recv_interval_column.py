"""The ``scheduler_recv_interval`` column (SGLang ``--scheduler-recv-interval`` as the run's launch
script set it) is read, checked and carried to the prediction.

Values checked against the project's copy of ``inferencex-dev.csv`` come from the rows' launch
scripts: SemiAnalysisAI/InferenceX ``benchmarks/dsr1_fp8_b200_mtp.sh`` @ 8a02464b85 ("if [[ $CONC
-ge 16 ]]; then SCHEDULER_RECV_INTERVAL=30 else SCHEDULER_RECV_INTERVAL=10", passed as
``--scheduler-recv-interval $SCHEDULER_RECV_INTERVAL``) for rows 2001 (concurrency 4) and 2002
(concurrency 64); the H200 script at the same commits, ``benchmarks/dsr1_fp8_h200.sh``, does not
pass the flag.

Values checked against the project's copy of ``serving-dev.csv`` (InferenceX DB records that
aiconfigurator exported; the data README lists every group) were read by hand from the launch
script InferenceX ran for the row's configuration at the commit of its ``measured=`` run; each
test below quotes the script line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.gap_twins import serving_rows, twins

from tokenplan.api.resolve import PredictRequest, measurement_request, resolve
from tokenplan.errors import InputError
from tokenplan.files.measurements import read_measurements

IX = Path(__file__).parents[3] / "data" / "ground-truth" / "inferencex-dev.csv"
SERVING = Path(__file__).parents[3] / "data" / "ground-truth" / "serving-dev.csv"

HEADER = "id,engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu,scheduler_recv_interval\n"


def test_the_inferencex_b200_rows_carry_their_scripts_interval():
    rows = {m.row_id: m for m in read_measurements(str(IX)).rows}
    assert (rows["2001"].concurrency, rows["2001"].scheduler_recv_interval) == (4, 10)
    assert (rows["2002"].concurrency, rows["2002"].scheduler_recv_interval) == (64, 30)
    h200 = [m for m in rows.values() if m.engine == "sglang" and m.gpu == "h200"]
    assert h200 and all(m.scheduler_recv_interval is None for m in h200)
    # the launch's interval reaches the prediction, and its engine settings
    assert measurement_request(rows["2002"]).scheduler_recv_interval == 30


def test_the_column_reads_whole_numbers_and_skips_others_with_one_line(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(
        HEADER
        + "1,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,30\n"
        + "2,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,\n"
        + "3,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,2.5\n"
        + "4,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,0\n"
    )
    data = read_measurements(str(path))
    assert [m.scheduler_recv_interval for m in data.rows] == [30, None]
    assert [s.reason for s in data.skipped] == [
        "malformed: column scheduler_recv_interval value '2.5' is not a whole number ≥ 1 (or blank)",
        "malformed: column scheduler_recv_interval value '0' is not a whole number ≥ 1 (or blank)",
    ]


def test_the_interval_is_an_sglang_option_and_reaches_its_settings():
    base = {"model": "deepseek-r1", "gpu": "b200", "num_gpus": 8, "tp": 8, "weight_dtype": "fp8", "concurrency": 64}
    scenario = resolve(PredictRequest(**base, scheduler_recv_interval=30))
    assert scenario.config.scheduler_recv_interval == 30
    with pytest.raises(InputError, match="scheduler_recv_interval.*only with --engine sglang; the engine is vllm"):
        resolve(PredictRequest(**base, engine="vllm", scheduler_recv_interval=30))
    with pytest.raises(InputError, match="scheduler_recv_interval.*a whole number of iterations ≥ 1"):
        resolve(PredictRequest(**base, scheduler_recv_interval=0))


def _serving_rows() -> dict:
    return {m.row_id: m for m in read_measurements(str(SERVING)).rows}


def test_the_serving_inferencex_rows_carry_their_scripts_interval():
    rows = _serving_rows()
    # dsr1-fp8-b200-sglang @ 12ba0ae0 (the run measured 2026-03-25T16:34:14Z, 4 s after that
    # commit), benchmarks/single_node/dsr1_fp8_b200.sh: "if [[ $TP -eq 8 ]]; then if [[ $CONC -ge
    # 16 ]]; then SCHEDULER_RECV_INTERVAL=30 else SCHEDULER_RECV_INTERVAL=10", and in the
    # "elif [[ $TP -eq 4 ]]" branch (8k1k only) "SCHEDULER_RECV_INTERVAL=10" whatever CONC is
    assert rows["dsr1_b200_sglang_fp8_agg_1024x1024_c16_cfg87"].scheduler_recv_interval == 30  # TP 8, 16 ≥ 16
    assert rows["dsr1_b200_sglang_fp8_agg_1024x1024_c8_cfg87"].scheduler_recv_interval == 10  # TP 8, 8 < 16
    tp4 = rows["2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_8192x1024_c16_tp4_0_ep1_0_297"]
    assert (tp4.num_gpus, tp4.concurrency, tp4.scheduler_recv_interval) == (4, 16, 10)  # TP 4 branch
    # dsr1-fp4-b200-sglang @ 12ba0ae0, benchmarks/single_node/dsr1_fp4_b200.sh: "if [[ $CONC -ge
    # 16 ]]; then SCHEDULER_RECV_INTERVAL=30"; the squared export of --tp 4 --ep 4 (tp 16) is 4 GPUs
    squared = rows["2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c128_tp4_ep4_1035"]
    assert (squared.num_gpus, squared.scheduler_recv_interval) == (4, 30)
    # the workflow job bmk-b200-fp4 (.github/workflows/dsr1-tmpl.yml @ e06929c7, 2025-11-02) ran
    # benchmarks/dsr1_fp4_b200_docker.sh: the same "if [[ $CONC -ge 16 ]]" rule; 32 ≥ 16
    assert rows["dsr1_b200_sglang_fp4_agg_8192x1024_c32_cfg99"].scheduler_recv_interval == 30
    # qwen3.5-fp8-b300-sglang @ c0f62a2e, benchmarks/single_node/qwen3.5_fp8_b300.sh:
    # "--scheduler-recv-interval 10 \" at every concurrency, 256 included
    assert rows["qwen3_5_b300_sglang_fp8_agg_1024x1024_c256_cfg716"].scheduler_recv_interval == 10
    # dsr1-fp8-b300-sglang @ 5b302f14, benchmarks/single_node/dsr1_fp8_b300.sh: TP 4 branch, 10
    assert rows["dsr1_b300_sglang_fp8_agg_8192x1024_c16_cfg720"].scheduler_recv_interval == 10
    # the launch's interval reaches the prediction
    assert measurement_request(rows["dsr1_b200_sglang_fp8_agg_1024x1024_c16_cfg87"]).scheduler_recv_interval == 30


def test_serving_rows_whose_script_or_run_does_not_set_it_stay_blank():
    rows = _serving_rows()
    # dsr1-fp8-h200-sglang @ 12ba0ae0: benchmarks/single_node/dsr1_fp8_h200.sh passes no
    # --scheduler-recv-interval (SGLang's default 1)
    assert rows["dsr1_h200_sglang_fp8_agg_1024x1024_c16_cfg81"].scheduler_recv_interval is None
    sglang = [m for m in rows.values() if m.engine == "sglang"]
    # GB200 rows (multi-node Dynamo, recipes outside the repository) and the rows that are not
    # InferenceX runs (the gap-analysis file, a local aiconfigurator checkout) are left blank
    assert [m for m in sglang if m.gpu == "gb200"]
    assert all(m.scheduler_recv_interval is None for m in sglang if m.gpu == "gb200")
    copies = twins(serving_rows())  # the copies of an InferenceX run carry its script's interval
    gap = [m for m in sglang if "gap_analysis" in m.row_id and m.row_id not in copies]
    assert gap and all(m.scheduler_recv_interval is None for m in gap)
    # only SGLang launches carry it
    assert all(m.scheduler_recv_interval is None for m in rows.values() if m.engine != "sglang")


def test_a_serving_file_without_the_column_reads_as_before(tmp_path):
    header = "id,engine,model,gpu,precision,isl,osl,concurrency,tp,pp,ttft_ms,tpot_ms"
    row = "1,sglang,deepseek-r1,b200,fp8,1024,1024,16,8,1,400,13"
    without = tmp_path / "without.csv"
    without.write_text(f"{header}\n{row}\n")
    with_column = tmp_path / "with.csv"
    with_column.write_text(f"{header},scheduler_recv_interval\n{row},30\n")
    [plain] = read_measurements(str(without)).rows
    [stated] = read_measurements(str(with_column)).rows
    assert (plain.scheduler_recv_interval, stated.scheduler_recv_interval) == (None, 30)
