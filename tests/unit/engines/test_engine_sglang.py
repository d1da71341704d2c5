"""SGLang behind the Engine protocol: every rule against hand arithmetic from its source
(engine-facts S1 memory_hook.py, S3 the KV-cache mixin, S5 speculative_hook.py, S18 MambaPool,
S19 InferenceX). GPU memory is nvidia-smi's memory.total in catalog/gpus.yaml (H100 SXM 81,559 MiB,
B200 183,359 MiB)."""

from __future__ import annotations

import dataclasses

import pytest

from tokenplan.catalog import load_engine, load_gpu
from tokenplan.engines import Engine, EngineSettings, Launch, Sglang
from tokenplan.engines.launch import MaxRunning
from tokenplan.perf.layout import Layout
from tokenplan.units import Dtype

H100_MIB = 81_559


@pytest.fixture(scope="module")
def sglang() -> Sglang:
    engine = load_engine("sglang")
    assert isinstance(engine, Sglang) and isinstance(engine, Engine)
    return engine


def test_tp4_takes_the_large_tp_graph_column(sglang):
    # H100 (60–90 GiB bucket): chunk 8,192, decode graph max_bs 256 below TP 4, 512 from TP 4 (S1).
    # TP2: 512 + 1.5·8,192 + 1,024·2/8 + 2·256 = 512 + 12,288 + 256 + 512 = 13,568 MiB;
    # TP4: 512 + 12,288 + 1,024·4/8 + 2·512 = 512 + 12,288 + 512 + 1,024 = 14,336 MiB.
    h100 = load_gpu("h100-sxm")
    tp2 = sglang.settings(h100, Layout(tp=2), speculative=False)
    tp4 = sglang.settings(h100, Layout(tp=4), speculative=False)
    assert (tp2.graph_max_bs, tp4.graph_max_bs) == (256, 512)
    assert tp2.memory_fraction == pytest.approx((H100_MIB - 13_568) / H100_MIB, rel=1e-12)
    assert tp4.memory_fraction == pytest.approx((H100_MIB - 14_336) / H100_MIB, rel=1e-12)
    assert (tp4.reserve_bytes, tp4.fraction_of_free, tp4.chunk_tokens) == (0.0, False, 8192)


def test_the_10_gib_floor_binds_above_60_gib_only(sglang):
    # With no activation term the H100 reserve would be 512 + 0 + 1,024/8 + 2·256 = 1,152 MiB,
    # below the 10 GiB = 10,240 MiB floor for GPUs above 60 GiB (S1) → fraction (81,559 − 10,240)/81,559.
    lean = dataclasses.replace(sglang, reserve_per_activation_token_mib=0.0)
    s = lean.settings(load_gpu("h100-sxm"), Layout(), speculative=False)
    assert s.memory_fraction == pytest.approx((H100_MIB - 10_240) / H100_MIB, rel=1e-12)
    # The L40S (46,068 MiB, below 60 GiB; bucket < 60 GiB: chunk 4,096, max_bs 32) keeps its own:
    # 512 + 0 + 128 + 2·32 = 704 MiB → (46,068 − 704)/46,068.
    s = lean.settings(load_gpu("l40s"), Layout(), speculative=False)
    assert s.memory_fraction == pytest.approx((46_068 - 704) / 46_068, rel=1e-12)


def test_the_vision_cut_multiplies_the_fraction_and_is_clamped(sglang):
    # Qwen3.6-27B's tower, 27 layers × 1,152: 27·1,152² / (24·1,024²) = 35,831,808 / 25,165,824
    # = 1.423828125 → 0.95 × (1 − 0.1 × 0.423828125) = 0.95 × 0.9576171875 = 0.909736328125.
    assert sglang.vision_cut(27, 1152) == pytest.approx(0.909736328125, rel=1e-15)
    # 48 × 2,048: 48·4,194,304 / 25,165,824 = 8 → 1 − 0.7 = 0.3, clamped to 0.8 → 0.76.
    assert sglang.vision_cut(48, 2048) == pytest.approx(0.76, rel=1e-15)
    # 12 × 512: 12·262,144 / 25,165,824 = 0.125 → 1.0875, clamped to 1.05 → 0.9975.
    assert sglang.vision_cut(12, 512) == pytest.approx(0.9975, rel=1e-15)
    assert sglang.vision_cut(0, 0) == 1.0
    # B200 TP1 reserve 26,240 MiB (test_memory.py): fraction (183,359 − 26,240)/183,359 × 0.76.
    s = sglang.settings(load_gpu("b200"), Layout(), speculative=False, vision_cut=0.76)
    assert s.memory_fraction == pytest.approx((183_359 - 26_240) / 183_359 * 0.76, rel=1e-12)


