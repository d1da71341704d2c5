"""``predict`` defaults to ``plan``'s job (issue 29: "`predict` defaults (lengths, BF16) differ
from `plan`'s"): a plan's chosen configuration, predicted with no length options, gives the
plan's own figure."""

from __future__ import annotations

import json
import subprocess
import sys

from tokenplan.api.plan import PlanRequest, plan

RUN = "from tokenplan.cli import main; main()"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300)


def test_the_plans_choice_predicts_as_the_plan_did():
    # The default plan on 8× b200 chooses TP1×DP8, fp8 weights, fp8 KV, no speculation, with the
    # running cap raised (SGLang --disable-radix-cache on this hybrid model), offline; predict of
    # that configuration with the default lengths must give the same steady-state throughput,
    # because both now evaluate the same capped lognormal lengths (mean 1,024 σ 0.8 cap 16,384;
    # mean 2,500 σ 1.0 cap 32,768, means of the capped lengths).
    o = plan(PlanRequest(gpus=("8xb200",), specs=("none",))).to_json()["options"][0]
    assert (o["layout"], o["weight_dtype"], o["kv_dtype"], o["spec"], o["non_default_settings"]) == (
        "TP1×DP8",
        "fp8",
        "fp8",
        "none",
        True,
    )
    r = _cli(
        "predict",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "b200",
        "--num-gpus",
        "8",
        "--tp",
        "1",
        "--weight-dtype",
        "fp8",
        "--kv-dtype",
        "fp8",
        "--disable-radix-cache",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["output_tok_s_total"] == o["output_tok_s_total"]
    assert p["batch_per_replica"] == o["batch_per_replica"]
    # the old defaults (fixed 1,024 in and out) are a different point: explicit values still give it
    old = _cli(
        "predict",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "b200",
        "--num-gpus",
        "8",
        "--tp",
        "1",
        "--weight-dtype",
        "fp8",
        "--kv-dtype",
        "fp8",
        "--disable-radix-cache",
        "--isl",
        "1024",
        "--osl",
        "1024",
        "--isl-sigma",
        "0",
        "--osl-sigma",
        "0",
        "--json",
    )
    assert json.loads(old.stdout)["output_tok_s_total"] != p["output_tok_s_total"]


def test_help_states_the_defaults():
    r = _cli("predict", "--help")
    text = " ".join(r.stdout.split())
    for needle in (
        "[default: plan's job: 1024]",
        "[default: plan's job: 2500]",
        "[default: plan's job: 0.8]",
        "[default: plan's job: 1.0]",
        "plan's job: 16384",
        "plan's job: 32768",
        "released format",
    ):
        assert needle in text, needle


def test_a_cap_at_or_below_the_mean_is_refused_in_one_line():
    r = _cli("predict", "--model", "qwen3.6-27b", "--gpu", "b200", "--osl", "4000", "--max-tokens", "3000")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: --max-tokens 3000 is not allowed (allowed: a number of tokens above the mean osl 4000 and at most 16,777,216)"
    ]
    r = _cli("predict", "--model", "qwen3.6-27b", "--gpu", "b200", "--isl", "2048", "--isl-cap", "1000")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "isl-cap 1000" in r.stderr
