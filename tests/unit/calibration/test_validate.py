"""validate: error statistics, a hand-computed prediction, and malformed rows."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from tokenplan.api.validate import validate
from tokenplan.calibration.validate import relative_error, summarise
from tokenplan.errors import ConfigError, InputError
from tokenplan.files.measurements import read_measurements, spec_from_text
from tokenplan.stats import percentile

# A profile that turns every inefficiency off: decode is then pure weight streaming. Every
# Efficiency field is listed (a test below checks it), so a new factor cannot silently fall
# back to its default here.
IDEAL = {
    "default": {
        "hbm_fraction": 1.0,
        "attention_fraction": 1.0,
        "gemm_fraction": 1.0,
        "gemm_half_tokens": 64.0,
        "gemm_kernel_factor": 1.0,
        "fp8_kernel_factor": 1.0,
        "fp4_kernel_factor": 1.0,
        "moe_kernel_factor": 1.0,
        "lowprec_fraction": 1.0,
        "dequant_fraction": 1.0,
        "comm_fraction": 1.0,
        "step_overhead_s": 0.0,
        "per_sequence_overhead_s": 0.0,
        "ttft_overhead_s": 0.0,
        "layer_latency_s": 0.0,
        "moe_layer_latency_s": 0.0,
        "per_token_moe_layer_s": 0.0,
        # arrival pattern, not an inefficiency: the default half-synchronised waves
        "prefill_wave_fraction": 0.5,
    },
    "provenance": "test: ideal hardware",
}

# Llama-3.1-8B BF16 on one H100 SXM, batch 1, decode memory-bound:
#   dense params = attention 1,342,177,280 + FFN 5,637,144,576 = 6,979,321,856 → ×2 B = 13,958,643,712 B
#   lm_head 128,256 × 4,096 = 525,336,576 → ×2 B = 1,050,673,152 B   (embedding is a lookup, not read)
#   bytes per step = 15,009,316,864 B; / 3.35e12 B/s (H100 SXM datasheet) = 4.4804 ms
#   KV read at ~2 tokens of context: 2 × 131,072 B / 3.35e12 = 0.08 µs, negligible.
HAND_TPOT_S = 15_009_316_864 / 3.35e12

THROUGHPUT_HEADER = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,"
    "concurrency,num_requests,spec_decode,output_tok_s_per_gpu,derived,trust,source_url\n"
)


def test_ideal_profile_lists_every_efficiency_field():
    from tokenplan.perf.efficiency import EFFICIENCY_FIELDS

    assert set(IDEAL["default"]) == set(EFFICIENCY_FIELDS)


def test_percentile_interpolates_like_numpy():
    # sorted [1, 2, 3, 4]: p50 at position 1.5 → 2.5; p90 at 2.7 → 3 + 0.7 × 1 = 3.7
    assert percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)
    assert percentile([4, 1, 3, 2], 90) == pytest.approx(3.7)
    assert math.isnan(percentile([], 50))


def test_summary_of_hand_made_pairs():
    pairs = [(110, 100), (80, 100), (150, 100), (100, 100), (95, 100)]
    errors = [relative_error(p, m) for p, m in pairs]  # +0.10, −0.20, +0.50, 0, −0.05
    s = summarise(errors)
    # |e| sorted: 0, 0.05, 0.10, 0.20, 0.50 → median 0.10; p90 at position 3.6 → 0.20 + 0.6 × 0.30 = 0.38
    # signed sorted: −0.20, −0.05, 0, 0.10, 0.50 → bias 0
    assert (s.n, s.median_abs, s.p90_abs, s.bias) == (5, pytest.approx(0.10), pytest.approx(0.38), pytest.approx(0.0))


@pytest.fixture()
def ideal_profile(tmp_path):
    p = tmp_path / "ideal.json"
    p.write_text(json.dumps(IDEAL))
    return str(p)


def test_validate_throughput_row_matches_hand_roofline(tmp_path, ideal_profile):
    # Concurrency 1: output tok/s = 1 / TPOT = 223.19 tok/s; measured 200 → error +11.6 %.
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(
        THROUGHPUT_HEADER + "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,x\n"
    )
    d = validate(str(csv_path), ideal_profile).to_json()
    assert d["n"] == 1 and d["skipped"] == []
    row = d["rows"][0]
    assert row["predicted_output_tok_s_per_gpu"] == pytest.approx(1 / HAND_TPOT_S, rel=0.01)
    assert d["median_abs_pct_error"] == pytest.approx(1 / HAND_TPOT_S / 200 - 1, rel=0.02)


def test_validate_serving_row_reports_tpot_error(tmp_path, ideal_profile):
    # Measured TPOT 5.6 ms vs 4.4804 ms predicted → −20.0 %.
    csv_path = tmp_path / "s.csv"
    csv_path.write_text(
        "id,engine,model,gpu,precision,gemm_quant_mode,moe_quant_mode,isl,osl,concurrency,tp,pp,"
        "attention_dp_size,moe_tp_size,moe_ep_size,ttft_ms,tpot_ms\n"
        "s1,trtllm,llama-3.1-8b,h100-sxm,bf16,,,1,2,1,1,1,1,1,1,10,5.6\n"
    )
    d = validate(str(csv_path), ideal_profile).to_json()
    assert d["kind"] == "serving" and d["n"] == 1
    assert d["tpot_median_abs_pct_error"] == pytest.approx(1 - HAND_TPOT_S / 5.6e-3, rel=0.02)
    assert d["tpot_bias"] == pytest.approx(HAND_TPOT_S / 5.6e-3 - 1, rel=0.02)
    assert "ttft_median_abs_pct_error" in d


def test_malformed_and_unpredictable_rows_are_skipped_with_line_numbers(tmp_path, ideal_profile):
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(
        THROUGHPUT_HEADER
        + "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,x\n"  # line 2: ok
        + "b,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,fast,,high,x\n"  # 3: not a number
        + "c,trtllm,llama-3.1-8b,h100-sxm,one,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,x\n"  # 4: num_gpus
        + "d,trtllm,no-such-model,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,x\n"  # 5: unknown
        + "e,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,,2,1,,none,200,,high,x\n"  # 6: no isl
        + "f,trtllm,llama-3.1-8b\n"  # 7: short row
        + "g,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,0,1,,none,200,,high,x\n"  # 8: osl 0
        + "h,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,-4,none,200,,high,x\n"  # 9: N < 0
        + "i,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,maybe,bf16,bf16,1,2,1,,none,200,,high,x\n"
    )  # 10: flag
    d = validate(str(csv_path), ideal_profile).to_json()
    assert d["n"] == 1
    by_line = {s["line"]: s["reason"] for s in d["skipped"]}
    assert sorted(by_line) == [3, 4, 5, 6, 7, 8, 9, 10]
    assert "output_tok_s_per_gpu" in by_line[3] and "num_gpus" in by_line[4]
    assert "no-such-model" in by_line[5] and "isl" in by_line[6]
    assert "column osl value '0' must be > 0" in by_line[8] and "column num_requests value '-4'" in by_line[9]
    assert "column attention_dp value 'maybe' is not one of true, false" in by_line[10]


def test_trust_is_validated_on_read_and_blank_means_medium(tmp_path):
    csv_path = tmp_path / "m.csv"
    row = "{id},trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,{trust},x\n"
    csv_path.write_text(
        THROUGHPUT_HEADER
        + row.format(id="a", trust="HIGH")
        + row.format(id="b", trust="")
        + row.format(id="c", trust="very")
        + row.format(id="d", trust="low")
    )
    data = read_measurements(str(csv_path))
    assert [(m.row_id, m.trust) for m in data.rows] == [("a", "high"), ("b", "medium"), ("d", "low")]
    (bad,) = data.skipped
    assert bad.line == 4 and "trust" in bad.reason and "'very'" in bad.reason


def test_records_with_the_wrong_number_of_fields_say_so(tmp_path):
    # The header has 21 fields (THROUGHPUT_HEADER). Line 3 has 4 fields, line 4 has 23 (two
    # surplus), and line 5 opens a quote that is never closed: it swallows line 6 into one field,
    # so the record ends after 3 fields and line 6 is not read on its own.
    ok = "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,x"
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(
        THROUGHPUT_HEADER
        + ok
        + "\n"
        + "b,trtllm,llama-3.1-8b,h100-sxm\n"
        + ok.replace("a,", "c,", 1)
        + ",extra,more\n"
        + 'd,trtllm,"llama-3.1-8b,h100-sxm\n'
        + ok.replace("a,", "e,", 1)
        + "\n"
    )
    data = read_measurements(str(csv_path))
    assert [m.row_id for m in data.rows] == ["a"]
    reasons = {s.line: s.reason for s in data.skipped}
    assert "4 fields where the header has 21" in reasons[3]
    assert "23 fields where the header has 21" in reasons[4]
    assert "3 fields where the header has 21" in reasons[6] and "quote left open" in reasons[6]


def test_a_long_notes_field_is_data_and_a_field_past_the_limit_names_its_own_line(tmp_path):
    from tokenplan.files.measurements import FIELD_LIMIT_BYTES

    ok = "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,"
    csv_path = tmp_path / "m.csv"
    # line 2: a 200 kB source_url (past the csv module's 128 KiB default, within ours);
    # line 3: one byte past our limit; line 4: an ordinary row
    csv_path.write_text(
        THROUGHPUT_HEADER
        + ok
        + "x" * 200_000
        + "\n"
        + ok.replace("a,", "b,", 1)
        + "y" * (FIELD_LIMIT_BYTES + 1)
        + "\n"
        + ok.replace("a,", "c,", 1)
        + "x\n"
    )
    data = read_measurements(str(csv_path))
    assert [m.row_id for m in data.rows] == ["a", "c"]
    (bad,) = data.skipped
    assert bad.line == 3 and "field larger than field limit" in bad.reason


def test_a_file_that_is_not_utf8_names_the_encoding(tmp_path):
    f = tmp_path / "bin.csv"
    f.write_bytes(b"id,engine\n\xff\xfe\x00\x01\n")
    with pytest.raises(ConfigError, match=r"bin.csv: encoding: cannot be read as UTF-8 text"):
        read_measurements(str(f))


def test_unknown_columns_and_missing_file_are_input_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")  # no measurement column at all: not a measurement table
    with pytest.raises(ConfigError, match="names none of the measurement columns"):
        read_measurements(str(bad))
    bad.write_text("engine,model,gpu\nsglang,llama-3.1-8b,h100-sxm\n")  # some, not all
    with pytest.raises(ConfigError, match="missing column"):
        read_measurements(str(bad))
    with pytest.raises(InputError):
        read_measurements(str(tmp_path / "absent.csv"))


def test_spec_text_maps_to_method_and_steps():
    assert spec_from_text("mtp (steps=3 draft_tokens=4)") == "mtp:3"
    assert spec_from_text("none") == "none"
    assert spec_from_text("mtp") == "mtp:3"  # no steps stated: the engines' usual 3
    assert spec_from_text("mtp (nextn=1)") == "mtp:1"  # TensorRT-LLM num_nextn_predict_layers
    assert spec_from_text("mtp (num_speculative_tokens=2)") == "mtp:2"  # vLLM


INFERENCEX_HEADER = THROUGHPUT_HEADER.rstrip("\n") + (
    ",ttft_ms_median,tpot_ms_median,total_tok_s_per_gpu,engine_version,date,length_distribution,max_running,notes\n"
)


def test_inferencex_row_carries_throughput_median_latencies_and_uniform_lengths(tmp_path):
    from tokenplan.job.workload import stated_lengths

    csv_path = tmp_path / "ix.csv"
    csv_path.write_text(
        INFERENCEX_HEADER + "2001,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,4,40,"
        'none,560,,high,x,161.6,6.76,1120,v1,2026-02-06,uniform:0.8,,"nominal 1024/1024 (random U[0.8L,L])"\n'
        "2002,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,4,,none,200,,high,x,,,,,,,,\n"
    )
    first, second = read_measurements(str(csv_path)).rows
    assert (first.output_tok_s_per_gpu, first.ttft_s, first.tpot_s) == pytest.approx((560, 0.1616, 0.00676))
    assert first.length_low_fraction == 0.8 and first.num_requests == 40
    assert second.ttft_s is None and second.length_low_fraction is None and second.num_requests is None
    # U[0.8 L, L] with mean 922: L = 922 / 0.9 = 1,024.4; CV = 0.2 / (1.8·√3) = 0.06415;
    # σ = √ln(1 + 0.06415²) = 0.06409; E[L²]/E[L] = mean·(1 + CV²) = 922 × 1.004115 = 925.8
    d = stated_lengths(922, 0.8)
    assert d.sigma == pytest.approx(0.06409, abs=1e-5) and d.cap_tokens == pytest.approx(1024.44, abs=0.01)
    assert d.running_mean == pytest.approx(925.8, rel=3e-3)


def test_throughput_that_contradicts_the_runs_own_latencies_is_set_aside_with_its_reason(tmp_path, ideal_profile):
    from rich.console import Console

    from tokenplan.api.resolve import resolve_file
    from tokenplan.calibration.fit import row_kind
    from tokenplan.report.validation import show_validation

    # One H100, concurrency 4, OSL 922, median TTFT 161.6 ms and TPOT 6.76 ms. By Little's law a
    # closed-loop client completes 4 requests per request latency, 0.1616 + 922 × 0.00676 =
    # 6.3943 s, so the run can produce at most 4 × 922 / 6.3943 = 576.8 output tok/s.
    #   560 tok/s: ratio 560 / 576.8 = 0.971 → kept;
    #   400 tok/s: 0.693 ≤ 0.8 → set aside (the run lost ~30 % of its time outside its requests);
    #   800 tok/s: 1.387 ≥ 1.25 → set aside (more than its latencies allow).
    row = "{id},sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,4,,none,{tok},,high,x,161.6,6.76,,,,,,\n"
    csv_path = tmp_path / "ix.csv"
    csv_path.write_text(
        INFERENCEX_HEADER + "".join(row.format(id=i, tok=t) for i, t in (("kept", 560), ("slow", 400), ("fast", 800)))
    )
    data = read_measurements(str(csv_path))
    kept, slow, fast = data.rows
    assert kept.output_tok_s_per_gpu == 560 and kept.throughput_set_aside is None
    for m, ratio in ((slow, "0.69"), (fast, "1.39")):
        assert m.output_tok_s_per_gpu is None and m.tpot_s == pytest.approx(0.00676)
        assert (
            f"measured/allowed {ratio}" in m.throughput_set_aside and "allow 576.8 tok/s/GPU" in m.throughput_set_aside
        )
    # the fit still weighs a set-aside row as a row of its file (TTFT and TPOT only)
    cases, _ = resolve_file(data)
    assert [row_kind(c) for c in cases] == ["both", "both", "both"]
    result = validate(str(csv_path), ideal_profile)
    d = result.to_json()
    assert [s["id"] for s in d["throughput_set_aside"]] == ["slow", "fast"] and d["n"] == 3
    rows = {r["id"]: r for r in d["rows"]}
    assert "error" in rows["kept"] and "error" not in rows["slow"] and "tpot_error" in rows["slow"]
    console = Console(record=True, width=400)
    show_validation(console, result)
    text = console.export_text()
    assert "tok/s of 2 rows set aside" in text and "│ all rows (throughput) │ 1 " in text


def test_little_law_check_leaves_bursts_alone_and_never_stops_the_read(tmp_path):
    # A burst (N = 10 requests sent at once, concurrency 64 ≥ N): the in-flight count falls from
    # 10 to 0 as they end, so the closed-loop bound 10 × 1,024 / (0.1 + 1,024 × 0.010) = 990.3
    # tok/s does not apply; a burst whose last request ends at twice the mean latency delivers
    # about half of it, 495.2 tok/s (ratio 0.5), and is kept, not set aside (the gpustack H100
    # rows of dev.csv: 1,000 ShareGPT prompts at once, ratio 0.52).
    # A closed loop (concurrency 8 < N = 100) keeps 8 in flight: 8 × 1,024 / 10.34 = 792.3 tok/s;
    # at exactly the bound, 0.8 × 792.3 = 633.8 tok/s, the row is kept (both bounds are kept),
    # at 0.79 × 792.3 = 625.9 it is set aside.
    # Values outside float range (inf) make their row malformed; a 5e-324 tok/s (ratio 0 in float
    # arithmetic) is left to the prediction, not divided by.
    base = "{id},sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1024,1024,{c},{n},none,{tok},,high,x,{ttft},10,,,,,,\n"
    csv_path = tmp_path / "ix.csv"
    rows = [
        ("burst", 64, 10, 495.2, 100),
        ("edge", 8, 100, 0.8 * 8 * 1024 / 10.34, 100),
        ("slow", 8, 100, 0.79 * 8 * 1024 / 10.34, 100),
        ("inf", 64, 10, 990.3, "inf"),
        ("tiny", 1000, "", 5e-324, 100),
    ]
    csv_path.write_text(
        INFERENCEX_HEADER + "".join(base.format(id=i, c=c, n=n, tok=t, ttft=f) for i, c, n, t, f in rows)
    )
    data = read_measurements(str(csv_path))
    kept = {m.row_id: m for m in data.rows}
    assert kept["burst"].output_tok_s_per_gpu == 495.2 and kept["burst"].throughput_set_aside is None
    assert kept["edge"].throughput_set_aside is None
    assert kept["slow"].output_tok_s_per_gpu is None and "measured/allowed 0.79" in kept["slow"].throughput_set_aside
    assert kept["tiny"].output_tok_s_per_gpu == 5e-324 and kept["tiny"].throughput_set_aside is None
    assert [(s.row_id, s.reason) for s in data.skipped] == [
        ("inf", "malformed: column ttft_ms_median value 'inf' is not a finite number")
    ]


def test_inferencex_row_carries_the_launch_running_cap_its_max_running_column_states(tmp_path):
    from tokenplan.api.resolve import measurement_request

    csv_path = tmp_path / "ix.csv"
    csv_path.write_text(
        INFERENCEX_HEADER + "2001,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,512,,"
        'mtp (eagle steps=2),200,,high,x,,,,,,,512,"sglang max-running-requests=512; cuda-graph-max-bs=512"\n'
        "2002,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,4,,none,200,,high,x,,,,,,,,\n"
        # notes are documentation: a cap only they state is not read (issue 28 point 6)
        "2003,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,64,,none,200,,high,x,,,,,,,,"
        '"sglang max-running-requests=128"\n'
        "2004,sglang,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,922,922,64,,none,200,,high,x,,,,,,,12.5,\n"
    )
    data = read_measurements(str(csv_path))
    stated, unstated, in_notes = data.rows
    assert stated.max_running == 512 and unstated.max_running is None and in_notes.max_running is None
    assert [s.reason for s in data.skipped] == [
        "malformed: column max_running value '12.5' is not a whole number from 1 to 1,000,000,000 (or blank)"
    ]
    # the cap reaches the prediction as ``--max-running``, in place of SGLang's 48 with MTP
    assert measurement_request(stated).max_running == 512 and measurement_request(unstated).max_running is None


def test_offline_row_with_num_requests_is_a_job_of_n_requests(tmp_path, ideal_profile):
    # Offline (max) run of N = 2 requests, ISL 1, OSL 2 on one H100: the engine could run far
    # more, so both requests run together and the job is two decode steps at batch 2. With the
    # ideal profile a step streams the weights, 15,009,316,864 B / 3.35e12 B/s = 4.4804 ms
    # (batch 2 adds 2 tokens × 2 × 7.5e9 FLOP = 30 GFLOP, ~0.03 ms of compute hidden under the
    # weight read); the prefill of 2 one-token prompts is a few µs. Output: 2 × 2 tokens in
    # 2 × 4.4804 ms = 446.4 tok/s. The same row without num_requests is the steady state at the
    # engine's full batch, many times faster.
    csv_path = tmp_path / "m.csv"
    row = "{id},trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,max,{n},none,400,,high,x\n"
    csv_path.write_text(THROUGHPUT_HEADER + row.format(id="job", n=2) + row.format(id="steady", n=""))
    rows = {r["id"]: r for r in validate(str(csv_path), ideal_profile).to_json()["rows"]}
    assert rows["job"]["predicted_output_tok_s_per_gpu"] == pytest.approx(2 / HAND_TPOT_S, rel=0.02)
    assert rows["steady"]["predicted_output_tok_s_per_gpu"] > 20 * rows["job"]["predicted_output_tok_s_per_gpu"]


def test_skipped_rows_with_one_reason_print_as_one_line_with_their_line_ranges(tmp_path, ideal_profile):
    from rich.console import Console

    from tokenplan.report.validation import show_validation

    # Lines 3, 4 and 6 share a reason (an engine outside the catalog), line 5 has its own: the
    # printout groups the three as "lines 3–4, 6"; --json keeps one entry per row.
    row = "{id},{engine},llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,1,2,1,,none,200,,high,x\n"
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(
        THROUGHPUT_HEADER
        + "".join(
            row.format(id=i, engine=e)
            for i, e in (("a", "trtllm"), ("b", "atom"), ("c", "atom"), ("d", "no-such"), ("e", "atom"))
        )
    )
    result = validate(str(csv_path), ideal_profile)
    assert [s["line"] for s in result.to_json()["skipped"]] == [3, 4, 5, 6]
    console = Console(record=True, width=400)
    show_validation(console, result, rows=False)
    text = console.export_text()
    assert "4 rows skipped" in text and "  3 rows, lines 3–4, 6: engine 'atom' is not in the catalog" in text
    assert "  line 5 (id d): engine 'no-such'" in text


def _row_132_variants(out: Path, *changes: dict[str, str]) -> Path:
    """A CSV at ``out`` of dev.csv's row 132 once per ``changes`` (cells replaced by column)."""
    dev = Path(__file__).resolve().parents[3] / "data" / "ground-truth" / "dev.csv"
    rows = list(csv.DictReader(dev.open(encoding="utf-8")))
    (row,) = [r for r in rows if r["id"] == "132"]
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**row, **change} for change in changes)
    return out