def test_default_running_cap_is_clamped_kv_over_context_times_512(sglang):
    # S3: clamp(KV_tokens / context_len × 512, 2048, 4096); an explicit cap wins.
    unset = EngineSettings(0.8, 0.0, False, 8192, 256, None)
    assert sglang.max_running(unset, 12_000, 2048) == 3000.0  # 12,000/2,048·512 = 3,000
    assert sglang.max_running(unset, 5_000, 2048) == 2048.0  # 1,250 → the floor 2,048
    assert sglang.max_running(unset, 1_000_000, 2048) == 4096.0  # 250,000 → the ceiling 4,096
    assert sglang.max_running(dataclasses.replace(unset, max_running=100), 1_000_000, 2048) == 100.0


def test_speculative_decoding_caps_at_48_and_holds_k_plus_1_state_copies(sglang):
    h100 = load_gpu("h100-sxm")
    assert sglang.settings(h100, Layout(), speculative=True).max_running == 48  # S5
    assert sglang.settings(h100, Layout(), speculative=True, max_running=300).max_running == 300
    # S18: intermediate SSM and conv caches of speculative_num_draft_tokens = k + 1 rows.
    assert (sglang.spec_state_copies(3), sglang.spec_state_copies(None), sglang.spec_state_copies(0)) == (4, 0, 0)
    assert sglang.caps_running_by_default(speculative=True, hybrid_model=False)
    assert sglang.caps_running_by_default(speculative=False, hybrid_model=True)  # state slots ÷ 5 (S3)
    assert not sglang.caps_running_by_default(speculative=False, hybrid_model=False)
    assert (sglang.pools.slots(False), sglang.pools.slots(True)) == (5, 4)  # 3 + 2 / 3 + 1 (S3)


def test_tight_launch_raises_the_fraction_and_shrinks_chunk_and_graphs(sglang):
    # S19: 0.95 with --chunked-prefill-size 8192 --cuda-graph-max-bs 32. B200 default: chunk
    # 16,384, max_bs 512, fraction (183,359 − 26,240)/183,359 = 0.857 < 0.95.
    default = sglang.settings(load_gpu("b200"), Layout(), speculative=False)
    tight = sglang.tight_settings(default)
    assert tight is not None and tight.tight
    assert (tight.memory_fraction, tight.chunk_tokens, tight.graph_max_bs) == (0.95, 8192, 32)
    # With a vision cut of 0.76: 0.95 × 0.76 = 0.722 < 0.857: no tighter launch.
    assert sglang.tight_settings(default, vision_cut=0.76) is None


def test_scheduler_holds_the_running_mean_context_and_prefills_apart(sglang):
    # ISL 1,000 + half the running mean output 400 = 1,200 tokens; --enable-mixed-chunk off (S2).
    assert sglang.running_context_tokens(1000, 500, 400) == 1200
    assert not sglang.mixed_prefill
    assert sglang.auto_kv_dtype(Dtype.FP8) is Dtype.BF16


def _launch(**changes) -> Launch:
    base = Launch(
        repo="Qwen/Qwen3-32B",
        native_dtype="bf16",
        parsers="qwen3",
        layout=Layout(tp=2),
        weight_dtype=Dtype.FP8,
        kv_dtype=Dtype.FP8,
        spec_method="mtp",
        draft_tokens=3,
        ssm_dtype=None,
        hybrid=False,
        max_running=MaxRunning(),
        planned_running=200,
        settings=EngineSettings(0.83521, 0.0, False, 8192, 256, None),
        planned_engine="sglang",
    )
    return base._replace(**changes)


def test_launch_command_spells_sglangs_flags(sglang):
    assert sglang.launch_command(_launch()) == " \\\n  ".join(
        [
            "python -m sglang.launch_server",
            "--model-path Qwen/Qwen3-32B",
            "--tp-size 2",
            "--quantization fp8",
            "--kv-cache-dtype fp8_e4m3",
            "--mem-fraction-static 0.835",
            "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4",
            "--reasoning-parser qwen3",
        ]
    )
    # Another engine planned: SGLang computes its own fraction (no flag). A lifted cap on a hybrid
    # model disables the radix cache and names the plan's limit (S3).
    cmd = sglang.launch_command(
        _launch(
            planned_engine="vllm",
            spec_method=None,
            hybrid=True,
            max_running=MaxRunning(lifted=True),
            weight_dtype=Dtype.BF16,
            kv_dtype=Dtype.BF16,
            parsers=None,
        )
    )
    assert cmd == " \\\n  ".join(
        [
            "python -m sglang.launch_server",
            "--model-path Qwen/Qwen3-32B",
            "--tp-size 2",
            "--disable-radix-cache",
            "--max-running-requests 200",
        ]
    )


