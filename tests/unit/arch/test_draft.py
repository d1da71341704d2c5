"""The separately loaded drafter (EAGLE, EAGLE-3, DFlash): its parameters from the target's shape
(arch.draft), and its weights and KV cache in each engine's memory, against hand arithmetic."""

from __future__ import annotations

import json

import pytest

from tokenplan.api.memory import memory
from tokenplan.api.resolve import PredictRequest
from tokenplan.arch.draft import draft_kv_layers, draft_params, drafter_shape
from tokenplan.catalog import load_engine, load_gpu, load_model
from tokenplan.errors import ConfigError, InputError
from tokenplan.files.drafter import attach_drafter
from tokenplan.job.results import MemoryResult
from tokenplan.perf.layout import Layout
from tokenplan.perf.memory import memory_breakdown
from tokenplan.perf.speculative import SpecDecode
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


def _memory(engine_name: str, draft: SpecDecode | None, tp: int = 1):
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
        spec_state_copies=engine.spec_state_copies(draft.draft_tokens if draft else None),
    )


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_vllm_and_trtllm_keep_the_mtp_layers_kv_in_the_one_pool(engine):
    # Qwen3.5-27B BF16 KV: 16 attention layers · 4 heads · (256 + 256) · 2 B = 65,536 B per token;
    # the MTP layer adds one more 4,096 B → 69,632 B of the pool per token, and of what the pool
    # holds at any running count 4,096 / 69,632 = 1/17 is the draft's.
    m = _memory(engine, SpecDecode("mtp", 1, 1.8))
    assert (m.kv_bytes_per_token_per_gpu, m.draft_kv_bytes_per_token_per_gpu) == (65_536, 4_096)
    assert m.draft_kv_shared and m.pool_kv_bytes_per_token_per_gpu == 69_632
    a = m.allocation(64)
    assert a["draft_kv"] / (a["kv_cache"] + a["draft_kv"]) == pytest.approx(1 / 17, rel=1e-12)
    assert sum(a.values()) == pytest.approx(m.gpu_bytes, rel=1e-12)
    assert m.kv_tokens_beside(64) == pytest.approx((a["kv_cache"] + a["draft_kv"]) / 69_632, rel=1e-12)


def test_sglang_gives_the_draft_a_pool_of_its_own_from_the_reserve():
    m = _memory("sglang", SpecDecode("mtp", 1, 1.8))
    assert not m.draft_kv_shared and m.pool_kv_bytes_per_token_per_gpu == 65_536
    a = m.allocation(48)
    # the draft pool holds as many tokens as the target's: kv_cache / 65,536 · 4,096
    assert a["draft_kv"] == pytest.approx(a["kv_cache"] / 16, rel=1e-12)


def test_a_dflash_drafter_sharded_by_tp_joins_the_weights():
    # TP2: the drafter's 1,835,008,000 BF16 parameters, its layers' 1,703,936,000 halved on each
    # GPU and its fc's 5 · 5,120² = 131,072,000 whole on each (vLLM's ReplicatedLinear):
    # (851,968,000 + 131,072,000) · 2 B = 1,966,080,000 B per GPU.
    without, with_drafter = _memory("vllm", None, tp=2), _memory("vllm", SpecDecode("dflash", 7, 4.0, 5), tp=2)
    assert with_drafter.weight_bytes_per_gpu - without.weight_bytes_per_gpu == pytest.approx(1_966_080_000)
    assert with_drafter.draft_weight_bytes_per_gpu == pytest.approx(1_966_080_000)
    # its five layers' KV at TP2: 5 · 2 KV heads · (256 + 256) · 2 B = 10,240 B per token per GPU
    assert with_drafter.draft_kv_bytes_per_token_per_gpu == 10_240


# A DFlash drafter's config.json as z-lab writes one (architectures, qwen3 layers, dflash_config),
# shaped for Qwen3.6-27B: h 5,120, 5 layers, 32 heads × 128, 8 KV heads, FFN 17,408, 5 taps.
DFLASH_CONFIG = {
    "architectures": ["DFlashDraftModel"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "num_hidden_layers": 5,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 17408,
    "vocab_size": 248320,
    "dflash_config": {"block_size": 16, "target_layer_ids": [1, 16, 31, 46, 61]},
}


def test_a_dflash_config_json_gives_the_drafters_own_shape():
    # A layer: q and o 2·5,120·4,096 = 41,943,040; k and v 5,120·2·8·128 = 10,485,760; FFN
    # 3·5,120·17,408 = 267,386,880 → 319,815,680; 5 layers 1,599,078,400 + fc 5·5,120² =
    # 131,072,000 → 1,730,150,400.
    shape = drafter_shape(DFLASH_CONFIG, "config.json", "dflash")
    assert (shape.params, shape.layers, shape.kv_heads, shape.head_dim) == (1_730_150_400, 5, 8, 128)


def test_an_eagle3_config_json_counts_its_wide_first_layer_fc_and_lm_head():
    # yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's shape: h 4,096, 1 layer, 32 heads × 128, 8 KV heads,
    # FFN 14,336, draft_vocab_size 32,000. Layer: 2·4,096·4,096 = 33,554,432 + 4,096·2·8·128 =
    # 8,388,608 + 3·4,096·14,336 = 176,160,768 → 218,103,808; its q/k/v read 2h: + 4,096·(4,096 +
    # 2,048) = 25,165,824; fc 3·4,096² = 50,331,648; lm_head 4,096·32,000 = 131,072,000
    # → 424,673,280.
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": 4096,
        "num_hidden_layers": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "draft_vocab_size": 32000,
    }
    assert drafter_shape(cfg, "config.json", "eagle3").params == 424_673_280