def test_a_burst_of_fewer_requests_than_its_concurrency_is_predicted_at_its_requests(tmp_path):
    # a break-it pass: dev.csv id 132 (qwen3-32b, H100 PCIe, vLLM, ISL 2,000 / OSL 100, 500 in
    # flight) with num_requests 1 was predicted with the TPOT of 500 in flight and the tok/s and
    # TTFT of one request. One request never shares a step: every figure is that of a run at
    # concurrency 1 with one request.
    # one request's tok/s: at most 1 / 32 ms ≈ 31 per GPU (beyond_physics), so 20, not 152.4
    one = {"num_requests": "1", "output_tok_s_per_gpu": "20"}
    out = _row_132_variants(tmp_path / "burst.csv", {**one, "id": "burst"}, {**one, "id": "single", "concurrency": "1"})
    burst, single = validate(str(out)).rows
    assert burst.tpot.predicted == pytest.approx(single.tpot.predicted, rel=1e-12)
    assert burst.throughput.predicted == pytest.approx(single.throughput.predicted, rel=1e-12)


@pytest.mark.parametrize("extra", [("ttft_ms", "tpot_ms"), ("ttft_ms",)])
def test_a_header_mixing_the_two_formats_is_refused_naming_the_columns(tmp_path, extra):
    # a break-it pass: dev.csv columns plus ttft_ms and tpot_ms were read as serving-dev.csv rows,
    # dropping output_tok_s_per_gpu and the *_median columns; with ttft_ms alone it was dropped
    header = "id,engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu," + ",".join(extra)
    row = "1,vllm,qwen3-32b,h200,1,1,1000,100,8,900," + ",".join("50" for _ in extra)
    f = tmp_path / "mixed.csv"
    f.write_text(f"{header}\n{row}\n")
    with pytest.raises(ConfigError, match="of the other format"):
        validate(str(f))