def test_every_dp_replica_is_a_server_of_its_own(sglang):
    # --max-running-requests beside --dp-size is per worker in some builds and divided by DP in
    # others (PR #20063, #32115): no --dp-size for plain DP, one server per replica on its port.
    assert sglang.servers_per_replica(Layout(tp=2, dp=4))
    assert sglang.servers_per_replica(Layout(tp=2, ep=2, dp=4))
    assert not sglang.servers_per_replica(Layout(tp=8))
    cmd = sglang.launch_command(_launch(layout=Layout(tp=2, ep=2, dp=4), spec_method=None, parsers=None))
    assert cmd.startswith("# one server per replica, each on its own GPUs and port:\nfor i in $(seq 0 3); do\n")
    assert "--dp-size" not in cmd and "--ep-size 2" in cmd
    # TP2: replica i on GPUs 2i and 2i + 1; ports 30000..30003, each an --endpoint for generate.
    assert "  CUDA_VISIBLE_DEVICES=$(seq -s, $((i * 2)) $((i * 2 + 1))) python -m sglang.launch_server \\\n" in cmd
    assert "    --port $((30000 + i)) &\ndone\n" in cmd
    assert cmd.endswith(
        ": --endpoint http://127.0.0.1:30000/v1 --endpoint http://127.0.0.1:30001/v1 "
        "--endpoint http://127.0.0.1:30002/v1 --endpoint http://127.0.0.1:30003/v1"
    )
    # DP attention keeps --dp-size = TP inside the one replica.
    assert "--dp-size 8 --enable-dp-attention" in sglang.launch_command(_launch(layout=Layout(tp=8, attention_dp=True)))


def test_with_dp_attention_the_running_cap_is_written_as_a_multiple_of_the_ranks(sglang):
    # SGLang gives each DP-attention rank max_running_requests // dp_size (issue #10868; a
    # break-it pass saw "--dp-size 8 … --max-running-requests 1": 1 // 8 = 0 per rank). A named
    # cap of 203 over 8 ranks is written as 8 × ⌈203 / 8⌉ = 8 × 26 = 208; over TP2 without DP
    # attention as it is
    adp = _launch(layout=Layout(tp=8, attention_dp=True), max_running=MaxRunning(203), planned_running=203)
    assert "--max-running-requests 208" in sglang.launch_command(adp)
    one = _launch(layout=Layout(tp=8, attention_dp=True), max_running=MaxRunning(1), planned_running=1)
    assert "--max-running-requests 8" in sglang.launch_command(one)  # 8 × ⌈1 / 8⌉
    assert "--max-running-requests 203" in sglang.launch_command(
        _launch(max_running=MaxRunning(203), planned_running=203)
    )


def test_replicas_beyond_one_host_loop_on_each_host(sglang):
    # TP2 × DP12 on hosts of 8 GPUs: 8 / 2 = 4 servers a host, ⌈12 / 4⌉ = 3 hosts, none short;
    # TP1 × DP12: 8 a host, 2 hosts, the last with 12 − 8 = 4.
    cmd = sglang.launch_command(_launch(layout=Layout(tp=2, dp=12), host_gpus=8))
    assert cmd.startswith(
        "# one server per replica, each on its own GPUs and port on each of 3 hosts:\nfor i in $(seq 0 3); do"
    )
    assert "--endpoint http://HOST:30003/v1" in cmd and "30004" not in cmd
    cmd = sglang.launch_command(_launch(layout=Layout(tp=1, dp=12), host_gpus=8))
    assert "on each of 2 hosts (the last runs 4: seq 0 3):\nfor i in $(seq 0 7); do" in cmd


def test_launch_writes_a_user_prefill_chunk(sglang):
    # --chunked-prefill-size set for a planned SGLang: the flag with the plan's chunk.
    cmd = sglang.launch_command(_launch(settings=EngineSettings(0.8, 0.0, False, 16_384, 256, None, chunk_set=True)))
    assert "--chunked-prefill-size 16384" in cmd.split(" \\\n  ")
    assert "--chunked-prefill-size" not in sglang.launch_command(_launch())


