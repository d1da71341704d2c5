"""Issue 26, as a new user meets it: a file or value that used to end in a traceback, or pass
unchecked, is now one ``error:`` line naming the file or option, the key, the value and what is
allowed, with exit status 2 (a ``--max-tokens 1e30``, a plan whose output cap is ``Infinity``,
files nested 100,000 deep, a ``summary.json`` that is not UTF-8, NaN and ``top_k -5`` in a
``generation_config.json``, a key twice in a job YAML, a column twice in a CSV, NaN in a report
input, ``bench --concurrency ""``). An unknown ``torch_dtype`` is planned as BF16 with a warning.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.support.cli import one_error_line as _one_error_line
from tests.support.cli import tokenplan as _tokenplan

from tokenplan.errors import ConfigError

DEEP = 100_000  # levels: far past Python's recursion limit (1,000), as a hostile or broken file
CAP = "16,777,216"  # 2^24 = 16,777,216 tokens: MAX_REQUEST_TOKENS


def _generate(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    return _tokenplan(
        "generate",
        "in.jsonl",
        "--out",
        "run",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--dry-run",
        *options,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--max-tokens", "1e30"],
            (
                f"error: --max-tokens 1e+30 is not allowed (allowed: a number of tokens above the mean "
                f"2500 and at most {CAP} (2^24, above any model's context))"
            ),
        ),
        (
            ["--max-tokens", "Infinity"],
            (
                f"error: --max-tokens inf is not allowed (allowed: a number of tokens above the "
                f"mean 2500 and at most {CAP} (2^24, above any model's context))"
            ),
        ),
        (
            ["--isl-cap", "1e30"],
            (
                f"error: --isl-cap 1e+30 is not allowed (allowed: a number of tokens above the mean 1024 "
                f"and at most {CAP} (2^24, above any model's context))"
            ),
        ),
    ],
    ids=["max_tokens_1e30", "max_tokens_infinity", "isl_cap_1e30"],
)
def test_an_output_or_input_cap_no_request_can_hold_is_refused_by_plan(tmp_path, args, line) -> None:
    assert _one_error_line(_tokenplan("plan", "--gpu", "8xb200", *args, cwd=tmp_path)) == line


@pytest.mark.parametrize(("cap", "shown"), [(1e30, "1e+30"), (float("inf"), "inf")], ids=["1e30", "Infinity"])
def test_a_plan_file_whose_output_cap_is_beyond_any_request_is_refused_by_generate(tmp_path, cap, shown) -> None:
    # json.dumps writes inf as the bare word Infinity, as `plan --json` did before plan refused it
    (tmp_path / "plan.json").write_text(json.dumps({"model": "m", "job": {"osl_cap_tokens": cap}}))
    assert _one_error_line(_generate(tmp_path, "--plan", "plan.json")) == (
        f"error: plan.json: job.osl_cap_tokens: {shown} is not allowed (allowed: an output cap of 1 to {CAP} "
        "tokens, as --max-tokens)"
    )


NESTED = "nested deeper than 64 levels (allowed: at most 64 levels of objects and lists)"


def test_a_plan_file_nested_very_deep_is_one_line(tmp_path) -> None:
    # line 2: the brackets start after the first newline
    (tmp_path / "plan.json").write_text('{"model": "m",\n "job": ' + "[" * DEEP + "]" * DEEP + "}")
    assert _one_error_line(_generate(tmp_path, "--plan", "plan.json")) == f"error: plan.json: line 2: {NESTED}"


def test_a_job_yaml_nested_very_deep_is_one_line(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text("model: qwen3.6-27b\ngpus: " + "[" * DEEP + "]" * DEEP + "\n")
    assert (
        _one_error_line(_tokenplan("plan", "--job", "job.yaml", cwd=tmp_path)) == f"error: job.yaml: line 2: {NESTED}"
    )


def test_a_config_json_nested_very_deep_is_one_line(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"hidden_size": ' + "[" * DEEP + "]" * DEEP + "}")
    assert _one_error_line(_tokenplan("plan", "--model", "m/config.json", cwd=tmp_path)) == (
        f"error: m/config.json: line 1: {NESTED}"
    )


def test_report_on_a_summary_that_is_not_utf8_is_one_line(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    # '{"model": "' is 11 bytes ({ + "model" (7) + : + space + "), so the 0xff is byte 11
    (tmp_path / "run" / "summary.json").write_bytes(b'{"model": "\xff"}')
    assert _one_error_line(_tokenplan("report", "run", "-o", "r.html", cwd=tmp_path)) == (
        "error: run/summary.json: byte 11: not UTF-8 text (allowed: a UTF-8 text file)"
    )
    assert not (tmp_path / "r.html").exists()


def test_report_on_a_summary_nested_very_deep_is_one_line(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text('{"model": ' + "[" * DEEP + "]" * DEEP + "}")
    assert _one_error_line(_tokenplan("report", "run", "-o", "r.html", cwd=tmp_path)) == (
        f"error: run/summary.json: line 1: {NESTED}"
    )


def test_report_refuses_nan_rather_than_writing_it_into_the_page(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(
        '{"model": "m", "units_total": 10, "stored": 10, "errors": 0, "elapsed_s": 60.0, "output_tokens": 100, '
        '"output_tok_s": NaN}'
    )
    assert _one_error_line(_tokenplan("report", "run", "-o", "r.html", cwd=tmp_path)) == (
        "error: run/summary.json: output_tok_s: expected a finite number, got nan"
    )
    assert not (tmp_path / "r.html").exists()


def test_report_given_a_plan_file_as_bench_says_it_is_no_bench_file(tmp_path) -> None:
    # new-user finding: report --bench plan.json said "plan.json: num_gpus: missing"; bench --from-json's words
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(
        '{"model": "m", "units_total": 10, "stored": 10, "errors": 0, "elapsed_s": 60.0, "output_tokens": 100, '
        '"output_tok_s": 1.5}'
    )
    (tmp_path / "plan.json").write_text('{"schema_version": 1, "job": {}, "options": []}')
    assert _one_error_line(_tokenplan("report", "run", "--bench", "plan.json", "-o", "r.html", cwd=tmp_path)) == (
        "error: plan.json: levels: expected the bench JSON with a 'levels' list"
    )
    assert _one_error_line(_tokenplan("bench", "--from-json", "plan.json", cwd=tmp_path)) == (
        "error: plan.json: levels: expected the bench JSON with a 'levels' list"
    )
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ('{"temperature": NaN}', "temperature: nan is not allowed (allowed: a number from 0 to 100)"),
        ('{"top_k": -5}', "top_k: -5 is not allowed (allowed: an integer from 1 to 2,147,483,647, or 0 for no top-k)"),
        ('{"top_p": 1.5}', "top_p: 1.5 is not allowed (allowed: a number above 0, at most 1)"),
        (
            '{"top_k": 20.5}',
            "top_k: 20.5 is not allowed (allowed: an integer from 1 to 2,147,483,647, or 0 for no top-k)",
        ),
    ],
    ids=["temperature_nan", "top_k_negative", "top_p_above_1", "top_k_fraction"],
)
def test_a_generation_config_with_values_no_engine_takes_is_refused(tmp_path, config, line) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "generation_config.json").write_text(config)
    assert _one_error_line(_generate(tmp_path, "--generation-config", "model")) == (
        f"error: model/generation_config.json: {line}"
    )


def test_a_job_yaml_with_a_key_twice_is_refused(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text("model: qwen3.6-27b\nsamples: 1000\nsamples: 2000\n")
    assert _one_error_line(_tokenplan("plan", "--job", "job.yaml", cwd=tmp_path)) == (
        "error: job.yaml: line 3: key 'samples' given twice in one mapping (first on line 2) (allowed: each key once)"
    )


def test_a_measurement_csv_with_a_column_twice_is_refused(tmp_path) -> None:
    (tmp_path / "m.csv").write_text(
        "engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu,isl\n"
        "sglang,llama-3.1-8b,h100-sxm,1,1,1000,100,8,1000,2000\n"
    )
    assert _one_error_line(_tokenplan("validate", "m.csv", cwd=tmp_path)) == (
        "error: m.csv: header: column 'isl' appears twice (columns 6 and 10; allowed: each column once)"
    )


def test_a_dataset_given_as_a_measurement_file_is_named_as_not_one(tmp_path) -> None:
    # a new-user pass: `calibrate data.jsonl` said "column '{"role": "user"' appears twice"
    (tmp_path / "data.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "user"}]}\n')
    assert _one_error_line(_tokenplan("calibrate", "data.jsonl", "-o", "fit.json", cwd=tmp_path)) == (
        "error: data.jsonl: header: line 1 is JSON, not a CSV header (allowed: a CSV whose header "
        "has the columns of dev.csv, inferencex-dev.csv or serving-dev.csv: engine, model, gpu, num_gpus, tp, "
        "isl, osl, concurrency, output_tok_s_per_gpu; a generate run is read with --from-run RUN_DIR)"
    )


@pytest.mark.parametrize("option", ["--concurrency", "--max-concurrency"])
def test_bench_with_an_empty_concurrency_list_does_not_run_the_default_sweep(tmp_path, option) -> None:
    # the endpoint does not listen: the refusal comes from the option alone, before any request
    result = _tokenplan("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", option, "", cwd=tmp_path)
    assert _one_error_line(result) == (
        f"error: {option} '' is not allowed (allowed: comma-separated integers ≥ 1 with no empty entry, e.g. 1,4,16,64)"
    )


def test_an_unknown_torch_dtype_is_planned_as_bf16_with_a_warning(tmp_path) -> None:
    from tokenplan.catalog import _PKG

    config = json.loads((_PKG / "models" / "llama-3.1-8b.json").read_text())
    for name, dtype in (("odd", "float8_e4m3fn"), ("bf16", "bfloat16")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({**config, "torch_dtype": dtype}))
    runs = {
        name: _tokenplan("predict", "--model", name, "--gpu", "h100-sxm", "--json", cwd=tmp_path)
        for name in ("odd", "bf16")
    }
    assert all(r.returncode == 0 for r in runs.values()), runs["odd"].stderr
    odd, bf16 = (json.loads(runs[name].stdout) for name in ("odd", "bf16"))
    assert odd["warnings"] == [
        (
            "torch_dtype 'float8_e4m3fn' is not one tokenplan knows (bfloat16, float16, "
            "float32): the checkpoint is taken as bf16, 2 bytes per weight, unless --weight-dtype "
            "names the served format"
        )
    ]
    assert bf16["warnings"] == []
    # taken as bf16: the same format and weight bytes as the same checkpoint stated in bfloat16
    # (Llama-3.1-8B: 8.03 B parameters × 2 bytes ≈ 16.06 GB on its one GPU)
    assert odd["weight_dtype"] == bf16["weight_dtype"] == "bf16"
    assert odd["weight_bytes_per_gpu"] == bf16["weight_bytes_per_gpu"]
    assert abs(odd["weight_bytes_per_gpu"] / 2 / 8.03e9 - 1) < 0.01


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("osl: {mean: 2500, cap: 1.0e+30}\n", f"osl.cap: 1e+30 is not allowed (allowed: a number ≤ {CAP})"),
        ("isl: {mean: .inf}\n", f"isl.mean: inf is not allowed (allowed: a number ≤ {CAP})"),
    ],
    ids=["osl_cap_1e30", "isl_mean_inf"],
)
def test_a_job_yaml_length_no_request_can_hold_is_refused(tmp_path, text, message) -> None:
    from tokenplan.files.job import read_job_file

    (tmp_path / "job.yaml").write_text(text)
    with pytest.raises(ConfigError) as refused:
        read_job_file(str(tmp_path / "job.yaml"))
    assert str(refused.value) == f"{tmp_path / 'job.yaml'}: {message}"


GPU_KEYS = (
    "a100-80gb, b200, b300, gb200, gb300, h100-nvl, h100-pcie, h100-sxm, h20, h200, l40s, mi300x, mi325x, mi355x, "
    "rtx-5090, rtx-pro-6000"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'gpus: ["8xh100"]\n',
            "gpus: 'h100' is not in the catalog; did you mean h100-nvl, h100-pcie, h100-sxm, h200? "
            f"(allowed: {GPU_KEYS})",
        ),
        (
            'gpus: ["8.5xb200"]\n',
            "gpus: '8.5xb200' is not allowed (allowed: COUNTxKEY with COUNT an integer from 1 to 1,048,576 "
            "(e.g. 8xb200), or KEY alone (one node))",
        ),
        (
            'gpus: ["8xh100-sxm"]\nprices: {h100: 3}\n',
            "prices: 'h100' is not in the catalog; did you mean h100-nvl, h100-pcie, h100-sxm, h200? "
            f"(allowed: {GPU_KEYS})",
        ),
        (  # the model, engine and spec keys said the same without the file (closing note, stop 45)
            "model: qwen9\n",
            "model: 'qwen9' is not in the catalog; did you mean qwen3-8b? (allowed: deepseek-r1,",
        ),
        ("engine: vlm\n", "engine: 'vlm' is not in the catalog; did you mean vllm? (allowed: sglang, trtllm, vllm)"),
        (
            "spec: mtp:x\n",
            "spec: 'mtp:x' is not allowed (allowed: METHOD:K[:TAU] with K an integer and TAU a number)",
        ),
    ],
    ids=["unknown_gpu", "fractional_count", "unknown_priced_gpu", "unknown_model", "unknown_engine", "bad_spec"],
)
def test_a_job_yaml_gpu_name_plan_refuses_names_the_file(tmp_path, text, message) -> None:
    # new-user finding: gpus: ["8xh100"] in a job file said "gpu 'h100' …" without the file
    (tmp_path / "job.yaml").write_text(text)
    line = _one_error_line(_tokenplan("plan", "--job", "job.yaml", cwd=tmp_path))
    # the model's message goes on to list every catalog model: its start is checked
    assert (
        line.startswith(f"error: job.yaml: {message}")
        if message.endswith(",")
        else line == f"error: job.yaml: {message}"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "measured_tok_s: 1600\n",
            "measured_tok_s: 1600 is not allowed (allowed: a figure with current: (the setup it was measured on))",
        ),
        (
            "current: engine=sglang,tp=3\nmeasured_tok_s: 1600\n",
            "current: 'engine=sglang,tp=3' is not allowed (allowed: a setup whose TP × PP (3) divides the 4 GPUs",
        ),
        ("draft_model: ./nope\n", "draft_model: './nope' is not allowed (allowed: a drafter for --spec"),
    ],
    ids=["measured_without_current", "current_split", "drafter_without_spec"],
)
def test_a_job_yaml_value_checked_against_other_keys_names_the_file(tmp_path, text, message) -> None:
    # new-user pass: these said "measured-tok-s 1600 …", "current …", "draft_model …" without the file
    (tmp_path / "job.yaml").write_text(text)
    line = _one_error_line(_tokenplan("plan", "--job", "job.yaml", cwd=tmp_path))
    assert line.startswith(f"error: job.yaml: {message}"), line


def test_a_value_the_command_line_gives_over_a_job_file_keeps_its_option_name(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text("model: qwen3.6-27b\nmeasured_tok_s: 1600\n")
    line = _one_error_line(_tokenplan("plan", "--job", "job.yaml", "--measured-tok-s", "5", cwd=tmp_path))
    assert line.startswith("error: --measured-tok-s 5 is not allowed (allowed: a figure with --current"), line


@pytest.mark.parametrize("value", ["0", "0.5", "-3", "abc"])
def test_predict_concurrency_that_is_not_a_whole_number_of_requests_is_one_message(tmp_path, value) -> None:
    # new-user pass: 0 used to be told "a finite number > 0" and 0.5 "a whole number ≥ 1"
    line = _one_error_line(
        _tokenplan("predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", value, cwd=tmp_path)
    )
    assert line == f"error: --concurrency '{value}' is not allowed (allowed: a whole number of requests ≥ 1, or max)"


# A finished run's summary.json with one damaged figure that calibrate --from-run fits: each used
# to be a traceback (a text or a list where a number or object belongs), a silent fit (a negative
# or zero TTFT, `requests: true` read as 1 request) or a line naming a fit factor, not the file.
@pytest.mark.parametrize(
    ("summary", "line"),
    [
        ({"latency_ttft": {"mean_ms": "abc"}}, "latency_ttft.mean_ms: 'abc' is not allowed"),
        ({"latency_ttft": [1, 2]}, "latency_ttft: [1, 2] is not allowed (allowed: an object with mean_ms, or null)"),
        ({"latency_ttft": {"mean_ms": -3}}, "latency_ttft.mean_ms: -3 is not allowed"),
        ({"latency_ttft": {"mean_ms": 0}}, "latency_ttft.mean_ms: 0 is not allowed"),
        ({"requests": True}, "requests: True is not allowed (allowed: a finite number)"),
        ({"output_tok_s": "fast"}, "output_tok_s: 'fast' is not allowed (allowed: a finite number)"),
    ],
)
def test_calibrate_from_run_names_a_damaged_summary_figure_in_one_line(tmp_path, summary, line) -> None:
    from tokenplan.runner.store.rundir import RunDir

    RunDir.open(tmp_path / "run", {"model": "m", "sampling": {"temperature": 0.0}}).close()  # manifest.json
    # 4 requests × 100 tokens over 5 s = 80 tok/s: a sound run but for the one damaged figure
    sound = {"requests": 4, "output_tokens": 400, "output_tok_s": 80.0, "latency_ttft": {"mean_ms": 12.5}}
    (tmp_path / "run" / "summary.json").write_text(json.dumps(sound | summary))
    fit = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "4", "--isl", "100", "-o", "p.json")
    result = _tokenplan("calibrate", "--from-run", "run", *fit, cwd=tmp_path)
    assert _one_error_line(result).startswith(f"error: run/summary.json: {line}")
    assert not (tmp_path / "p.json").exists()
