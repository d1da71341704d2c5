"""The separately loaded drafter (EAGLE, EAGLE-3, DFlash): its parameters from the target's shape
(arch.draft), and its weights and KV cache in each engine's memory, against hand arithmetic."""

from __future__ import annotations

import pytest

from tokenplan.arch.draft import draft_kv_layers, draft_params
from tokenplan.catalog import load_engine, load_gpu, load_model
from tokenplan.perf.layout import Layout
from tokenplan.perf.memory import memory_breakdown
from tokenplan.units import Dtype

# Qwen3.5-27B (catalog config): h 5,120, 24 heads × 256, 4 KV heads × 256, dense FFN 17,408.
# A drafter layer: q and o 2·5,120·6,144 = 62,914,560; k and v 5,120·4·(256 + 256) = 10,485,760;
# FFN 3·5,120·17,408 = 267,386,880 → 340,787,200.
QWEN27_LAYER = 340_787_200


def test_dflash_drafter_of_qwen3_5_27b_is_five_target_shaped_layers_and_fc():
    # 5·340,787,200 = 1,703,936,000; fc 5 taps · 5,120 · 5,120 = 131,072,000 → 1,835,008,000.
    assert draft_params(load_model("qwen3.5-27b"), "dflash", 5) == 1_835_008_000


def test_dflash_drafter_bytes_sit_under_the_measured_memory_it_adds():
    # Aryagm/dflash-mlx issue #2: Qwen3.5-27B BF16 took 54.33 GB, 58.25 GB with its DFlash drafter:
    # +3.92 GB, the drafter's weights and its cache and buffers. 1,835,008,000 · 2 B = 3.67 GB is
    # below that and within the buffers' few hundred MB of it.
    drafter_gb = draft_params(load_model("qwen3.5-27b"), "dflash", 5) * 2 / 1e9
    assert drafter_gb == pytest.approx(3.670016)
    assert 0.85 * 3.92 < drafter_gb < 3.92


def test_eagle3_has_a_wide_qkv_a_three_layer_fc_and_its_own_small_lm_head():
    # one layer 340,787,200; q/k/v read 2h: + 5,120·(6,144 + 2,048) = 41,943,040; fc 3·5,120² =
    # 78,643,200; lm_head 5,120·32,000 = 163,840,000 → 625,213,440.
    assert draft_params(load_model("qwen3.5-27b"), "eagle3", 1) == 625_213_440
    # EAGLE-1/2: one layer and fc 2·5,120² = 52,428,800 → 393,216,000, the target's lm_head.
    assert draft_params(load_model("qwen3.5-27b"), "eagle", 1) == 393_216_000


def test_an_moe_targets_drafter_has_a_dense_ffn_three_times_its_hidden_size():
    # Qwen3.5-35B-A3B: h 2,048, 16 heads × 256, 2 KV heads × 256; FFN 3·2,048 = 6,144 wide
    # (z-lab/Qwen3.5-122B-A10B-DFlash: 9,216 = 3 · 3,072). A layer: 2·2,048·4,096 = 16,777,216,
    # 2,048·2·512 = 2,097,152, 3·2,048·6,144 = 37,748,736 → 56,623,104; DFlash 5 layers
    # 283,115,520 + fc 5·2,048² = 20,971,520 → 304,087,040.
    assert draft_params(load_model("qwen3.5-35b-a3b"), "dflash", 5) == 304_087_040


def test_mtp_brings_no_drafter_and_its_own_layers_hold_kv():
    model = load_model("qwen3.5-27b")  # mtp_num_hidden_layers 1
    assert draft_params(model, "mtp", 1) == 0
    assert (draft_kv_layers(model, "mtp", 1), draft_kv_layers(model, "dflash", 5)) == (1, 5)
    with pytest.raises(ValueError, match="unknown speculative method"):
        draft_params(model, "medusa", 1)


def _memory(engine_name: str, draft: tuple[str, int] | None, tp: int = 1):
    model, gpu, engine = load_model("qwen3.5-27b"), load_gpu("b200"), load_engine(engine_name)
    settings = engine.settings(gpu, Layout(tp=tp), speculative=draft is not None)
    return memory_breakdown(
        model,
        gpu,
        Layout(tp=tp),
        Dtype.BF16,
        Dtype.BF16,
        settings,
        None,
        draft=draft,
        draft_kv_pool=engine.pools.draft_kv_pool,
        spec_state_copies=engine.spec_state_copies(draft[1] if draft else None),
    )


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_vllm_and_trtllm_keep_the_mtp_layers_kv_in_the_one_pool(engine):
    # Qwen3.5-27B BF16 KV: 16 attention layers · 4 heads · (256 + 256) · 2 B = 65,536 B per token;
    # the MTP layer adds one more 4,096 B → 69,632 B of the pool per token, and of what the pool
    # holds at any running count 4,096 / 69,632 = 1/17 is the draft's.
    m = _memory(engine, ("mtp", 1))
    assert (m.kv_bytes_per_token_per_gpu, m.draft_kv_bytes_per_token_per_gpu) == (65_536, 4_096)
    assert m.draft_kv_shared and m.pool_kv_bytes_per_token_per_gpu == 69_632
    a = m.allocation(64)
    assert a["draft_kv"] / (a["kv_cache"] + a["draft_kv"]) == pytest.approx(1 / 17, rel=1e-12)
    assert sum(a.values()) == pytest.approx(m.gpu_bytes, rel=1e-12)
    assert m.kv_tokens_beside(64) == pytest.approx((a["kv_cache"] + a["draft_kv"]) / 69_632, rel=1e-12)


def test_sglang_gives_the_draft_a_pool_of_its_own_from_the_reserve():
    m = _memory("sglang", ("mtp", 1))
    assert not m.draft_kv_shared and m.pool_kv_bytes_per_token_per_gpu == 65_536
    a = m.allocation(48)
    # the draft pool holds as many tokens as the target's: kv_cache / 65,536 · 4,096
    assert a["draft_kv"] == pytest.approx(a["kv_cache"] / 16, rel=1e-12)


def test_a_dflash_drafter_sharded_by_tp_joins_the_weights():
    # TP2: the drafter's 1,835,008,000 BF16 parameters, 3,670,016,000 B, half on each GPU.
    without, with_drafter = _memory("vllm", None, tp=2), _memory("vllm", ("dflash", 5), tp=2)
    assert with_drafter.weight_bytes_per_gpu - without.weight_bytes_per_gpu == pytest.approx(1_835_008_000)
    assert with_drafter.draft_weight_bytes_per_gpu == pytest.approx(1_835_008_000)
    # its five layers' KV at TP2: 5 · 2 KV heads · (256 + 256) · 2 B = 10,240 B per token per GPU
    assert with_drafter.draft_kv_bytes_per_token_per_gpu == 10_240
