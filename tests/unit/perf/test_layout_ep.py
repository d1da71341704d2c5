"""EP lives inside one pipeline stage: every engine builds its expert groups from a stage's TP
ranks (SGLang ``distributed/parallel_state.py`` ``initialize_model_parallel``: moe_tp_size =
tp_size // ep_size, EP groups strided inside each TP group, so EP > TP gives a step of 0; vLLM's
EP spans TP × DP, never PP; TRT-LLM's Mapping splits tp_size into moe_tp × moe_ep). A TP4 × PP4
replica can run EP4, not EP16."""

from __future__ import annotations

from tokenplan.catalog import load_gpu, load_model
from tokenplan.perf.layout import Layout, layout_rejection
from tokenplan.planning.space import layouts


def test_ep_must_divide_tp_not_tp_times_pp():
    r1 = load_model("deepseek-r1")  # 256 routed experts
    assert layout_rejection(r1, Layout(tp=4, pp=4, ep=4)) is None
    assert layout_rejection(r1, Layout(tp=4, pp=4, ep=16)) == (
        "EP16 must divide TP4 (EP splits the experts over one pipeline stage's TP ranks: e.g. tp 16 with ep 16)"
    )
    assert layout_rejection(r1, Layout(tp=8, ep=8)) is None


def test_the_search_offers_ep_equal_to_tp_with_pipeline_stages():
    # 16 H100: TP4 × PP4 gets the EP variant EP4 (TP4 × PP4 EP4), never EP16; TP1 × PP2 none.
    found = layouts(load_model("deepseek-r1"), load_gpu("h100-sxm"), 16)
    assert Layout(tp=4, pp=4, ep=4) in found and Layout(tp=4, pp=4, ep=16) not in found
    assert all(lay.ep in (1, lay.tp) for lay in found)
    assert not any(lay.tp == 1 and lay.ep > 1 for lay in found)


def test_marlin_padding_pads_the_experts_tp_share_of_one_stage():
    # gpt-oss-120b (hidden 2,880, expert intermediate 2,880) MXFP4 through Marlin: hidden → 3,072;
    # TP2 × PP2 without EP shards each expert over a stage's 2 TP ranks, 1,440 → 1,536 (not
    # 2,880 / 4 = 720 → 768: pipeline stages hold different layers, not expert slices); with EP2
    # each expert is whole on one rank, 2,880 → 2,944.
    from tokenplan.perf.memory import _expert_pad_factor

    f = _expert_pad_factor(load_model("gpt-oss-120b"), Layout(tp=2, pp=2), (256, 128))
    assert f == 3072 * 1536 / (2880 * 1440)
    assert _expert_pad_factor(load_model("gpt-oss-120b"), Layout(tp=2, pp=2, ep=2), (256, 128)) == 3072 * 2944 / (
        2880 * 2880
    )


def test_a_tp_that_splits_the_linear_value_heads_but_not_the_key_heads_names_the_key_heads():
    # Qwen3.6-27B: 24 attention heads, 4 KV heads, 16 linear-attention key heads, 48 value heads.
    # TP12 splits the attention (24 / 12 = 2; 12 / 4 = 3) and the value heads (48 / 12 = 4), not
    # the key heads (16 / 12 and 12 / 16 are not whole): it said "does not divide the 48 value heads".
    model = load_model("qwen3.6-27b")
    lin = model.linear
    assert lin is not None and (lin.num_k_heads, lin.num_v_heads) == (16, 48)
    why = layout_rejection(model, Layout(tp=12))
    assert why is not None and why.startswith("TP12 and the 16 linear-attention key heads do not divide one another")
    assert (layout_rejection(model, Layout(tp=32)) or "").startswith("TP32 does not divide the 24 attention heads")
