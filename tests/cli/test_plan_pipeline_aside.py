"""A pipeline-parallel layout on an engine no fit row runs with PP is not recommended on the
model's figures alone (planning.measured): a new-user pass saw ``plan --engine vllm --model
llama-3.1-8b --gpu 8xh200`` recommend TP1×PP2×DP4 for an 8B model on 141 GB GPUs, 0.17 % ahead of
TP1×DP8, while the same plan said the PP layout was outside the measured regime."""

from __future__ import annotations

from tokenplan.api.plan import PlanRequest, plan

_8B_H200 = dict(model="llama-3.1-8b", gpus=("8xh200",), engine="vllm")


def _pp(option: dict) -> int:
    return int(option["layout"].split("PP")[1].split("×")[0]) if "PP" in option["layout"] else 1


def test_vllm_recommends_a_measured_layout_and_says_what_the_pp_one_would_give():
    o = plan(PlanRequest(**_8B_H200)).to_json()
    chosen = o["options"][0]
    assert _pp(chosen) == 1 and "--pipeline-parallel-size" not in chosen["launch"]["vllm"]
    # --pp 2 fixed: nothing measured runs, so the PP layout is planned (with its widened band)
    forced = plan(PlanRequest(**_8B_H200, pp=2)).to_json()["options"][0]
    assert _pp(forced) == 2 and "--pipeline-parallel-size 2" in forced["launch"]["vllm"]
    # PP2 halves the weights each GPU holds, so its KV pool holds more requests and the model puts
    # it ahead; the plan then says so, with the figure --pp 2 plans, and why it is not launched
    assert forced["output_tok_s_total"] > chosen["output_tok_s_total"]
    (aside,) = [line for line in o["answer"] if "no fit row runs vllm with pipeline parallelism" in line]
    assert f"{forced['output_tok_s_total']:,.0f} tok/s" in aside and "--pp 2 plans the PP one anyway" in aside


def test_an_engine_whose_pp_rows_are_in_the_fit_is_ranked_as_the_model_says():
    # TensorRT-LLM runs PP in fit rows (error_bands.json pipeline_engines): no PP layout is set aside
    o = plan(PlanRequest(model="llama-3.1-8b", gpus=("8xh200",), engine="trtllm")).to_json()
    assert not any("with pipeline parallelism" in line for line in o["answer"])


def test_a_pp_setup_the_user_measured_on_this_engine_is_not_set_aside():
    # --current measured vLLM TP1×PP2 at 90,000 tok/s: that engine's PP layouts are measured for this
    # plan (as a measured speculative setup is), so PP2 may lead; measured on SGLang, vLLM's PP stays
    # unmeasured (a break-it pass: the plan called the user's own measured layout unmeasured)
    current = "engine=vllm,tp=1,pp=2,weight-dtype=fp8,kv-dtype=fp8"
    o = plan(PlanRequest(**_8B_H200, current=current, measured_tok_s=90_000)).to_json()
    assert _pp(o["options"][0]) == 2
    # the engine as --current reads it: the plan's when left out, in any spelling (a break-it pass)
    for spelled in (current.removeprefix("engine=vllm,"), current.replace("vllm", "VLLM")):
        assert _pp(plan(PlanRequest(**_8B_H200, current=spelled, measured_tok_s=90_000)).to_json()["options"][0]) == 2
    assert not any("no fit row runs vllm with pipeline parallelism, so" in line for line in o["answer"])
    other = PlanRequest(**_8B_H200, current=current.replace("vllm", "sglang"), measured_tok_s=90_000)
    assert _pp(plan(other).to_json()["options"][0]) == 1
