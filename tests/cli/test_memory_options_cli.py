"""``tokenplan memory``/``predict`` take the engines' token budget per step: vLLM's
``--max-num-batched-tokens`` and SGLang's ``--chunked-prefill-size`` (issue 28, item 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

RUN = "import sys; sys.argv[0] = 'tokenplan'; from tokenplan.cli import main; sys.exit(main())"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300)


def test_a_budget_of_another_engine_is_one_line_and_exit_2():
    r = _run(
        "memory",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--engine",
        "sglang",
        "--max-num-batched-tokens",
        "4096",
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: --max-num-batched-tokens 4096 is not allowed (allowed: only with --engine vllm; the engine is sglang)"
    ]


def test_vllm_budget_moves_the_profiled_reserve():
    # Llama-3.1-8B on an H100 under vLLM: the sampler pass (1,024 rows × 128,256 × 24 B =
    # 3,152,019,456 B) is the profiling peak until the forward of the token budget passes it:
    # 8,192 × 2 B × 51,200 = 838,860,800 B (default) against 65,536 × 2 B × 51,200 = 6,710,886,400 B,
    # so --max-num-batched-tokens 65536 takes 6,710,886,400 − 3,152,019,456 = 3,558,866,944 B more.
    base = json.loads(
        _run("memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--json").stdout
    )
    big = json.loads(
        _run(
            "memory",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--engine",
            "vllm",
            "--max-num-batched-tokens",
            "65536",
            "--json",
        ).stdout
    )
    assert abs(base["kv_pool_bytes"] - big["kv_pool_bytes"] - 3_558_866_944) < 1


def test_a_shared_kv_and_state_pool_is_one_row_and_the_capacity_is_what_the_state_leaves():
    # SGLang without its radix cache keeps KV and state in one pool: the table printed "KV cache
    # pool 109.97 GiB, state pool 0.00 GiB" above "KV cache 16.78 GiB" at the running limit and a
    # KV capacity of 549,751 tokens (16.78 GiB / 32,768 B), which read as a contradiction (a
    # new-user pass). The pool is now one row, named as shared, and the capacity says it is what
    # the running requests' state leaves.
    r = _run(
        "memory",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "b200",
        "--weight-dtype",
        "fp8",
        "--kv-dtype",
        "fp8",
        "--disable-radix-cache",
        "--spec",
        "mtp:3",
    )
    assert r.returncode == 0, r.stderr
    assert "KV cache and state pool (shared)" in r.stdout and "│ state pool " not in r.stdout
    capacity = next(line for line in r.stdout.splitlines() if "KV capacity per replica beside" in line)
    tokens = int(capacity.split("│")[2].split()[0].replace(",", ""))
    kv = next(line for line in r.stdout.splitlines() if "│   KV cache " in line)
    gib = float(kv.split("│")[2].split()[0])
    assert abs(tokens * 32_768 / 2**30 - gib) < 0.01  # 32,768 B per token (FP8 KV, 16 layers · 4 heads · 256 · 2)
    plain = _run("memory", "--model", "qwen3.6-27b", "--gpu", "b200")  # the radix cache on: two pools
    assert "│ state pool " in plain.stdout and "(shared)" not in plain.stdout


def test_the_state_row_at_the_running_limit_says_why_it_is_above_the_pool():
    # new-user finding: "state pool 11.07 GiB" at start-up and "state slots 11.22 GiB" at 15 running,
    # unexplained. SGLang pads each state tensor with slot 0 (engine-facts S18), taken from the
    # reserve: one Qwen3.6-27B state, 48 layers × (48·128·128·4 + 10,240·3·2) B = 153,944,064 B more.
    d = json.loads(_run("memory", "--model", "qwen3.6-27b", "--gpu", "rtx-pro-6000", "--json").stdout)
    assert d["allocation"]["state"] - d["state_pool_bytes"] == 153_944_064
    wide = subprocess.run(
        [sys.executable, "-c", RUN, "memory", "--model", "qwen3.6-27b", "--gpu", "rtx-pro-6000"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "state slots (the pool + its padded slot 0, from the reserve)" in wide.stdout


def test_the_running_limit_row_says_what_each_request_holds_under_the_engines_admission():
    # TensorRT-LLM admits a request only with its prompt + max_tokens free: fixed lengths ISL 1,024,
    # OSL 2,500, max_tokens 3,000 count 1,024 + 3,000 = 4,024 tokens each (the row called that
    # "a running request's mean"); SGLang counts the running mean, 1,024 + 2,500 / 2 = 2,274.
    fixed = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--isl", "1024", "--osl", "2500")
    fixed += ("--isl-sigma", "0", "--osl-sigma", "0", "--max-tokens", "3000")
    wide = {**os.environ, "COLUMNS": "200"}  # the row on one line
    memory = [sys.executable, "-c", RUN, "memory", *fixed]
    r = subprocess.run([*memory, "--engine", "trtllm"], capture_output=True, text=True, timeout=300, env=wide)
    assert r.returncode == 0, r.stderr
    assert "running limit (each at 4,024 tokens, its prompt + max_tokens, reserved at admission)" in r.stdout
    assert json.loads(_run("memory", *fixed, "--engine", "trtllm", "--json").stdout)["reserves_whole_output"]
    r = subprocess.run([*memory, "--engine", "sglang"], capture_output=True, text=True, timeout=300, env=wide)
    assert "running limit (each at 2,274 tokens, a running request's mean)" in r.stdout
