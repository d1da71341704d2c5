"""validate with error bands: each row's 80 % interval per metric, inside or not, and the
file's coverage per metric, against hand arithmetic."""

from __future__ import annotations

import json

import pytest

from tokenplan.api.resolve import resolve_file
from tokenplan.calibration.bands import Band, BandTable
from tokenplan.calibration.validate import RowResult, Validation, relative_error, summarise
from tokenplan.calibration.validation import ValidationResult, validation_result
from tokenplan.files.measurements import read_measurements
from tokenplan.report.validation import rows_table, summary_table

SERVING = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,"
    "concurrency,num_requests,spec_decode,ttft_ms,tpot_ms,trust,source_url\n"
)


def test_rows_carry_their_interval_and_the_file_its_coverage(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text(
        SERVING
        + "".join(
            f"r{i},sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1000,200,8,,none,50,10,high,x\n"
            for i in range(2)
        )
    )
    cases, _ = resolve_file(read_measurements(str(f)))
    # rate band r = log(pred/meas) ∈ [−0.1, 0.2]; TPOT scales as 1/rate: TPOT_meas ∈ TPOT_pred·[e^−0.1, e^0.2]
    #   pred 10 ms → [9.0484, 12.2140] ms. TTFT band [−0.5, 0.3]: TTFT_meas ∈ TTFT_pred·[e^−0.3, e^0.5]
    #   pred 50 ms → [37.041, 82.436] ms.
    bands = BandTable(
        0.8,
        {"rate": {"all": Band(-0.1, 0.2, 50)}, "ttft": {"all": Band(-0.5, 0.3, 50)}},
        max_batch={"sglang/hopper": 64.0},
        gpus=("h100-sxm",),
    )
    # Row 1 measured TPOT 11 ms (inside) and TTFT 90 ms (outside); row 2 TPOT 13 ms (outside), TTFT 60 (inside).
    measured = [(0.011, 0.090), (0.013, 0.060)]
    rows = tuple(
        RowResult(
            c,
            {"tpot": (0.010, tpot, relative_error(0.010, tpot)), "ttft": (0.050, ttft, relative_error(0.050, ttft))},
            8.0,
        )
        for c, (tpot, ttft) in zip(cases, measured)
    )
    summary = {k: summarise([r.values[k][2] for r in rows]) for k in ("tpot", "ttft")}
    d = validation_result(Validation("serving", rows, (), summary), bands).to_json()
    first, second = d["rows"]
    assert (first["tpot_ms_low"], first["tpot_ms_high"]) == pytest.approx((9.0484, 12.2140), abs=1e-4)
    assert (first["ttft_ms_low"], first["ttft_ms_high"]) == pytest.approx((37.041, 82.436), abs=1e-3)
    assert (first["tpot_inside"], first["ttft_inside"], second["tpot_inside"], second["ttft_inside"]) == (
        True,
        False,
        False,
        True,
    )
    # one of two rows inside, per metric; "coverage" sits beside the main metric's median
    assert d["coverage"] == 0.5 and d["ttft_coverage"] == 0.5
    assert list(d).index("coverage") == list(d).index("median_abs_pct_error") + 3
    # the tables show it: an interval column on each row, a coverage column in the summary
    typed = validation_result(Validation("serving", rows, (), summary), bands)
    # and it reads back: each metric's keys into its own typed group
    back = ValidationResult.from_json(json.loads(json.dumps(d)))
    assert back == typed and back.to_json() == d
    assert back.rows[0].tpot is not None and back.rows[0].tpot.inside is True and back.rows[0].throughput is None
    assert "in 80%" in rows_table(typed).header  # in/out per row; the interval itself is in --json
    assert "in 80% interval" in [c.header for c in summary_table(typed).columns]


def test_without_bands_no_interval_keys(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text(SERVING + "r,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1000,200,8,,none,50,10,high,x\n")
    cases, _ = resolve_file(read_measurements(str(f)))
    rows = (RowResult(cases[0], {"tpot": (0.010, 0.011, relative_error(0.010, 0.011))}, 8.0),)
    d = validation_result(Validation("serving", rows, (), {"tpot": summarise([rows[0].values["tpot"][2]])})).to_json()
    assert d["coverage"] is None and "tpot_ms_low" not in d["rows"][0] and "tpot_inside" not in d["rows"][0]


def test_each_row_names_the_speculative_decoding_it_ran(tmp_path):
    # dev.csv lines 66 and 67 differ only in their speculative decoding (none; SGLang MTP k=3):
    # the per-row table could not tell them apart (a new-user pass)
    f = tmp_path / "s.csv"
    f.write_text(
        SERVING
        + "a,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1000,200,8,,none,50,10,high,x\n"
        + "b,sglang,qwen3.6-27b,h100-sxm,1,1,1,1,1,false,fp8,fp8,1000,200,8,,mtp:3,50,10,high,x\n"
    )
    cases, _ = resolve_file(read_measurements(str(f)))
    rows = tuple(RowResult(c, {"tpot": (0.010, 0.011, relative_error(0.010, 0.011))}, 8.0) for c in cases)
    typed = validation_result(Validation("serving", rows, (), {"tpot": summarise([r.values["tpot"][2] for r in rows])}))
    assert typed.rows[0].spec == "none" and typed.rows[1].spec.startswith("mtp k=3 τ=")
    table = rows_table(typed)
    at = table.header.index("spec")
    assert [r[at] for r in table.rows] == ["–", "mtp k=3"]