@pytest.mark.parametrize(
    ("change", "method", "key"),
    [
        ({}, "eagle3", "architectures"),  # a DFlash drafter named for EAGLE-3
        ({"num_hidden_layers": 0}, "dflash", "num_hidden_layers"),
        ({"hidden_size": "5120"}, "dflash", "hidden_size"),
        ({"dflash_config": {}}, "dflash", "dflash_config.target_layer_ids"),
    ],
)
def test_a_malformed_drafter_config_is_refused_naming_the_key(change, method, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        drafter_shape({**DFLASH_CONFIG, **change}, "config.json", method)


def test_draft_model_reads_a_folder_names_a_repository_and_refuses_the_rest(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(DFLASH_CONFIG))
    base = SpecDecode("dflash", 7, 4.0, 5)
    got = attach_drafter(base, str(tmp_path))
    assert got is not None and got.drafter is not None and got.draft_model == str(tmp_path.resolve())
    assert got.draft_layers == 5 and got.drafter.params == 1_730_150_400
    repo = attach_drafter(base, "z-lab/Qwen3.6-27B-DFlash")  # named in the launches, shape the target's
    assert repo is not None and repo.draft_model == "z-lab/Qwen3.6-27B-DFlash" and repo.drafter is None
    for refused, spec in (
        (str(tmp_path / "missing"), base),
        ("./nope", base),
        (str(tmp_path), SpecDecode("mtp", 1, 1.8)),
        (str(tmp_path), None),
    ):
        with pytest.raises(InputError, match="draft_model"):
            attach_drafter(spec, refused)


def test_memory_of_a_drafter_read_from_its_config_json(tmp_path):
    # Qwen3.6-27B under vLLM, TP1, BF16: the drafter's 1,730,150,400 parameters add 3,460,300,800 B;
    # its 5 layers × 8 KV heads × 2 × 128 × 2 B = 20,480 B per token join the pool's 65,536 B.
    (tmp_path / "config.json").write_text(json.dumps(DFLASH_CONFIG))
    base = dict(model="qwen3.6-27b", gpu="b200", engine="vllm", weight_dtype="bf16", kv_dtype="bf16")
    plain = memory(PredictRequest(**base, spec="dflash:7"))
    read = memory(PredictRequest(**base, spec="dflash:7", draft_model=str(tmp_path)))
    assert isinstance(plain, MemoryResult) and isinstance(read, MemoryResult)
    assert read.draft_weight_bytes_per_gpu == 3_460_300_800
    assert read.draft_kv_bytes_per_token_per_gpu == 20_480
    # the estimate from the target's shape (test above): 1,835,008,000 parameters
    assert plain.draft_weight_bytes_per_gpu == 3_670_016_000
    assert read.weight_bytes_per_gpu - plain.weight_bytes_per_gpu == 3_460_300_800 - 3_670_016_000


def test_the_launch_names_the_drafter_folder_absolute_and_a_json_of_another_name_gives_the_shape_only(
    tmp_path, monkeypatch
):
    # an engine started from another directory would not find "./dflash": the launch writes the
    # absolute folder; "mydraft.json" is no checkpoint an engine loads: shape only, placeholder kept
    (tmp_path / "dflash").mkdir()
    (tmp_path / "dflash" / "config.json").write_text(json.dumps(DFLASH_CONFIG))
    (tmp_path / "mydraft.json").write_text(json.dumps(DFLASH_CONFIG))
    monkeypatch.chdir(tmp_path)
    base = SpecDecode("dflash", 7, 4.0, 5)
    folder = attach_drafter(base, "./dflash")
    assert folder is not None and folder.draft_model == str((tmp_path / "dflash").resolve())
    lone = attach_drafter(base, "mydraft.json")
    assert lone is not None and lone.draft_model is None and lone.drafter is not None
    assert lone.drafter.params == 1_730_150_400


def test_a_dflash_drafter_proposes_at_most_its_block_less_one_drafts(tmp_path):
    # dflash_config.block_size 8: one pass proposes the bonus token and 7 drafts, so dflash:7 runs
    # and dflash:8 is refused naming --spec and the drafter's block
    config = {**DFLASH_CONFIG, "dflash_config": {**DFLASH_CONFIG["dflash_config"], "block_size": 8}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    got = attach_drafter(SpecDecode("dflash", 7, 4.0, 5), str(tmp_path))
    assert got is not None and got.drafter is not None and got.drafter.block_size == 8
    with pytest.raises(InputError, match=r"dflash:K with K at most 7: .* drafts blocks of 8 tokens"):
        attach_drafter(SpecDecode("dflash", 8, 4.0, 5), str(tmp_path))