def test_a_blank_first_line_is_not_called_an_empty_file(tmp_path):
    f = tmp_path / "blank.csv"
    f.write_text("\nid,engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu\n")
    with pytest.raises(ConfigError, match="line 1 is blank: the column names must be the first line"):
        validate(str(f))
    (tmp_path / "empty.csv").write_text("\n\n")
    with pytest.raises(ConfigError, match="the file is empty"):
        validate(str(tmp_path / "empty.csv"))


def test_a_tpot_or_tok_s_beyond_the_roofline_bound_is_set_aside_as_impossible(tmp_path):
    # a break-it pass: dev.csv id 132 (qwen3-32b BF16 on one H100 PCIe, vLLM, 500 in flight) with
    # TTFT and TPOT of 0.001 ms was fitted. Each step reads at least Qwen3-32B's ~65 GB of BF16
    # weights at the H100 PCIe's 2.0 TB/s, ~32 ms: a TPOT of 0.001 ms is 30,000× under it. And
    # 1e7 tok/s per GPU from 500 requests would need 500 × (1 / 0.032 s) = 15,600 at most.
    out = _row_132_variants(
        tmp_path / "impossible.csv",
        {"id": "fast", "ttft_ms_median": "0.001", "tpot_ms_median": "0.001"},
        {"id": "many", "output_tok_s_per_gpu": "10000000"},
        {},
    )
    v = validate(str(out))
    reasons = {s.id: s.reason for s in v.skipped}
    assert "measured TPOT 0.001 ms is under half the" in reasons["fast"]
    assert "measured 10,000,000 tok/s per GPU is over twice the" in reasons["many"]
    assert [r.id for r in v.rows] == ["132"]  # the row as measured stays


def test_a_row_past_its_models_context_is_rejected_without_the_plan_options_advice(tmp_path, ideal_profile):
    # Llama-2-70B's context is 4,096; the row's 3,000 + 2,000 = 5,000 tokens pass it. plan and predict
    # add ": lower --isl or --osl"; a measured row's lengths are its own (a break-it pass)
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(
        THROUGHPUT_HEADER + "a,vllm,llama-2-70b,h200,8,8,1,1,1,false,bf16,bf16,3000,2000,64,,none,500,,high,x\n"
    )
    (skipped,) = validate(str(csv_path), ideal_profile).to_json()["skipped"]
    assert skipped["reason"].startswith("rejected: a request of 5,000 tokens (mean prompt 3,000 + mean output 2,000)")
    assert skipped["reason"].endswith("(max_position_embeddings, times a rope_scaling factor where set)")
