"""``plan --tp/--pp/--dp/--ep/--max-running``: a fixed layout part or running cap (issue 29 item 4,
issue 27 item 4).

Cross-checks against the unfixed plan (the TP8 figure its "TP8 is not the best layout" sentence
reports), hand-derived layout counts, the launch flags each engine writes for a fixed cap, and
one-line refusals of bad values from the command line and the job YAML.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.errors import ConfigError, InputError

RUN = "from tokenplan.cli import main; main()"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300)


def test_tp8_on_8xb200_gives_the_tp8_figure_the_unfixed_plan_reports():
    # The default plan says "TP8 is not the best layout on b200: … (TP8: N tok/s, …)": N is the
    # fastest TP8 configuration's throughput. With --tp 8 every candidate is TP8, so the plan's
    # best is that same configuration unless the whole-job ranking prefers another TP8 one.
    free = plan(PlanRequest(gpus=("8xb200",))).to_json()
    sentence = next(s for s in free["answer"] if s.startswith("TP8 is not the best layout on b200"))
    tp8_tok_s = float(re.search(r"\(TP8: ([\d,]+) tok/s", sentence).group(1).replace(",", ""))
    fixed = plan(PlanRequest(gpus=("8xb200",), tp=8)).to_json()
    o = fixed["options"][0]
    assert o["layout"] == "TP8"
    assert round(o["output_tok_s_total"]) == tp8_tok_s
    assert all(a["configuration"].startswith("TP8,") for a in o["alternatives"])
    # the fixed TP is not compared with itself
    assert not any(s.startswith("TP8 is") for s in fixed["answer"])
    # 8 GPUs at TP8: PP stays 1 (TP × PP divides 8) and DP is 1 → one layout (dense: no EP),
    # × 2 weight formats (bf16, fp8 native on B200) × 2 KV (bf16, fp8) × 3 specs (none, mtp:1,
    # mtp:3) = 12, each with a cap-lifted twin under SGLang for this hybrid model: 24.
    assert o["configurations"] == 24


def test_an_alternative_is_never_the_choice_again_with_the_prefix_cache_off():
    # new-user finding: with --max-running 256 the first alternative was the chosen configuration
    # plus ", prefix cache off", at the same 20,615 tok/s and $1,294 (the state slots hold 256 either way)
    o = plan(PlanRequest(gpus=("8xb200",), tp=8, max_running=256)).to_json()["options"][0]
    seen = {(o["best"], round(o["output_tok_s_total"], 6))}
    for a in o["alternatives"]:
        key = (a["configuration"].replace(", prefix cache off", ""), round(a["output_tok_s_total"], 6))
        assert key not in seen, a
        seen.add(key)


def test_tp_an_option_cannot_take_says_why_in_one_line():
    o = plan(PlanRequest(tp=8)).to_json()["options"]
    rtx = next(x for x in o if x["option"] == "4× rtx-pro-6000")
    assert rtx["configurations"] == 0 and "best" not in rtx
    assert rtx["rejected"] == {"TP8 (fixed): TP8 needs 8 GPUs; the option has 4": 1}
    # 8× b200 still runs at TP8
    assert next(x for x in o if x["option"] == "8× b200")["layout"] == "TP8"
    # TP16 on 8× B200 both leaves the NVLink domain and asks for more GPUs than the option has:
    # the option's own count is said (it said "TP stays within one scale-up domain", a new-user pass)
    b200 = plan(PlanRequest(gpus=("8xb200",), tp=16)).to_json()["options"][0]
    assert b200["rejected"] == {"TP16 (fixed): TP16 needs 16 GPUs; the option has 8": 1}


def test_dp_no_layout_has_lists_the_dp_allowed():
    # 8 GPUs: DP = 8 / (TP × PP) with TP × PP ∈ {1, 2, 4, 8} → DP ∈ {8, 4, 2, 1}; 3 is not one.
    o = plan(PlanRequest(gpus=("8xb200",), dp=3)).to_json()["options"][0]
    assert o["rejected"] == {"DP3 (fixed): no layout of 8 GPUs has it; DP is one of 1, 2, 4, 8": 1}


def test_ep_on_a_dense_model_and_on_a_moe_model():
    o = plan(PlanRequest(gpus=("8xb200",), ep=2)).to_json()["options"][0]
    assert o["rejected"] == {"EP2 (fixed): EP splits experts; qwen3.6-27b is dense (EP 1 only)": 1}
    moe = plan(PlanRequest(model="qwen3-30b-a3b", gpus=("8xb200",), ep=8, specs=("none",))).to_json()["options"][0]
    assert "EP8" in moe["layout"]
    assert all("EP8" in a["configuration"] for a in moe["alternatives"])


def test_tp_and_dp_together():
    # 8 GPUs at TP4: PP1 → DP2, PP2 → DP1. --tp 4 --dp 2 keeps TP4×DP2 only.
    o = plan(PlanRequest(gpus=("8xb200",), tp=4, dp=2)).to_json()["options"][0]
    assert o["layout"] == "TP4×DP2"
    # a combination no layout has: TP8 leaves DP 1 on 8 GPUs
    o = plan(PlanRequest(gpus=("8xb200",), tp=8, dp=2)).to_json()["options"][0]
    assert o["rejected"] == {"TP8 × DP2 (fixed): no layout of 8 GPUs has it; DP with TP8 is one of 1": 1}


def test_pp_keeps_the_pipeline_layouts_and_says_which_exist():
    # new-user pass: plan had --tp/--dp/--ep but no --pp, though the search covers PP. 8 GPUs with
    # PP2: TP × DP = 4 → TP1×PP2×DP4, TP2×PP2×DP2, TP4×PP2×DP1 (--spec none: SGLang refuses PP
    # with speculative decoding)
    o = plan(PlanRequest(gpus=("8xb200",), pp=2, specs=("none",))).to_json()["options"][0]
    assert "PP2" in o["layout"]
    assert all("PP2" in a["configuration"] for a in o["alternatives"])
    # PP = 8 / (TP × DP) with TP × DP ∈ {1, 2, 4, 8} → PP ∈ {8, 4, 2, 1}; 3 is not one
    o = plan(PlanRequest(gpus=("8xb200",), pp=3)).to_json()["options"][0]
    assert o["rejected"] == {"PP3 (fixed): no layout of 8 GPUs has it; PP is one of 1, 2, 4, 8": 1}
    # TP8 leaves PP 1 on 8 GPUs; the fixed parts are named in a layout's order, TP before PP
    o = plan(PlanRequest(gpus=("8xb200",), tp=8, pp=2)).to_json()["options"][0]
    assert o["rejected"] == {"TP8 × PP2 (fixed): no layout of 8 GPUs has it; PP with TP8 is one of 1": 1}


def test_pp_on_a_count_it_divides_says_the_search_takes_powers_of_two_and_only_its_own_splits():
    # 6 GPUs: the search splits TP and PP in powers of two (TP ∈ {1, 2, 4}, PP ∈ {1, 2, 4}), so
    # TP2×PP3 and TP1×PP3×DP2 exist (6 = 2 × 3 = 1 × 3 × 2) but are not searched: the reason is
    # the powers of two, not "no layout of 6 GPUs"; the splits dropped for not dividing 6
    # (TP1×PP4, TP2×PP2, TP4) are other PPs than 3 and are not PP3's reasons (they were said first)
    o = plan(PlanRequest(gpus=("6xb200",), pp=3)).to_json()["options"][0]
    assert o["rejected"] == {
        "PP3 (fixed): plan searches PP in powers of two (1, 2, 4, …); PP3 is not one (predict --pp 3 costs it)": 1
    }
    # PP4: of the dropped splits only TP1×PP4 (4 does not divide 6; 4 or 8 GPUs) is PP4's; PP is
    # 1 or 2 among the searched ones (TP1×PP2×DP3, TP2×PP2 dropped, so PP ∈ {1, 2})
    o = plan(PlanRequest(gpus=("6xb200",), pp=4)).to_json()["options"][0]
    assert o["rejected"] == {
        "TP1×PP4: 6 GPUs are not a multiple of 4 (6 = 1×4 + 2); use 4 or 8 GPUs": 1,
        "PP4 (fixed): no layout of 6 GPUs has it; PP is one of 1, 2": 1,
    }


def test_max_running_fixes_every_candidates_cap_and_every_launch_sets_it():
    o = plan(PlanRequest(gpus=("8xb200",), max_running=64)).to_json()["options"][0]
    assert o["max_running_requests"] <= 64 and o["batch_per_replica"] <= 64
    assert "running cap 64" in o["best"]
    assert not any("running cap raised" in a["configuration"] for a in o["alternatives"])
    # one GPU per replica (TP1×DP8 chosen): each engine's cap per rank is ceil(64 / 1) = 64
    assert o["layout"] == "TP1×DP8"
    assert "--max-running-requests 64" in o["launch"]["sglang"]
    assert "--max-num-seqs 64" in o["launch"]["vllm"]
    assert "--max_batch_size 64" in o["launch"]["trtllm"]
    # 1 layout per TP × PP split of 8 GPUs (TP1..8 × PP with TP×PP | 8: 4 + 3 + 2 + 1 = 10) ×
    # 2 weights × 2 KV × 3 specs = 120, each with a radix-cache-off twin (hybrid model on SGLang:
    # with the cache on the state slots ÷ 5 may hold fewer than 64): 240
    assert o["configurations"] == 240


def test_fixing_the_plans_own_cap_gives_the_plans_own_answer():
    # newuser finding 2: --max-running with the cap the free plan recommends used to keep the
    # radix cache on, so SGLang's state slots ÷ 5 held the batch at 162 per replica (41,800
    # against 66,882 tok/s on 8× b200). The fixed cap follows the planner's own rule: tried with
    # and without --disable-radix-cache, the faster kept.
    free = plan(PlanRequest(gpus=("8xb200",))).to_json()["options"][0]
    cap = free["batch_per_replica"]
    assert "running cap raised" in free["best"] and "--disable-radix-cache" in free["launch"]["sglang"]
    fixed = plan(PlanRequest(gpus=("8xb200",), max_running=cap)).to_json()["options"][0]
    assert fixed["layout"] == free["layout"] and fixed["batch_per_replica"] == cap
    assert fixed["output_tok_s_total"] == pytest.approx(free["output_tok_s_total"], rel=1e-9)
    assert f"running cap {cap}, prefix cache off" in fixed["best"]
    assert "--disable-radix-cache" in fixed["launch"]["sglang"]
    assert f"--max-running-requests {cap}" in fixed["launch"]["sglang"]


def test_a_fixed_cap_on_a_model_without_state_has_no_radix_twin():
    # llama-3.1-8b has no linear-attention state: the radix cache never limits its batch, so a
    # fixed cap is one candidate per configuration and SGLang's launch keeps the cache.
    o = plan(PlanRequest(model="llama-3.1-8b", gpus=("8xb200",), max_running=64, specs=("none",))).to_json()
    o = o["options"][0]
    assert "prefix cache off" not in o["best"] and "--disable-radix-cache" not in o["launch"]["sglang"]
    # 10 TP × PP splits (above) × 2 weights × 2 KV × 1 spec = 40, no twins
    assert o["configurations"] == 40


@pytest.mark.parametrize(
    "option,value", [("--tp", "0"), ("--pp", "0"), ("--dp", "-1"), ("--ep", "0"), ("--max-running", "0")]
)
def test_cli_refuses_non_positive_values_in_one_line(option, value):
    r = _cli("plan", option, value)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option.lstrip("-") in lines[0] and value in lines[0] and "integer ≥ 1" in lines[0]


def test_api_refuses_a_fraction():
    with pytest.raises(InputError, match="tp 2.5 is not allowed"):
        plan(PlanRequest(tp=2.5))


def test_job_yaml_keys(tmp_path):
    from tokenplan.api.plan import plan_request

    job = tmp_path / "job.yaml"
    job.write_text("gpus: ['8xb200']\ntp: 8\npp: 1\nmax_running: 64\n", encoding="utf-8")
    req = plan_request(str(job))
    assert (req.tp, req.pp, req.dp, req.ep, req.max_running) == (8, 1, None, None, 64)
    assert plan_request(str(job), tp=4).tp == 4  # an option given wins
    job.write_text("max_running: 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="max_running"):
        plan_request(str(job))


def test_a_fixed_cap_above_what_memory_holds_is_still_the_launchs_cap():
    # The plan's memory is sized for the fixed cap (SGLang reserves speculative state for all of
    # --max-running-requests), so the planned engine's launch sets the cap itself; the batch the
    # plan predicts is what memory holds under it, and says what stops it. The other engines'
    # launches in --json set what their own largest fraction holds where that is less (their
    # warning names the same figure), never more than the cap.
    import re

    o = plan(PlanRequest(gpus=("8xb200",), max_running=4096)).to_json()["options"][0]
    assert o["batch_per_replica"] < 4096 and o["batch_limit_reason"] != "engine cap"
    assert "--max-running-requests 4096" in o["launch"]["sglang"]
    vllm = int(re.search(r"--max-num-seqs (\d+)", o["launch"]["vllm"]).group(1))
    trtllm = int(re.search(r"--max_batch_size (\d+)", o["launch"]["trtllm"]).group(1))
    assert vllm <= 4096 and trtllm <= 4096
    for name, cap in (("vLLM", vllm), ("TensorRT-LLM", trtllm)):
        for said in (w for w in o["warnings"] if w.startswith(f"the {name} launch (in --json)")):
            assert f"caps the batch at {cap:,} per replica" in said


def test_a_fixed_tp_the_model_cannot_split_says_the_models_reason():
    # Qwen3.6-27B has 4 KV heads: TP3 neither divides them nor is divided by them, which is why no
    # layout of 3 GPUs has it (it said "TP is one of 1", the search's powers of two, a new-user pass).
    o = plan(PlanRequest(gpus=("3xb200",), tp=3)).to_json()["options"][0]
    assert o["rejected"] == {
        "TP3 (fixed): TP3 and the 4 KV heads do not divide one another (allowed TP: 1, 2, 4, 8)": 1
    }


def test_the_layout_bullet_names_the_one_replica_layout_it_means():
    # a new-user pass: "TP8 is the right layout on b200." beside a recommendation of TP8×EP8
    # DP-attn (DeepSeek-R1, MoE: the one-replica layouts include EP and attention-DP variants)
    answer = plan(PlanRequest(model="deepseek-r1", gpus=("8xb200",), specs=("none",))).to_json()["answer"]
    best = next(line for line in answer if line.startswith("8× b200: best is "))
    assert best.startswith("8× b200: best is TP8×EP8 DP-attn")
    assert "TP8 is the right layout on b200 (as TP8×EP8 DP-attn)." in answer
