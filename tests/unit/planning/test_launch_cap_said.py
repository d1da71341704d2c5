"""A plan whose printed launch cannot reach the planned batch says so: the warning names the cap
the launch writes (TensorRT-LLM's ``--max_batch_size``) and the batch the figures assume."""

from __future__ import annotations

import re

import pytest

from tokenplan.api.plan import PlanRequest, plan


def test_a_planned_launch_that_caps_below_the_batch_memory_holds_is_what_the_figures_describe():
    # TensorRT-LLM's KV pool stops at its 0.9 fraction: its launch holds fewer requests at the
    # 90th percentile of their context than the pool holds on average. The plan's figures are for
    # the launch it prints: the batch is the launch's --max_batch_size, the configuration names
    # that cap, and no warning is needed for the planned engine.
    o = plan(PlanRequest(gpus=("8xb200",), engine="trtllm")).to_json()["options"][0]
    launched = int(re.search(r"--max_batch_size (\d+)", o["launch"]["trtllm"]).group(1))
    assert o["batch_per_replica"] == launched and f"running cap {launched}" in o["best"]
    assert not [w for w in o["warnings"] if w.startswith("the TensorRT-LLM launch caps the batch")]
    # the cap is the launch's (HEADROOM_QUANTILE 0.9: the 90th percentile), not TensorRT-LLM's default
    assert o["batch_limit_reason"] == "launch cap for the p90 context"


