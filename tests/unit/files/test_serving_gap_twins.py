"""Gap-analysis rows of ``serving-dev.csv`` that copy an InferenceX run carry that run's columns
(tests/support/gap_twins.py says how a copy is recognised)."""

from __future__ import annotations

from collections import Counter

from tests.support.gap_twins import RUN_COLUMNS, SERVING, is_gap, serving_rows, twins

from tokenplan.files.measurements import read_measurements


def test_58_gap_analysis_rows_copy_a_pinned_run_and_carry_its_columns():
    rows = serving_rows()
    found = twins(rows)
    by_id = {r["id"]: r for r in rows}
    # the copies the fill found (data README): 9 + 24 + 7 + 1 + 9 + 8 = 58; a change to the file
    # changes this list and the README's together
    groups = Counter((by_id[i]["model"], by_id[i]["gpu"], by_id[i]["precision"]) for i in found)
    assert groups == {
        ("qwen3.5-397b-a17b", "b200", "bf16"): 9,
        ("qwen3.5-397b-a17b", "b200", "fp8"): 24,
        ("qwen3.5-397b-a17b", "h200", "fp8"): 7,
        ("kimi-k2.5", "b200", "fp4"): 1,
        ("kimi-k2.5", "b200", "int4"): 9,
        ("kimi-k2.5", "h200", "int4"): 8,
    }
    for gid, copies in found.items():
        # every copy of one run agrees on how it ran (the dated exports and the DB dump)
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
