"""validate / calibrate CLI: --json keys, malformed rows skipped by line, bad input → one line, exit 2."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
HEADER = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,"
    "concurrency,num_requests,spec_decode,output_tok_s_per_gpu,derived,trust,source_url\n"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-c", "from tokenplan.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_validate_json_has_the_issue_keys_and_skips_malformed_rows(tmp_path):
    f = tmp_path / "m.csv"
    f.write_text(
        HEADER
        + "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,128,128,8,,none,1500,,high,x\n"
        + "b,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,128,128,8,,none,??,,high,x\n"
    )
    r = _run("validate", str(f), "--json")
    # the well-formed row is reported in full, and the malformed one fails the run in one line,
    # exit 2 (it exited 0: a break-it pass; a row the planner cannot predict is not bad input)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (
        f"error: {f}: line 3 (id b): malformed: column output_tok_s_per_gpu value '??' is not a number: "
        "skipped, the well-formed rows are reported above"
    )
    d = json.loads(r.stdout)
    for key in ("n", "skipped", "median_abs_pct_error", "p90_abs_pct_error", "bias", "rows"):
        assert key in d
    assert d["n"] == 1 and d["skipped"][0]["line"] == 3


def test_validate_missing_file_is_one_line_exit_2(tmp_path):
    r = _run("validate", str(tmp_path / "absent.csv"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr


def test_calibrate_writes_a_profile_validate_reads(tmp_path):
    # rows of two models on one engine and GPU, so a factor is identified (a refit whose rows
    # identify none writes nothing: test_calibrate_outputs.py)
    rows = "".join(
        f"r{m}{c},trtllm,{m},h100-sxm,1,1,1,1,1,false,bf16,bf16,128,256,{c},,none,{v},,high,x\n"
        for m, c, v in (("llama-3.1-8b", 1, 120), ("llama-3.1-8b", 8, 900), ("llama-3.1-8b", 64, 4000))
        + (("qwen3-8b", 1, 110), ("qwen3-8b", 8, 820), ("qwen3-8b", 64, 3600))
    )
    f = tmp_path / "m.csv"
    f.write_text(HEADER + rows)
    out = tmp_path / "p.json"
    r = _run("calibrate", str(f), "-o", str(out), "--no-cv", "--refit")
    assert r.returncode == 0, r.stderr
    profile = json.loads(out.read_text())
    assert "default" in profile and "provenance" in profile
    # the factors left at their documented default are said, in the profile and on the console
    assert profile["held_at_default"] == ["comm_fraction"] and "held at their documented defaults" in r.stdout
    assert "at_bound" in profile and "optimiser" in r.stdout
    # why the optimiser stopped, in scipy's words, not its bare status code ("status 2")
    title = " ".join(r.stdout.split())
    assert re.search(r"optimiser (not )?converged after \d+ evaluations: \S", title), title[:400]
    assert "status 2" not in title
    r = _run("validate", str(f), "--calibration", str(out), "--json")
    assert r.returncode == 0, r.stderr


def test_a_file_with_no_predictable_row_lists_the_reasons_and_exits_2(tmp_path):
    f = tmp_path / "none.csv"
    f.write_text(
        "engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu\n"
        "sglang,no-such-model,b200,1,1,100,100,1,100\n",
        encoding="utf-8",
    )
    done = _run("validate", str(f), "--json")
    assert done.returncode == 2
    skipped = json.loads(done.stdout)["skipped"]  # nothing lost: the reason is still printed
    assert len(skipped) == 1 and "no-such-model" in skipped[0]["reason"]
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "at least one predictable row" in done.stderr


def test_a_header_without_rows_is_one_line_that_says_so(tmp_path):
    f = tmp_path / "header.csv"
    f.write_text(HEADER)
    r = _run("validate", str(f))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "no data rows" in r.stderr


SERVING = Path(__file__).resolve().parents[2] / "data" / "ground-truth" / "serving-dev.csv"


def _ten_rows(tmp_path: Path) -> Path:
    # a user's own 10-row file: the first ten vLLM H200 rows of the serving dev set
    lines = SERVING.read_text(encoding="utf-8").splitlines()
    rows = [r for r in lines[1:] if ",vllm," in r and ",h200," in r][:10]
    f = tmp_path / "ten.csv"
    f.write_text("\n".join([lines[0], *rows]) + "\n", encoding="utf-8")
    return f


def test_calibrate_on_a_10_row_file_updates_the_shipped_fit_on_all_ten_rows(tmp_path):
    f, out = _ten_rows(tmp_path), tmp_path / "p.json"
    r = _run("calibrate", str(f), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["n"] == 10  # not thinned to every 5th row (2 rows)
    profile = json.loads(out.read_text())
    assert profile["layered_on"] == "shipped" and list(profile["groups"]) == ["vllm/hopper"]
    g = d["groups"]["vllm/hopper"]
    for metric in ("tpot", "ttft"):  # never worse than the shipped fit on the user's own rows
        assert g["median_abs_error_calibrated"][metric] <= g["median_abs_error_shipped"][metric]
    for name, factor in g["factors"].items():
        assert profile["prior"][f"vllm/hopper.{name}"] == factor["shipped"]
    r = _run("validate", str(f), "--calibration", str(out), "--json")
    assert r.returncode == 0, r.stderr


def test_calibrate_refuses_a_malformed_row_in_one_line_and_writes_no_profile(tmp_path):
    # validate fails on a malformed row; calibrate fitted the other rows, wrote the profile and
    # exited 0 with "1 skipped" (a break-it pass). The ten good rows and one NaN row: refused,
    # by the update and by the refit alike.
    f, out = _ten_rows(tmp_path), tmp_path / "p.json"
    bad = tmp_path / "bad.csv"
    header = f.read_text(encoding="utf-8").splitlines()[0]
    row = "x," + ",".join("nan" if c == "ttft_ms" else "" for c in header.split(",")[1:])
    bad.write_text(f.read_text(encoding="utf-8") + row + "\n", encoding="utf-8")
    for extra in ((), ("--refit", "--no-cv")):
        r = _run("calibrate", str(bad), "-o", str(out), *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
        assert r.stderr.startswith(f"error: {bad}: line 12 (id x): malformed: ") and "nothing fitted" in r.stderr
        assert not out.exists()


def test_bands_need_the_full_refit(tmp_path):
    f = _ten_rows(tmp_path)
    r = _run("calibrate", str(f), "-o", str(tmp_path / "p.json"), "--bands", str(tmp_path / "b.json"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--refit" in r.stderr
    assert not (tmp_path / "p.json").exists()


def test_validate_on_a_file_the_fit_was_made_on_says_the_errors_are_in_sample(tmp_path):
    # newuser finding 14: validate dev.csv showed "in 80% interval 93%" where the README's held-out
    # figure is 80 %, with nothing saying that dev.csv is one of the shipped fit's own files
    import hashlib

    from tokenplan.api.resolve import read_profile
    from tokenplan.api.validate import in_sample_note

    dev = Path(SRC).parent / "data" / "ground-truth" / "dev.csv"
    stamp = "sha256:" + hashlib.sha256(dev.read_bytes()).hexdigest()[:12]
    assert stamp in read_profile(None).table.provenance  # the shipped fit names it
    note = in_sample_note(str(dev))
    assert note is not None and note.startswith(f"{dev} ({stamp}) is one of the files the fit was made on")
    done = _run("validate", str(dev), "--no-rows")
    assert done.returncode == 0 and f"note: {note}" in done.stderr
    # a file the fit never saw (one byte more) gets no such note
    other = tmp_path / "dev.csv"
    other.write_bytes(dev.read_bytes() + b"\n")
    assert in_sample_note(str(other)) is None


def test_validate_says_which_serving_rows_it_read_as_their_launch(tmp_path):
    # One squared export of --tp 8 --ep 8 (tp 64, moe 8 × 8; the id names the launch) and one row
    # in the regular form: the report names the first with its reason, --json lists it alone.
    f = tmp_path / "s.csv"
    f.write_text(
        "id,engine,model,gpu,isl,osl,concurrency,tp,ttft_ms,tpot_ms,attention_dp_size,moe_tp_size,moe_ep_size\n"
        "a_c16_tp8_ep8_1,sglang,deepseek-r1,b200,1024,1024,16,64,300,11,1,8,8\n"
        "b_c16_tp8_0_ep8_0_2,sglang,deepseek-r1,b200,1024,1024,16,8,300,11,1,1,8\n"
    )
    r = _run("validate", str(f), "--no-rows")
    assert r.returncode == 0, r.stderr
    assert "line 2 (id a_c16_tp8_ep8_1) read as 8 GPUs, not 64: its id names the launch tp 8, ep 8" in r.stdout
    d = json.loads(_run("validate", str(f), "--json").stdout)
    assert [(e["line"], e["id"]) for e in d["layout_read_as_launched"]] == [(2, "a_c16_tp8_ep8_1")]
    assert [row["num_gpus"] for row in d["rows"]] == [8, 8]


def test_an_update_that_ends_on_a_bound_says_so_and_a_group_with_nothing_moved_has_no_empty_table(tmp_path):
    # The first five rows of dev.csv: four TensorRT-LLM B200 rows whose update of the shipped fit
    # takes hbm_fraction to its 0.95 bound (EFFICIENCY_BOUNDS), and one H100 row that moves
    # nothing. The bound read as "–" in the ±1σ column, and the second group printed a table of
    # headers alone (a break-it pass).
    rows = (Path(__file__).resolve().parents[2] / "data" / "ground-truth" / "dev.csv").read_text().splitlines()[:6]
    data = tmp_path / "five.csv"
    data.write_text("\n".join(rows) + "\n")
    r = _run("calibrate", str(data), "-o", str(tmp_path / "p.json"))
    assert r.returncode == 0, r.stderr
    line = next(t for t in r.stdout.splitlines() if "hbm_fraction" in t)
    assert "0.95" in line and line.rstrip("│ ").endswith("at bound")
    assert "trtllm/hopper (1 row): nothing moved" in r.stdout
    assert r.stdout.count("┃ factor") == 1  # one table: the group that moved


def test_validate_json_counts_the_rows_each_metric_compares(tmp_path):
    # stop-40 note: `n` counts every predicted row (786 on InferenceX) while the TPOT median is over
    # the rows that measure TPOT (763). Here both rows state tok/s, only b states TPOT and TTFT:
    # n 2, rows_compared 2, tpot_rows_compared 1, ttft_rows_compared 1.
    f = tmp_path / "m.csv"
    f.write_text(
        HEADER.rstrip("\n")
        + ",ttft_ms_median,tpot_ms_median\n"
        + "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,128,128,8,,none,1500,,high,x,,\n"
        + "b,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,128,128,8,,none,1500,,high,x,20,6\n"
    )
    d = json.loads(_run("validate", str(f), "--json").stdout)
    assert d["n"] == 2
    assert (d["rows_compared"], d["tpot_rows_compared"], d["ttft_rows_compared"]) == (2, 1, 1)


def test_validate_json_has_every_metric_key_when_no_row_measures_it(tmp_path):
    # a new-user pass: a file whose rows state tok/s alone gave no ttft_* / tpot_* keys at all, so
    # a script reading the three *_rows_compared keys the README lists broke. One row, tok/s only:
    # rows_compared 1, tpot_rows_compared 0, ttft_rows_compared 0, their errors null.
    f = tmp_path / "m.csv"
    f.write_text(HEADER + "a,trtllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,128,128,8,,none,1500,,high,x\n")
    d = json.loads(_run("validate", str(f), "--json").stdout)
    assert (d["rows_compared"], d["tpot_rows_compared"], d["ttft_rows_compared"]) == (1, 0, 0)
    assert d["tpot_median_abs_pct_error"] is None and d["ttft_coverage"] is None


def test_the_coverage_column_stays_when_every_tok_s_is_set_aside(tmp_path):
    # a break-it pass: dev.csv id 132 (500 in flight, OSL 100, TTFT 164,148 ms, TPOT 84.24 ms) with
    # 5,000 requests and 1e6 tok/s: its latencies allow 500 × 100 / (164.148 + 100 × 0.08424) s
    # = 289.7 tok/s, so the tok/s is set aside; TPOT and TTFT keep their interval column
    rows = list(csv.DictReader((ROOT / "data" / "ground-truth" / "dev.csv").open(encoding="utf-8")))
    (row,) = [r for r in rows if r["id"] == "132"]
    row.update(num_requests="5000", output_tok_s_per_gpu="1000000")
    f = tmp_path / "contra.csv"
    with f.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerow(row)
    r = _run("validate", str(f))
    assert r.returncode == 0, r.stderr
    assert "in 80% interval" in r.stdout
    tpot = [line for line in r.stdout.splitlines() if "all rows (TPOT)" in line]
    assert tpot and tpot[0].rstrip(" │").endswith("%")
