"""Serving rows whose aiconfigurator export squared ``--tp N --ep N`` (files/aic_layout.py).

Each case quotes a row of data/ground-truth/serving-dev.csv (columns tp, attention_dp_size,
moe_tp_size, moe_ep_size) and its twin where one exists.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tokenplan.files.aic_layout import replica_layout
from tokenplan.files.measurements import read_measurements

SERVING = Path(__file__).resolve().parents[3] / "data" / "ground-truth" / "serving-dev.csv"


def test_an_id_that_names_the_launch_decides():
    # 2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c128_tp4_ep4_1035: tp 16, adp 1,
    # moe_tp 4, moe_ep 4; twin ..._c128_tp4_0_ep4_0_… reads tp 4, moe_tp 1, moe_ep 4 (TTFT
    # 759.947… ms, TPOT 25.2887… ms in both): 4 GPUs, EP 4, not 16 × 1 = 16.
    r = replica_layout(
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c128_tp4_ep4_1035", "sglang", 16, 1, 4, 4
    )
    assert (r.gpus, r.ep, r.attention_dp) == (4, 4, False)
    assert r.note is not None and "read as 4 GPUs, not 16" in r.note and "id names the launch tp 4, ep 4" in r.note


def test_attention_dp_rows_keep_attention_dp():
    # ..._trtllm_fp4_agg_1024x1024_c64_tp8_ep8_937: tp 1, adp 64, moe 8 × 8 → 8 GPUs with attention
    # DP, EP 8 (1 × 64 = 8 × 8 = 64 is the squared form of N = 8).
    r = replica_layout("x_trtllm_fp4_agg_1024x1024_c64_tp8_ep8_937", "trtllm", 1, 64, 8, 8)
    assert (r.gpus, r.ep, r.attention_dp) == (8, 8, True)


def test_vllm_squares_tp_times_dp_into_the_expert_degree():
    # ..._vllm_fp8_agg_1024x1024_c64_tp4_ep4_1392: tp 4, adp 4, moe_tp 1, moe_ep 16 (= 4 × 4):
    # vLLM's launch -tp 4 with expert parallel on 4 GPUs; no data parallelism.
    r = replica_layout("x_vllm_fp8_agg_1024x1024_c64_tp4_ep4_1392", "vllm", 4, 4, 1, 16)
    assert (r.gpus, r.ep, r.attention_dp) == (4, 4, False)


def test_without_an_id_only_n_of_four_or_more_is_reread():
    # cfg201 rows: tp 64, moe 8 × 8, no launch in the id → N = 8 ≥ 4: 8 GPUs.
    r = replica_layout("dsr1_b200_sglang_fp4_agg_1024x1024_c16_cfg201", "sglang", 64, 1, 8, 8)
    assert (r.gpus, r.ep) == (8, 8) and r.note is not None and "no id in the file names a 64-GPU launch" in r.note
    # cfg736 rows: tp 4, moe 2 × 2: --tp 4 --ep 2 exports the same numbers → read as written.
    r = replica_layout("qwen3_5_b300_sglang_fp4_agg_1024x1024_c16_cfg736", "sglang", 4, 1, 2, 2)
    assert (r.gpus, r.ep, r.attention_dp, r.note) == (4, 2, False, None)


def test_regular_rows_and_contradicting_ids_are_read_as_written():
    # ..._tp4_0_ep4_0_351: tp 4, moe_tp 1, moe_ep 4 (4 × 1 = 1 × 4): not the squared form.
    assert replica_layout("x_c128_tp4_0_ep4_0_351", "sglang", 4, 1, 1, 4) == (4, 4, False, None)
    # a genuine TP8 with MoE TP 2 × EP 4 (…_tp8_epnone_5): 2 ≠ 4, not squared.
    assert replica_layout("x_agg_4000x1000_c48_tp8_epnone_5", "trtllm", 8, 1, 2, 4) == (8, 4, False, None)
    # an id naming another launch than the squared N leaves the columns as written
    assert replica_layout("x_c16_tp16_ep4_7", "sglang", 16, 1, 4, 4) == (16, 4, False, None)


def test_the_copied_file_reads_every_squared_row_as_its_launch():
    # serving-dev.csv: 218 rows have tp × adp > 8 or a MoE degree > 8 as written (counted with the
    # csv module below); after the rule, the only replicas over 8 GPUs are GB200 NVL72 rows whose
    # ids name the wide launch themselves (…_tp72_ep1_45, …_tp36_ep1_34: moe_ep 1, not squared).
    rows = {r["id"]: r for r in csv.DictReader(SERVING.open())}
    read = read_measurements(str(SERVING))
    wide = [m for m in read.rows if m.num_gpus > 8]
    assert wide and all(m.gpu == "gb200" and m.ep == 1 for m in wide)
    assert all(f"_tp{m.num_gpus}_ep1_" in m.row_id for m in wide)
    reread = [m for m in read.rows if m.layout_note is not None and "launch_layout" not in m.layout_note]
    # every row whose own id names _tpN_epN_ while its columns give tp × attention_dp_size = N² is
    # among them (counted from the CSV text, not from the reader)
    named = {
        i
        for i, r in rows.items()
        if (m := re.search(r"_tp(\d+)_ep(\d+)_\d+$", i)) is not None
        and m[1] == m[2]
        and int(r["tp"]) * int(r["attention_dp_size"] or 1) == int(m[1]) ** 2
        and int(m[1]) > 1
    }
    assert named and named <= {m.row_id for m in reread}
    # every re-read row had the squared columns as written
    for m in reread:
        row = rows[m.row_id]
        tp, adp = int(row["tp"]), int(row["attention_dp_size"] or 1)
        assert tp * adp == m.num_gpus**2


def test_a_launch_layout_cell_states_the_launch_and_bad_ones_name_the_column():
    from tokenplan.files.aic_layout import launch_column
    from tokenplan.files.measurement_fields import RowError

    # tp=8 ep=8 attention_dp=true: 8 GPUs, EP 8, attention data-parallel across them
    got = launch_column("tp=8 ep=8 attention_dp=true", "tp 8, attention_dp_size 1, moe_tp_size 8, moe_ep_size 1")
    assert got is not None and (got.gpus, got.ep, got.attention_dp) == (8, 8, True)
    assert got.note == (
        "read as its launch_layout column (tp=8 ep=8 attention_dp=true), "
        "not the layout columns (tp 8, attention_dp_size 1, moe_tp_size 8, moe_ep_size 1)"
    )
    assert launch_column("", "x") is None
    for bad, why in (
        ("tp=8 pp=2", "is not 'tp=N ep=M attention_dp=true|false'"),
        ("ep=8", "names no tp"),
        ("tp=8 ep=3", "ep dividing tp"),
        ("tp=8 attention_dp=yes", "attention_dp is true or false"),
        ("tp=eight", "whole numbers"),
    ):
        with pytest.raises(RowError, match="column launch_layout value") as e:
            launch_column(bad, "x")
        assert why in str(e.value)


def test_the_november_tensorrt_llm_rows_read_as_their_scripts_launched_them():
    # Nightly of 2025-11-02 (dsr1-tmpl.yml @ e06929c7), benchmarks/dsr1_fp8_h200_trt_slurm.sh:
    # 'EP_SIZE="$TP"', and for ISL 1024 / OSL 1024 'if [[ $CONC -gt 64 ]]; then DP_ATTENTION=true';
    # the row's columns say tp 8, moe_tp 8, moe_ep 1, attention_dp_size 1.
    rows = {m.row_id: m for m in read_measurements(str(SERVING)).rows}
    raw = {r["id"]: r for r in csv.DictReader(SERVING.open())}
    h200 = [
        m
        for m in rows.values()
        if m.engine == "trtllm"
        and m.gpu == "h200"
        and m.model.startswith("deepseek")
        and "measured=2025-11-02" in raw[m.row_id]["source"]
        and (raw[m.row_id]["isl"], raw[m.row_id]["osl"]) == ("1024", "1024")
    ]
    assert h200
    for m in h200:
        assert (m.num_gpus, m.ep, m.attention_dp) == (8, 8, (m.concurrency or 0) > 64), m.row_id
        assert m.layout_note is not None and "launch_layout" in m.layout_note
