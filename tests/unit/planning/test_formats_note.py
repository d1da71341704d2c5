"""The plan names the formats it chose and shows the BF16-weights-and-KV twin of its answer.

The twin's figures are checked against a separate plan restricted to BF16 weights and BF16 KV
(``--weight-dtype bf16 --kv-dtype bf16``): that search's leader is the option's fastest BF16
configuration, so its tok/s, days and dollars are what the note must print.
"""

from __future__ import annotations

import pytest

from tokenplan.api.plan import PlanRequest, plan


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_recommended_option_states_its_formats_and_its_bf16_twin(engine: str):
    # vllm: on the hybrid Qwen3.6-27B its MTP figures are an upper bound set aside for plain
    # decoding (planning.search.measured_first), in the BF16 plan as in this one; the note named the
    # BF16 MTP configuration (mtp k=1, 47,861 tok/s) the BF16 plan does not recommend (a break-it pass)
    result = plan(PlanRequest(gpus=("8xb200",), engine=engine)).to_json()
    bf16 = plan(PlanRequest(gpus=("8xb200",), engine=engine, weight_dtypes=("bf16",), kv_dtypes=("bf16",))).to_json()
    best = result["options"][0]
    twin = bf16["options"][0]
    assert twin["weight_dtype"] == twin["kv_dtype"] == "bf16"
    note = next(line for line in result["answer"] if "BF16 weights and KV" in line)
    assert note == (
        f"8× b200: {best['weight_dtype']} weights and {best['kv_dtype']} KV chosen, the fastest of the "
        f"formats searched; with BF16 weights and KV ({twin['best']}) {twin['output_tok_s_total']:,.0f} "
        f"tok/s → {twin['wall_days']:.2f} days, ${twin['usd']:,.0f}."
    )
    # FP8 is chosen because it is faster: the twin is slower
    assert twin["output_tok_s_total"] < best["output_tok_s_total"]


def test_a_plan_that_runs_bf16_says_nothing_about_a_twin():
    result = plan(PlanRequest(gpus=("8xb200",), weight_dtypes=("bf16",), kv_dtypes=("bf16",))).to_json()
    assert not any("BF16 weights and KV" in line for line in result["answer"])
