"""Gap-analysis rows of ``serving-dev.csv`` that copy an InferenceX run carry that run's columns
(tests/support/gap_twins.py says how a copy is recognised)."""

from __future__ import annotations

from tests.support.gap_twins import RUN_COLUMNS, SERVING, is_gap, serving_rows, twins

from tokenplan.files.measurements import read_measurements


def test_gap_analysis_rows_that_copy_a_pinned_run_carry_its_columns():
    rows = serving_rows()
    found = twins(rows)
    by_id = {r["id"]: r for r in rows}
    # read off the file by hand (TTFT / TPOT ms, gap-analysis row | the pinned run):
    # Kimi-K2.5 NVFP4 B200 vLLM TP8 1k1k c4: 163.73 / 7.42 | 163.725 / 7.423 (2026-04-06 export);
    # Qwen3.5-397B BF16 B200 SGLang TP8 1k1k c16: 423.31 / 12.01 | 423.312 / 12.010 (2026-03-25);
    # Qwen3.5-397B FP8 B200 SGLang TP4 1k1k c16: 600.76 / 10.02 | 600.758 / 10.023, an MTP run
    pairs = {
        "kimi_k2_5_gap_analysis_kimi_k2_5_gap_analysis_b200_sxm_vllm_fp4_agg_1024x1024_c4_tp8_ep1_1": (
            "2026_04_06_kimi_k2_5_b200_sxm_vllm_fp4_agg_1024x1024_c4_tp8_ep1_1297"
        ),
        "qwen3_5_397b_gap_analysis_qwen3_5_397b_gap_analysis_b200_sxm_sglang_bf16_agg_1024x1024_c16_tp8_ep1_3": (
            "2026_03_25_qwen3_5_397b_b200_sxm_sglang_bf16_agg_1024x1024_c16_tp8_0_ep1_0_639"
        ),
        "qwen3_5_397b_gap_analysis_qwen3_5_397b_gap_analysis_b200_sxm_sglang_fp8_agg_1024x1024_c16_tp4_ep1_18": (
            "2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c16_tp4_0_ep1_0_473"
        ),
    }
    for gap, pinned in pairs.items():
        assert pinned in {t["id"] for t in found[gap]}
    assert by_id[next(reversed(pairs))]["spec_decode"] == "mtp (eagle steps=3 draft_tokens=4 topk=1)"
    # the data README's count, and every copy holds its run's columns, which all its copies share
    assert len(found) == 58
    for gid, copies in found.items():
        assert len({tuple(t[c] for c in RUN_COLUMNS) for t in copies}) == 1, gid
        assert tuple(by_id[gid][c] for c in RUN_COLUMNS) == tuple(copies[0][c] for c in RUN_COLUMNS), gid


def test_the_other_gap_analysis_rows_stay_blank():
    rows = serving_rows()
    found = twins(rows)
    rest = [r for r in rows if is_gap(r) and r["id"] not in found]
    assert len(rest) == 682 - 58
    assert all(r[c] == "" for r in rest for c in ("spec_decode", "max_running", "num_requests"))


def test_a_copied_mtp_run_reads_as_speculative_with_its_cap():
    got = {m.row_id: m for m in read_measurements(str(SERVING)).rows}
    # the Qwen3.5-397B-A17B FP8 B200 TP4 1k8k run at concurrency 256: TTFT 2,205.13 ms, TPOT
    # 37.53 ms in the gap-analysis file, 2,205.126 / 37.527 ms in the 2026-03-25 export, a run of
    # qwen3.5_fp8_b200_mtp.sh (SPECULATIVE_NUM_STEPS=3, SPECULATIVE_DRAFT_TOKENS=4, topk 1) with
    # --max-running-requests 256 (data README, "MTP runs among these rows")
    gap = [
        m
        for m in got.values()
        if "gap_analysis" in m.row_id
        and m.model == "qwen3.5-397b-a17b"
        and m.gpu == "b200"
        and m.concurrency == 256
        and m.osl_tokens > 7000
    ]
    assert len(gap) == 1
    (m,) = gap
    assert m.spec == "mtp:3"  # spec_from_text: EAGLE on the MTP layers, 3 steps
    assert m.max_running == 256 and m.num_requests == 2560