def test_the_planned_launch_holds_its_batch_and_another_engines_lower_cap_is_said():
    o = plan(PlanRequest(gpus=("8xb200",))).to_json()["options"][0]  # SGLang raises its fraction to hold it
    assert not [w for w in o["warnings"] if w.startswith("the SGLang launch")]
    assert f"--max-running-requests {o['batch_per_replica']}" in o["launch"]["sglang"]
    # the TensorRT-LLM command in --json reserves each request's prompt + 32,768 max_tokens: it
    # launches far fewer, and says so (the in-flight count stays SGLang's: 406 + 41 = 447)
    launched = int(re.search(r"--max_batch_size (\d+)", o["launch"]["trtllm"]).group(1))
    (said,) = [w for w in o["warnings"] if w.startswith("the TensorRT-LLM launch (in --json)")]
    assert f"caps the batch at {launched:,} per replica, not the {o['batch_per_replica']:,} planned" in said
    assert "prompt + max_tokens at admission" in said
    assert o["concurrency_per_endpoint"] == o["batch_per_replica"] + -(-o["batch_per_replica"] // 10)


def test_trtllm_plans_reserve_each_requests_max_tokens():
    # generate --plan sends the plan's output cap (32,768) as every request's max_tokens, and
    # trtllm-serve's GUARANTEED_NO_EVICT reserves prompt + max_tokens per running request, so the
    # running batch times (mean ISL 1,024 + 32,768) fits the replica's KV pool (the hybrid state
    # shares it too); with each answer's own length as its limit the same GPU runs far more
    from dataclasses import replace

    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest

    ask = PredictRequest(model="qwen3.6-27b", gpu="b200", engine="trtllm", weight_dtype="fp8", osl_cap=32_768)
    capped = predict(ask).to_json()
    reserved = 1024 + 32_768
    assert capped["batch_per_replica"] * reserved <= capped["kv_capacity_tokens"]
    own = predict(replace(ask, osl_cap=None)).to_json()  # the answers' own lengths reserved
    assert own["batch_per_replica"] > 2 * capped["batch_per_replica"]


def test_a_fixed_cap_the_launch_lowers_is_said_and_the_formats_bullet_is_at_its_own_launch_cap():
    # Llama-3.1-8B on 8x H200 with --max-running 500: SGLang's launch holds 432 at the 90th
    # percentile, so the leader runs 432 and says the 500 was lowered; the BF16 comparison bullet
    # names the cap its own launch prints, as a plan of BF16 alone does (a break-it pass found
    # "running cap 500" there, a cap no launch prints).
    req = PlanRequest(model="llama-3.1-8b", gpus=("8xh200",), engine="sglang", max_running=500)
    o = plan(req).to_json()
    option = o["options"][0]
    launched = int(re.search(r"--max-running-requests (\d+)", option["launch"]["sglang"]).group(1))
    assert option["batch_per_replica"] == launched < 500
    assert any(w.startswith(f"the running cap 500 is lowered to {launched} per replica") for w in option["warnings"])
    bf16 = plan(PlanRequest(**{**req.__dict__, "weight_dtypes": ("bf16",), "kv_dtypes": ("bf16",)})).to_json()
    alone = bf16["options"][0]
    bullet = next(a for a in o["answer"] if "with BF16 weights and KV" in a)
    assert f"({alone['best']}) {alone['output_tok_s_total']:,.0f} tok/s" in bullet, (bullet, alone["best"])


def test_every_printed_launch_of_a_fixed_cap_plan_sets_the_cap_its_warning_names():
    # Llama-3.1-8B on 8x H200: the plan fixes "running cap 432" (SGLang's launch holds 432 at the
    # 90th percentile). TensorRT-LLM's launch in --json holds 56 at its largest fraction (it
    # reserves prompt + max_tokens) and the warning says so; its --max_batch_size printed 432, the
    # fixed cap, beside that warning (a break-it pass). Each command now sets min(its own, fixed).
    o = plan(PlanRequest(model="llama-3.1-8b", gpus=("8xh200",))).to_json()["options"][0]
    fixed = int(re.search(r"running cap (\d+)", o["best"]).group(1))
    (said,) = [w for w in o["warnings"] if w.startswith("the TensorRT-LLM launch (in --json)")]
    warned = int(re.search(r"caps the batch at ([\d,]+) per replica", said).group(1).replace(",", ""))
    trtllm = int(re.search(r"--max_batch_size (\d+)", o["launch"]["trtllm"]).group(1))
    assert trtllm == warned < fixed
    assert (
        f"--max-running-requests {fixed}" in o["launch"]["sglang"] and f"--max-num-seqs {fixed}" in o["launch"]["vllm"]
    )


def test_vllm_speculating_on_a_hybrid_model_says_its_held_out_miss():
    # data/checks/vllm-google-qwen35-27b-b200.csv: vLLM MTP k=1 on Qwen3.5-27B measured 3,833 tok/s
    # per B200 against 4,906 predicted for vLLM 0.18 (3,833 / 4,906 = 0.781: "0.78x"; `tokenplan
    # validate data/checks/vllm-google-qwen35-27b-b200.csv`). A vLLM plan on the hybrid
    # model that speculates carries the caveat (a new-user pass saw vLLM 47 % ahead of SGLang with
    # no word of it); SGLang's plan and a vLLM setup without speculation do not.
    o = plan(PlanRequest(gpus=("8xb200",), engine="vllm", specs=("mtp:1",))).to_json()["options"][0]
    assert any("ran at 0.78x the tok/s predicted for its vLLM release" in w for w in o["warnings"])
    plain = plan(PlanRequest(gpus=("8xb200",), engine="vllm", specs=("none",))).to_json()["options"][0]
    assert not any("outside the measured regime" in w for w in plain["warnings"])
    sglang = plan(PlanRequest(gpus=("8xb200",), specs=("mtp:1",))).to_json()["options"][0]
    assert not any("outside the measured regime" in w for w in sglang["warnings"])


def test_a_job_of_one_request_runs_one_and_a_small_job_says_its_own_average():
    # One request on 8x H100 (TP8, one replica): the batch is 1 and the client keeps 1 + 8 in
    # flight (QUEUE_HEADROOM_MIN); the launch-cap step re-evaluated it offline at 1,637 running
    # with 1,801 in flight (a break-it pass). Its rate is its own: 2,500 tokens over the wall time
    # after the servers' start-up (215 s by default, counted in the days and dollars).
    answer = plan(PlanRequest(model="qwen3-8b", gpus=("8xh100-sxm",), samples=1)).to_json()
    one, startup_s = answer["options"][0], answer["job"]["startup_s"]
    assert startup_s == 215.0
    assert (one["batch_per_replica"], one["concurrency_per_endpoint"]) == (1, 9)
    assert one["output_tok_s_total"] == pytest.approx(2500 / (one["wall_days"] * 86400 - startup_s), rel=0.02)
    # 100 requests: the table's rate is the steady one at a batch of 100, and the answer says what
    # the job averages (100 × 2,500 tokens over its wall time), which the tail of long answers
    # holds to well below it
    small = plan(PlanRequest(model="qwen3-8b", gpus=("8xh100-sxm",), samples=100)).to_json()
    o = small["options"][0]
    average = 100 * 2500 / (o["wall_days"] * 86400)
    (said,) = [a for a in small["answer"] if "too small to run at the steady rate" in a]
    assert f"it averages {average:,.0f} tok/s" in said and f"{o['output_tok_s_total']:,.0f} tok/s the table" in said
    assert average < 0.8 * o["output_tok_s_total"] and "the servers take 3.58 min to start" in said


def test_a_launch_cap_above_a_small_jobs_batch_is_not_said_to_cap_it():
    # 100 requests on one B200 (one replica): every request is in flight at once, so the batch the
    # figures assume is 100, below the running limit memory allows. SGLang's launch holds more than
    # 100 at the 90th percentile of their context: no warning that it caps the batch (it said
    # "caps the batch at 215 per replica, not the 234 planned ... the figures above assume the
    # planned batch" beside a batch of 100). TensorRT-LLM's launch, reserving prompt + 32,768
    # max_tokens per request, holds fewer than 100, and its warning names the 100 the figures assume.
    o = plan(PlanRequest(model="qwen3-32b", gpus=("1xb200",), engine="sglang", samples=100)).to_json()["options"][0]
    assert o["batch_per_replica"] == 100
    sglang = int(re.search(r"--max-running-requests (\d+)", o["launch"]["sglang"]).group(1))
    assert sglang >= 100
    assert not [w for w in o["warnings"] if w.startswith("the SGLang launch caps the batch")]
    trtllm = int(re.search(r"--max_batch_size (\d+)", o["launch"]["trtllm"]).group(1))
    (said,) = [w for w in o["warnings"] if w.startswith("the TensorRT-LLM launch (in --json)")]
    assert trtllm < 100 and f"caps the batch at {trtllm:,} per replica, not the 100 planned" in said


def test_a_cap_under_attention_dp_says_what_each_rank_is_given(tmp_path):
    # a new-user pass: "caps the batch at 138 per replica" beside a TensorRT-LLM command writing
    # --max_batch_size 18 (per attention-DP rank, ⌈138 / 8⌉ = 18: 144 in all) read as a mismatch.
    import json

    from tests.support.model_configs import llama4_scout

    (tmp_path / "config.json").write_text(json.dumps(llama4_scout()))
    result = plan(PlanRequest(model=str(tmp_path), gpus=("8xh100-sxm",), isl_mean=1024, osl_mean=1024)).to_json()
    said = " ".join(result["options"][0]["warnings"])
    m = re.search(r"TensorRT-LLM launch \(in --json\) caps the batch at ([\d,]+) per replica", said)
    assert m is not None, said
    total = int(m.group(1).replace(",", ""))
    per_rank = -(-total // 8)  # ⌈total / 8⌉ over TP8's attention-DP ranks
    assert f"(its command writes ⌈{total:,} / 8⌉ = {per_rank:,} per attention-DP rank)" in said
