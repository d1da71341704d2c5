"""The ``tokenplan`` command as a user runs it: a subprocess per invocation.

Checks exit codes, that ``plan``/``predict``/``memory``/``catalog`` print what they promise
(``--json`` keys from issue 2), and that every bad input — unknown model, GPU or dtype, a
malformed config.json or job file, a zero or negative size, a layout that does not fit or does
not divide the heads — exits 2 with one ``error:`` line on stderr and no traceback.

The invocations are independent, so they start together once per module (bounded by the CPU
count) and each test reads its own result: the module costs about one interpreter start per core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


def _command() -> list[str]:
    """The installed console script of this interpreter, else the same entry point via ``-c``."""
    script = Path(sysconfig.get_path("scripts")) / "tokenplan"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from tokenplan.cli import main; main()"]


MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "intermediate_size": 4096,
}


def _files(root: Path) -> dict[str, str]:
    files = {
        "bad_json": ('{"hidden_size": 1024,\n "num_hidden_layers": }', "config.json"),
        "no_hidden": (json.dumps({k: v for k, v in MODEL_CONFIG.items() if k != "hidden_size"}), "config.json"),
        "wrong_type": (json.dumps({**MODEL_CONFIG, "hidden_size": "big"}), "config.json"),
        "bad_yaml": ("model: [qwen3-8b\nsamples: 10\n", "job.yaml"),
        "unknown_key": ("model: qwen3-8b\nsampels: 10\n", "job.yaml"),
        "negative_samples": ("samples: -4\n", "job.yaml"),
        "good_job": (
            "model: qwen3-8b\nsamples: 1000\ngpus: [1xh100-sxm]\nosl: {mean: 512, sigma: 0.5, cap: 4096}\n",
            "job.yaml",
        ),
    }
    out = {}
    for key, (text, name) in files.items():
        folder = root / key
        folder.mkdir()
        (folder / name).write_text(text, encoding="utf-8")
        out[key] = str(folder / name)
    return out


def _cases(f: dict[str, str]) -> dict[str, list[str]]:
    p8 = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
    return {
        # ---- commands that succeed
        "plan": ["plan"],
        "plan_json": ["plan", "--json"],
        "plan_job": ["plan", "--job", f["good_job"], "--json"],
        "predict_json": p8 + ["--json", "--concurrency", "64"],
        "memory_json": ["memory", "--model", "qwen3.6-27b", "--gpu", "b200", "--json"],
        "catalog_gpus": ["catalog", "gpus"],
        "catalog_models": ["catalog", "models"],
        "catalog_models_json": ["catalog", "models", "--json"],
        # ---- bad input: exit 2, one line
        "unknown_model": ["plan", "--model", "llama-9-1t"],
        "unknown_model_predict": ["predict", "--model", "llama-9-1t", "--gpu", "h100-sxm"],
        "unknown_gpu": ["plan", "--gpu", "2xh300"],
        "unknown_gpu_predict": ["predict", "--model", "llama-3.1-8b", "--gpu", "h300"],
        "malformed_gpu": ["plan", "--gpu", "8b200"],
        "zero_gpu_count": ["plan", "--gpu", "0xb200"],
        "unknown_weight_dtype": p8 + ["--weight-dtype", "fp3"],
        "unknown_kv_dtype": p8 + ["--kv-dtype", "int2"],
        "unknown_plan_dtype": ["plan", "--weight-dtype", "fp3"],
        "unknown_engine": p8 + ["--engine", "tgi"],
        "config_bad_json": ["plan", "--model", f["bad_json"]],
        "config_missing_key": ["predict", "--model", f["no_hidden"], "--gpu", "h100-sxm"],
        "config_wrong_type": ["memory", "--model", f["wrong_type"], "--gpu", "h100-sxm"],
        "job_bad_yaml": ["plan", "--job", f["bad_yaml"]],
        "job_unknown_key": ["plan", "--job", f["unknown_key"]],
        "job_negative_samples": ["plan", "--job", f["negative_samples"]],
        "job_missing_file": ["plan", "--job", str(Path(f["good_job"]).parent / "absent.yaml")],
        "zero_samples": ["plan", "--samples", "0"],
        "negative_isl": p8 + ["--isl", "-5"],
        "zero_osl": p8 + ["--osl", "0"],
        "zero_concurrency": p8 + ["--concurrency", "0"],
        "zero_tp": p8 + ["--tp", "0"],
        "does_not_fit": ["predict", "--model", "llama-3.1-405b", "--gpu", "h100-sxm"],
        "tp_not_dividing_heads": p8 + ["--tp", "3"],
        "concurrency_not_a_number": p8 + ["--concurrency", "abc"],
        "fractional_tp": p8 + ["--tp", "1.5"],
        "samples_not_a_number": ["plan", "--samples=abc"],
        "bad_price": ["plan", "--price", "b200=cheap"],
        "bad_spec": p8 + ["--spec", "eagle:x"],
        # ---- a concurrency below one request per replica (see test below)
        "fractional_concurrency": p8 + ["--concurrency", "0.5"],
        "concurrency_below_dp": p8 + ["--num-gpus", "2", "--concurrency", "1"],
    }


ERROR_CASES = [
    ("unknown_model", "llama-9-1t"),
    ("unknown_model_predict", "llama-9-1t"),
    ("unknown_gpu", "h300"),
    ("unknown_gpu_predict", "h300"),
    ("malformed_gpu", "8b200"),
    ("zero_gpu_count", "0xb200"),
    ("unknown_weight_dtype", "fp3"),
    ("unknown_kv_dtype", "int2"),
    ("unknown_plan_dtype", "fp3"),
    ("unknown_engine", "tgi"),
    ("config_bad_json", "not valid JSON"),
    ("config_missing_key", "hidden_size"),
    ("config_wrong_type", "hidden_size"),
    ("job_bad_yaml", "not valid YAML"),
    (
        "job_unknown_key",
        "sampels: unknown key (did you mean samples? allowed: model, samples, isl, osl, gpus, engine, prices, spec, draft_model, current, measured_tok_s, tp, pp, dp, ep, max_running)",
    ),
    ("job_negative_samples", "samples"),
    ("job_missing_file", "absent.yaml"),
    ("zero_samples", "samples"),
    ("negative_isl", "isl"),
    ("zero_osl", "osl"),
    ("zero_concurrency", "concurrency"),
    ("does_not_fit", "does not fit"),
    ("tp_not_dividing_heads", "TP3 does not divide the 32 attention heads"),
    ("concurrency_not_a_number", "abc"),
    # the CLI's value types (cli/params.py): the option, the value given and what is allowed
    ("fractional_tp", "--tp '1.5' is not allowed (allowed: an integer)"),
    ("samples_not_a_number", "--samples 'abc' is not allowed (allowed: an integer)"),
    ("bad_price", "b200=cheap"),
    ("bad_spec", "eagle:x"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("cli")
    cases = _cases(_files(root))
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(_command() + argv, capture_output=True, text=True, timeout=120, env=env, cwd=root)

    with ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2)) as pool:
        results = dict(zip(cases, pool.map(run, cases.values())))
    return results


# ---------------------------------------------------------------- plan
def test_plan_with_no_arguments_prints_both_options_and_the_answer(runs):
    r = runs["plan"]
    assert r.returncode == 0, r.stderr
    assert "4× rtx-pro-6000" in r.stdout and "8× b200" in r.stdout
    assert "Fastest:" in r.stdout  # the answer sentences
    assert "TP8" in r.stdout  # whether TP8 is the right layout on B200
    # The planned engine's command; the others are in --json (their figures need --engine).
    assert "sglang.launch_server" in r.stdout and "vllm serve" not in r.stdout
    assert "--json also gives the vLLM and TensorRT-LLM commands" in r.stdout
    assert "Traceback" not in r.stderr


def test_plan_json_has_options_recommendation_and_answer(runs):
    r = runs["plan_json"]
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"options", "recommended", "answer"} <= set(out)
    assert [o["option"] for o in out["options"]] == ["4× rtx-pro-6000", "8× b200"]
    rec = out["recommended"]
    assert {"concurrency_per_endpoint", "output_tok_s_total", "num_replicas"} <= set(rec)
    assert rec["output_tok_s_total"] > 0 and rec["num_replicas"] >= 1 and rec["concurrency_per_endpoint"] >= 1
    assert isinstance(out["answer"], list) and out["answer"]
    # 914,000 samples × mean output 2,500: the plan solves for the lognormal whose mean *after*
    # the max_tokens cap is 2,500 (job.workload.lognormal_with_mean), so the job is
    # 914,000 × 2,500 = 2.285 B output tokens (the figure), to the solver's 0.1 %.
    assert out["job"]["output_tokens"] == pytest.approx(914_000 * 2_500, rel=1e-3)


def test_plan_reads_a_job_file(runs):
    r = runs["plan_job"]
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model"] == "qwen3-8b"
    assert out["job"]["samples"] == 1000
    assert [o["option"] for o in out["options"]] == ["1× h100-sxm"]


# ---------------------------------------------------------------- predict, memory, catalog
PREDICT_KEYS = {
    "output_tok_s_total",
    "output_tok_s_per_gpu",
    "max_concurrency",
    "kv_bytes_per_token",
    "weight_bytes_per_gpu",
    "step_time_ms",
    "tpot_ms",
    "ttft_ms",
    "bottleneck",
    "warnings",
}


def test_predict_json_has_the_promised_keys(runs):
    r = runs["predict_json"]
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert PREDICT_KEYS <= set(out)
    # Llama-3.1-8B BF16: 32·8·128·2·2 = 131,072 B/token; weights 8,029,995,008 params × 2 B
    # + the RoPE table 131,072 positions × 128 × 2 B = 16,059,990,016 + 33,554,432.
    assert out["kv_bytes_per_token"] == 131_072
    assert out["weight_bytes_per_gpu"] == 16_093_544_448
    # One GPU: per-GPU throughput is the total.
    assert out["output_tok_s_per_gpu"] == out["output_tok_s_total"]
    assert isinstance(out["warnings"], list)


def test_memory_json_has_the_promised_keys(runs):
    r = runs["memory_json"]
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {
        "kv_bytes_per_token",
        "state_bytes_per_sequence",
        "weight_bytes_per_gpu",
        "kv_capacity_tokens",
        "running_requests",
        "running_limited_by",
        "running_context_tokens",
    } <= set(out)
    assert out["running_limited_by"] in ("kv cache", "state slots", "kv cache and state", "engine cap")
    # Qwen3.6-27B: 16·4·256·2·2 = 65,536 B/token; 48·(48·128·128·4 + 10,240·3·2) = 153,944,064 B.
    assert out["kv_bytes_per_token"] == 65_536
    assert out["state_bytes_per_sequence"] == 153_944_064


def test_catalog_gpus_lists_the_gpus(runs):
    r = runs["catalog_gpus"]
    assert r.returncode == 0, r.stderr
    for key in ("rtx-pro-6000", "h100-sxm", "b200", "mi355x"):
        assert key in r.stdout


def test_catalog_models_marks_approximations(runs):
    r = runs["catalog_models"]
    assert r.returncode == 0, r.stderr
    assert "approx" in r.stdout and "exact" in r.stdout
    rows = {row["name"]: row for row in json.loads(runs["catalog_models_json"].stdout)}
    assert rows["glm-5"]["approximations"] and rows["nemotron-3-nano-30b-a3b"]["approximations"]
    assert rows["llama-3.1-8b"]["approximations"] == []


# ---------------------------------------------------------------- errors: exit 2, one line, no traceback
@pytest.mark.parametrize(("case", "named"), ERROR_CASES, ids=[c for c, _ in ERROR_CASES])
def test_bad_input_exits_2_with_one_error_line(runs, case, named):
    r = runs[case]
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error:")
    assert named in lines[0]


def test_zero_tp_error_names_tp(runs):
    r = runs["zero_tp"]
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: --tp 0 ")
    assert "an integer ≥ 1" in r.stderr  # a TP degree is a count of GPUs, not any positive number


@pytest.mark.parametrize("case", ["fractional_concurrency", "concurrency_below_dp"])
def test_concurrency_below_one_request_per_replica_does_not_crash(runs, case):
    # --concurrency 0.5 is not a whole number of requests; 1 request over 2 replicas leaves one
    # replica idle and is rejected as such: both are one-line errors, never a traceback.
    r = runs[case]
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2 and r.stderr.startswith("error: ")