def test_a_lifted_cap_on_a_hybrid_model_is_the_radix_cache_off(sglang):
    # S3: with the radix cache on, a hybrid model's memory is split state : KV at
    # --mamba-full-memory-ratio 0.9 (catalog/engines.yaml); lifting the running cap means
    # --disable-radix-cache with an explicit --max-running-requests: one pool, no ratio.
    assert sglang.disables_radix_cache(hybrid_model=True, max_running=MaxRunning(lifted=True)) is True
    assert sglang.disables_radix_cache(hybrid_model=True, max_running=MaxRunning()) is False
    assert sglang.disables_radix_cache(hybrid_model=False, max_running=MaxRunning(lifted=True)) is False
    assert sglang.state_to_kv_ratio(hybrid_model=True, max_running=MaxRunning()) == 0.9
    assert sglang.state_to_kv_ratio(hybrid_model=True, max_running=MaxRunning(lifted=True)) is None
    assert sglang.state_to_kv_ratio(hybrid_model=False, max_running=MaxRunning()) is None
    # with the cache off every one of --max-running-requests 300 gets its state, however few run
    capped = sglang.settings(load_gpu("h100-sxm"), Layout(), speculative=False, max_running=300)
    assert sglang.allocated_running(120.0, capped, max_running=MaxRunning(lifted=True)) == 300.0
    assert sglang.allocated_running(120.0, capped, max_running=MaxRunning()) == 120.0
    # unset cap (None): the running limit
    assert (
        sglang.allocated_running(
            120.0,
            sglang.settings(load_gpu("h100-sxm"), Layout(), speculative=False),
            max_running=MaxRunning(lifted=True),
        )
        == 120.0
    )


@pytest.mark.parametrize("name", ["vllm", "trtllm"])
def test_other_engines_keep_one_pool_and_allocate_at_the_limit(name):
    engine = load_engine(name)
    settings = engine.settings(load_gpu("h100-sxm"), Layout(), speculative=False, max_running=300)
    assert engine.disables_radix_cache(True, MaxRunning(lifted=True)) is False
    assert engine.state_to_kv_ratio(True, MaxRunning()) is None
    assert engine.allocated_running(120.0, settings, max_running=MaxRunning(lifted=True)) == 120.0


def test_a_separate_drafter_is_named_with_a_placeholder(sglang):
    # EAGLE, EAGLE3 and DFLASH load their drafter from --speculative-draft-model-path
    # (arg_groups/fields/spec.py; _handle_dflash raises without it); MTP (NEXTN) reads the target's
    # own layers. The plan does not know the drafter: DRAFT_MODEL, and a comment line saying so.
    note = (
        "# DRAFT_MODEL: put the drafter's checkpoint there (eagle3 draft model for Qwen/Qwen3-32B: "
        "a local path or Hugging Face repository)"
    )
    cmd = sglang.launch_command(_launch(spec_method="eagle3"))
    assert cmd.split("\n")[0] == note
    assert (
        "  --speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFT_MODEL --speculative-num-steps 3 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \\\n" in cmd
    )
    assert "--speculative-algorithm EAGLE --speculative-draft-model-path DRAFT_MODEL --speculative-num-steps 2 " in (
        sglang.launch_command(_launch(spec_method="eagle", draft_tokens=2))
    )
    # DFLASH drafts a block in one step: steps and top-k are forced to 1 (_handle_dflash), the
    # verify window is --speculative-num-draft-tokens = k + 1 = 9.
    cmd = sglang.launch_command(_launch(spec_method="dflash", draft_tokens=8))
    assert (
        "  --speculative-algorithm DFLASH --speculative-draft-model-path DRAFT_MODEL --speculative-num-draft-tokens 9 \\\n"
        in cmd
    )
    assert "--speculative-num-steps" not in cmd and cmd.startswith("# DRAFT_MODEL: ")
    # MTP: no drafter, no note.
    assert "DRAFT_MODEL" not in sglang.launch_command(_launch())


