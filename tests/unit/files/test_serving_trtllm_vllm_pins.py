"""``spec_decode`` and ``max_running`` of our copy of ``serving-dev.csv`` for the TensorRT-LLM and vLLM
InferenceX rows pinned to their runs (groups, commits and scripts in the data README). Each expected
value is read by hand from the config's search space and the script's lines, quoted here.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tokenplan.api.resolve import resolve_case
from tokenplan.calibration.validate import Case
from tokenplan.files.measurements import read_measurements

SERVING = Path(__file__).parents[3] / "data" / "ground-truth" / "serving-dev.csv"


def _rows() -> dict:
    return {m.row_id: m for m in read_measurements(str(SERVING)).rows}


def test_trtllm_mtp_runs():
    rows = _rows()
    # measured=2026-02-06T17:21:58Z, 4 s after 0aae52d4c ("[NV] dsr1 fp4 b200 trt agg mtp update", its
    # changelog entry names only dsr1-fp4-b200-trt-mtp); search space 1k1k "{tp: 8, conc-start: 128,
    # conc-end: 128, spec-decoding: mtp}". dsr1_fp4_b200_trt_mtp.sh: "MAX_BATCH_SIZE=$CONC", "MTP=3",
    # "num_nextn_predict_layers: ${MTP}", "--max_batch_size=$MAX_BATCH_SIZE" -> nextn 3, cap 128
    tp8 = rows["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp8_0_ep1_0_982"]
    assert (tp8.spec, tp8.max_running) == ("mtp:3", 128)
    # same run, "{tp: 8, ep: 8, dp-attn: true, conc-start: 32, conc-end: 64}": the script's
    # 'if [[ "$DP_ATTENTION" == "true" ]]; then MAX_BATCH_SIZE=$(( CONC < 4 ? CONC : CONC / 4 )) ... MTP=1'
    # -> nextn 1; the cap is per attention-DP rank, so the per-replica column stays blank
    dp = rows["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp8_0_ep8_0_976"]
    assert (dp.spec, dp.max_running) == ("mtp:1", None)


def test_trtllm_plain_runs_and_an_ambiguous_point():
    rows = _rows()
    # measured=2026-02-03T17:34:19Z, 5 s after 6eecc0e66 (entry: dsr1-fp4-b200-trt only, no -mtp);
    # dsr1_fp4_b200_trt.sh sets only "cuda_graph_config: ... max_batch_size: $CUDA_GRAPH_MAX_BATCH_SIZE"
    # and no --max_batch_size -> none, no cap
    plain = rows["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp8_0_ep8_0_1085"]
    assert (plain.spec, plain.max_running) == ("none", None)
    # measured=2026-02-05T23:18:58Z, after d7dbd045b (gptoss-fp4-b200-trt); gptoss_fp4_b200_trt.sh:
    # "--max_batch_size 512 \"
    oss = rows["2026_03_25_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp2_0_ep1_0_997"]
    assert (oss.spec, oss.max_running) == ("none", 512)
    # measured=2026-01-28T06:18:44Z, the full sweep e28c038f8 that names both dsr1-fp8-h200-trt and
    # dsr1-fp8-h200-trt-mtp; 1k8k tp 8 ep 8 c64 lies in both search spaces -> both cells blank
    both = rows["2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c64_tp8_0_ep8_0_1240"]
    assert (both.spec, both.max_running) == ("none", None)  # blank spec reads as none
    # gptoss_fp4_h200_trt.sh @ e28c038f8: "--max_batch_size $CONC \" (c64)
    h200 = rows["2026_03_25_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x8192_c64_tp1_0_ep1_0_1241"]
    assert (h200.spec, h200.max_running) == ("none", 64)


def test_vllm_caps():
    rows = _rows()
    # gptoss_fp4_b200.sh @ d2c2acb19 (measured=2026-02-25T19:02:12Z): "--max-num-seqs 512 \"
    assert rows["2026_03_25_gpt_oss_120b_b200_sxm_vllm_fp4_agg_1024x1024_c128_tp2_0_ep1_0_627"].max_running == 512
    # gptoss_fp4_h100.sh @ cec542a9a (measured=2026-03-27T08:01:51Z): "--max-num-seqs=$CONC" (c16)
    assert rows["2026_03_25_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c16_tp4_0_ep1_0_200"].max_running == 16
    # minimaxm2.5_fp8_h100.sh @ 1d5cae141: "--max-num-seqs 256 \"
    mm = rows["2026_03_25_minimax_m2_5_h100_sxm_vllm_fp8_agg_1024x1024_c32_tp4_0_ep4_0_245"]
    assert (mm.spec, mm.max_running) == ("none", 256)
    # minimaxm2.5_fp8_h200.sh @ 1d5cae141 passes no --max-num-seqs -> blank (the engine's default)
    assert rows["2026_03_25_minimax_m2_5_h200_sxm_vllm_fp8_agg_1024x1024_c128_tp8_0_ep1_0_239"].max_running is None
    # kimik2.5_fp4_b200.sh @ a58dedd5a: "--max-num-seqs $CONC \" (c32)
    assert rows["2026_03_25_kimi_k2_5_b200_sxm_vllm_fp4_agg_1024x1024_c32_tp4_0_ep4_0_570"].max_running == 32


def test_cells_as_written():
    with SERVING.open(newline="") as fh:
        cells = {r["id"]: (r["spec_decode"], r["max_running"]) for r in csv.DictReader(fh)}
    assert cells["2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c64_tp8_0_ep8_0_1240"] == ("", "")
    assert cells["2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c256_tp8_0_ep8_0_1238"] == (
        "mtp (nextn=1)",
        "",
    )
    assert cells["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp8_0_ep1_0_982"] == (
        "mtp (nextn=3)",
        "128",
    )


def test_trtllm_mtp_rows_are_all_accepted():
    rows = _rows()
    # 114 MTP rows: 13 + 9 + 27 (bf345672) + 1 (e28c038f, DP) + 29 (5d517074) + 35 (0aae52d4)
    mtp = [m for m in rows.values() if m.engine == "trtllm" and m.spec != "none"]
    assert len(mtp) == 13 + 9 + 27 + 1 + 29 + 35
    assert {m.spec for m in mtp} == {"mtp:1", "mtp:3"}
    assert all(isinstance(resolve_case(m), Case) for m in mtp)


def test_later_vllm_runs_and_rows_that_fit_no_entry():
    rows = _rows()
    with SERVING.open(newline="") as fh:
        cells = {r["id"]: (r["spec_decode"], r["max_running"]) for r in csv.DictReader(fh)}
    # measured=2026-04-20, the only entry that day naming it: 6c3acebf (#1047) kimik2.5-fp4-b200-vllm,
    # image vllm/vllm-openai:v0.17.0 as the row; kimik2.5_fp4_b200.sh: "--max-num-seqs $CONC \" (c32)
    kimi = rows["kimik2_5_b200_vllm_fp4_agg_1024x1024_c32_cfg811"]
    assert (kimi.spec, kimi.max_running) == ("none", 32)
    # minimaxm2.5_fp4_b300.sh @ 22d0f12f (2026-04-17) passes no --max-num-seqs: none, blank cap
    assert cells["minimaxm2_5_b300_vllm_fp4_agg_8192x1024_c256_cfg726"][1] == ""
    # 2026-04-03 bddbf403 (#947): tp 2, attention_dp_size 2, moe_ep 4 reads as 4 GPUs with attention
    # DP; minimaxm2.5-fp8-b200-vllm's search space has no dp-attn entry, so the launch is unknown: blank
    assert cells["minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c16_cfg690"] == ("", "")
    # 2026-01-07 645b97aa (#387) gptoss-fp4-b200-trt, benchmarks/gptoss_fp4_b200_trt_slurm.sh:
    # "--max_batch_size 512 \"; attention-DP entry (tp 2, ep 2, dp-attn) -> per-rank cap, blank
    assert cells["2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp1_ep1_1067"] == ("none", "512")
    assert cells["2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp2_ep2_2006"] == ("none", "")


def _cells() -> dict:
    with SERVING.open(newline="") as fh:
        return {r["id"]: (r["spec_decode"], r["max_running"]) for r in csv.DictReader(fh)}


def test_llama_70b_nightly_2025_10_29():
    # The nightly "Full Sweep Scheduler" (cron '0 23 * * *') ran .github/workflows/70b-tmpl.yml at ac1998a5 /
    # 9596d23d (identical for these jobs); llama 70b was removed the next night (0b5620ec, 2582bce4). No 70b
    # script, 70b-tmpl.yml or benchmark-tmpl.yml line names a speculative, EAGLE or draft option -> none.
    cells = _cells()
    # bmk-h100-fp8 "tp-list: '[2, 4, 8]'", 70b_fp8_h100_{slurm,docker}.sh "--max-num-seqs=$CONC  \" (c64)
    assert cells["2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_8192x1024_c64_tp2_ep1_773"] == ("none", "64")
    # 70b_fp8_h200_slurm.sh "--tensor-parallel-size $TP --max-num-seqs $CONC" (c16)
    assert cells["2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_1024x1024_c16_tp1_ep1_912"] == ("none", "16")
    # runner b200: launch_b200-n{b,v}.sh would run 70b_fp4_b200_slurm.sh, which does not exist, so results
    # come from launch_b200-{nvd,tg}.sh -> 70b_fp4_b200_docker.sh "--tensor-parallel-size $TP --max-num-seqs 512"
    assert cells["2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp4_agg_1024x8192_c32_tp2_ep1_474"] == ("none", "512")
    # 70b_fp8_b200_docker.sh "--max-num-seqs=512 \"
    assert cells["2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_1024x8192_c32_tp4_ep1_614"] == ("none", "512")
    # 70b_fp{8,4}_*_trt_slurm.sh: "cuda_graph_config: / enable_padding: true / max_batch_size: 1024" (the
    # CUDA-graph batch) and "trtllm-serve $MODEL --tp_size $TP ... --max_num_tokens 16384" with no
    # --max_batch_size -> no cap stated, blank
    assert cells["2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x1024_c128_tp8_ep1_688"] == ("none", "")
    assert cells["2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp4_agg_8192x1024_c4_tp1_ep1_771"] == ("none", "")
    rows = _rows()
    with SERVING.open(newline="") as fh:
        ids = [r["id"] for r in csv.DictReader(fh) if r["model"] == "llama-3.3-70b" and "=2025-10-29" in r["source"]]
    llama = [rows[i] for i in ids]
    # 55 + 49 (B200 TRT FP4/FP8) + 45 (H200 TRT) + 46 + 35 (B200 vLLM FP4/FP8) + 47 (H200) + 32 (H100)
    assert len(llama) == 55 + 49 + 45 + 46 + 35 + 47 + 32
    assert {m.spec for m in llama} == {"none"}
    assert all(isinstance(resolve_case(m), Case) for m in llama[:20])


def test_nightly_2025_11_02():
    # dsr1-tmpl.yml / gptoss-tmpl.yml @ e06929c7 (ad4f6a4a..e06929c7 touched only README.md): the only
    # MTP jobs are "bmk-gb200-fp4-multinode-mtp-on" (GB200); no B200/H200 script names MTP or EAGLE -> none
    cells = _cells()
    # dsr1_fp4_b200_trt_slurm.sh: "cuda_graph_config: ... max_batch_size: 512" only, trtllm-serve without
    # --max_batch_size -> blank (c256 TP 4 1k1k even ran with "DP_ATTENTION=true", EP 4: the row says ep 1)
    assert cells["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp4_ep1_10"] == ("none", "")
    assert cells["dsr1_h200_trtllm_fp8_agg_1024x1024_c32_cfg83"] == ("none", "")
    # gptoss_fp4_b200_trt_slurm.sh: "--max_batch_size 512 \", DP only "if [[ $CONC -ge 256 ]]"
    assert cells["2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c16_tp8_ep1_406"] == ("none", "512")
    # gptoss_fp4_h200_trt_slurm.sh: "trtllm-serve $MODEL --max_batch_size $CONC" (c32)
    assert cells["2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x8192_c32_tp2_ep1_168"] == ("none", "32")
    # gptoss_fp4_h100_docker.sh / _slurm.sh "--max-num-seqs=$CONC  \" (c64)
    assert cells["2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_8192x1024_c64_tp8_ep1_319"] == ("none", "64")
    # gptoss_fp4_h200_slurm.sh "--max-num-seqs $CONC" (c8)
    assert cells["2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_1024x1024_c8_tp1_ep1_387"] == ("none", "8")


def test_nightly_matrix_runs_2025_11_14_to_12_15():
    # From 17d5e204 the nightly (cron "0 0 * * *") expands .github/configs/nvidia-master.yaml; the only
    # "spec-decoding: mtp" entries are dsr1-fp4-gb200-dynamo-trt's (GB200) -> none on B200/H200
    cells = _cells()
    # 2025-11-14, 00:00 UTC run @ c23a59f2: gptoss-fp4-b200-trt 1k8k "{ tp: 8, conc-start: 4, conc-end: 64 }"
    # (97f253b5 later that day cut it to conc-end 16); gptoss_fp4_b200_trt_slurm.sh "--max_batch_size 512 \"
    assert cells["2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x8192_c64_tp8_ep1_200"] == ("none", "512")
    # 2025-12-02, run @ 175fe536: 8k1k "{ tp: 4, conc-start: 4, conc-end: 128 }", same script line
    assert cells["2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_8192x1024_c64_tp4_ep1_307"] == ("none", "512")
    # 2025-12-15, run @ 02919975: gptoss-fp4-h200-trt 1k1k "{ tp: 4, ep: 4, dp-attn: false, conc-start: 4,
    # conc-end: 32 }" (columns tp 16, moe_tp 4, moe_ep 4: the squared export of --tp 4 --ep 4, as the id says);
    # gptoss_fp4_h200_trt_slurm.sh "--max_batch_size $CONC \" (c32)
    assert cells["2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c32_tp4_ep4_985"] == ("none", "32")
    # dsr1-fp4-b200-trt 8k1k "{ tp: 4, ep: 4, conc-start: 4, conc-end: 32 }"; dsr1_fp4_b200_trt_slurm.sh has
    # only "max_batch_size: 512" under cuda_graph_config and no --max_batch_size -> blank
    assert cells["2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c16_tp4_ep4_971"] == ("none", "")
    # dsr1-fp8-h200-trt 1k1k "{ tp: 8, ep: 8, conc-start: 4, conc-end: 64 }", dsr1_fp8_h200_trt_slurm.sh same
    assert cells["dsr1_h200_trtllm_fp8_agg_1024x1024_c64_cfg181"] == ("none", "")
    # 2025-12-05 / 12-08 GPT-OSS H100 vLLM at c512: gptoss-fp4-h100-vllm's search space ends at conc 64 on
    # every commit of those days (7c338290, c7e4b1d7), so no nightly ran them: not pinned, blank
    assert cells["2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c512_tp2_ep1_1135"] == ("", "")