def test_a_replica_wider_than_a_host_runs_one_command_per_node_rank(sglang):
    # TP4 × PP4 = 16 GPUs on hosts of 8: 2 hosts, one server over both. SGLang takes --nnodes,
    # --node-rank and --dist-init-addr (arg_groups/fields/parallel.py); the endpoint is HOST0's.
    cmd = sglang.launch_command(_launch(layout=Layout(tp=4, pp=4), spec_method=None, parsers=None, host_gpus=8))
    assert cmd == "\n".join(
        [
            "# one replica spans 2 hosts of 8 GPUs: run the command below on each, NODE_RANK=0 on HOST0 "
            "(the first; its address) and 1 on the others",
            " \\\n  ".join(
                [
                    "python -m sglang.launch_server",
                    "--model-path Qwen/Qwen3-32B",
                    "--tp-size 4",
                    "--pp-size 4",
                    "--quantization fp8",
                    "--kv-cache-dtype fp8_e4m3",
                    "--mem-fraction-static 0.835",
                    # reached as http://HOST0:30000 from elsewhere: ServerArgs.host defaults to
                    # 127.0.0.1, which no other machine reaches (a break-it pass)
                    "--host 0.0.0.0",
                    "--nnodes 2 --node-rank $NODE_RANK --dist-init-addr HOST0:20000",
                ]
            ),
            "# tokenplan generate takes the server on HOST0: --endpoint http://HOST0:30000/v1",
        ]
    )
    # TP8 on 4-GPU trays (GB200): 2 hosts; two such replicas: each on hosts of its own.
    cmd = sglang.launch_command(_launch(layout=Layout(tp=8, dp=2), spec_method=None, host_gpus=4))
    assert "\n# start 2 such replicas, each on 2 hosts of its own, and give each HOST0" in cmd
    assert "--nnodes 2 --node-rank $NODE_RANK" in cmd and "CUDA_VISIBLE_DEVICES" not in cmd
    assert "--nnodes" not in sglang.launch_command(_launch(layout=Layout(tp=8), host_gpus=8))
    # one host: generate reaches the server on 127.0.0.1, the default bind is enough
    assert "--host" not in sglang.launch_command(_launch(layout=Layout(tp=8), host_gpus=8))


def test_a_drafter_the_plan_was_given_is_named_and_the_placeholder_note_goes(sglang):
    # plan --draft-model: the path is written where DRAFT_MODEL stood (shell-quoted: a space), no note
    cmd = sglang.launch_command(_launch(spec_method="dflash", draft_tokens=8, draft_model="/ckpt/my drafter"))
    assert "--speculative-draft-model-path '/ckpt/my drafter' --speculative-num-draft-tokens 9" in cmd
    assert "DRAFT_MODEL" not in cmd


@pytest.mark.parametrize(("kv", "flag"), [(Dtype.FP8, "fp8_e4m3"), (Dtype.NVFP4, "nvfp4")])
def test_the_launch_names_the_kv_format_the_pool_was_sized_in(sglang, kv, flag):
    # `plan --kv-dtype nvfp4` sizes the pool at 4.5 bits per element (Qwen3.6-27B: 16 full-attention
    # layers × 4 KV heads × 256 × 2 (K, V) × 0.5625 B = 18,432 B per token, against 65,536 in BF16);
    # the launch printed no --kv-cache-dtype, so SGLang's auto served BF16 KV: 65,536 / 18,432 =
    # 3.6× less room than the batch the plan promised (a new-user pass). SGLang spells it nvfp4 (#21601).
    command = sglang.launch_command(_launch(kv_dtype=kv))
    assert f"--kv-cache-dtype {flag}" in command.split(" \\\n  ")
    assert "--kv-cache-dtype" not in sglang.launch_command(_launch(kv_dtype=Dtype.BF16))  # auto is BF16


def test_tight_launch_spells_the_decode_graph_flag(sglang):
    """The decode CUDA-graph batch cap is ``--cuda-graph-max-bs-decode``: sgl-project/sglang
    python/sglang/srt/arg_groups/fields/exec_.py declares ``cuda_graph_max_bs_decode: A[Optional[int],
    "Maximum batch size captured for the decode cuda graph."]`` (and ``cuda_graph_max_bs_prefill``),
    which ``parse_cuda_graph_config`` in arg_groups/cuda_graph_hook.py folds into
    ``cuda_graph_config[decode].max_bs`` (the S1 memory hook's decode max_bs). The old
    ``--cuda-graph-max-bs`` was a DeprecatedAliasStoreAction of it (test_config_argument_merger.py:
    ``new_flag="--cuda-graph-max-bs-decode"``) and is gone ("`--disable-cuda-graph` is the one
    deprecated alias left standing", test_server_args_annotated_cli): argparse then refuses it as
    ambiguous between the -decode and -prefill flags."""
    tight = EngineSettings(0.95, 0.0, False, 8192, 32, None, tight=True)
    args = sglang.launch_command(_launch(settings=tight)).split(" \\\n  ")
    assert "--chunked-prefill-size 8192 --cuda-graph-max-bs-decode 32" in args
    assert "--cuda-graph-max-bs 32" not in " ".join(args)
