"""TensorRT-LLM behind the Engine protocol, against hand arithmetic from its sources (engine-facts
T1 serve.py, T2 llm_args.py, T3 KvCacheCreator, T5 trtllm-bench heuristics, T6 CUDA graphs, T9
GUARANTEED_NO_EVICT). H100 SXM: 81,559 MiB = 85,520,809,984 B (catalog/gpus.yaml); Llama-3.1-8B
BF16: 16,059,990,016 B of weights, 131,072 B of KV per token (tests/unit/perf/test_memory.py)."""

from __future__ import annotations

import pytest

from tokenplan.catalog import load_engine, load_gpu, load_model
from tokenplan.engines import Engine, EngineSettings, Launch, Trtllm
from tokenplan.engines.launch import MaxRunning
from tokenplan.engines.trtllm import _bench_engine_bytes
from tokenplan.perf.layout import Layout
from tokenplan.units import Dtype

GIB = 1_073_741_824
# Llama-3.1-8B's parameters (4,096 hidden, 32 layers, 14,336 FFN, 128,256 vocab, untied lm_head:
# 8,030,261,248, less the 266,240 RMSNorm weights param_counts leaves out = 8,029,995,008) × 2
# bytes: the BF16 checkpoint, which the heuristic subtracts as param_count × 2
LLAMA_BF16_BYTES = 16_059_990_016


@pytest.fixture(scope="module")
def trtllm() -> Trtllm:
    engine = load_engine("trtllm")
    assert isinstance(engine, Trtllm) and isinstance(engine, Engine)
    return engine


def test_defaults_are_the_llm_api_defaults(trtllm):
    # free_gpu_memory_fraction 0.9 (T2), max_num_tokens 8,192 (T2), max_batch_size 2,048 (T1, T2),
    # CUDA graphs up to 128 (T6), a 2 GiB profiling reserve (engineering estimate, engines.yaml).
    s = trtllm.settings(load_gpu("h100-sxm"), Layout(tp=4), speculative=True)
    assert (s.memory_fraction, s.reserve_bytes, s.fraction_of_free) == (0.9, 2 * GIB, True)
    assert (s.chunk_tokens, s.graph_max_bs, s.max_running) == (8192, 128, 2048)
    user = trtllm.settings(load_gpu("a100-80gb"), Layout(), speculative=False, memory_fraction=0.8, max_running=64)
    assert (user.memory_fraction, user.max_running) == (0.8, 64)


def test_usable_memory_is_a_share_of_what_weights_and_reserve_leave(trtllm):
    # T3: (total − weights − reserve) × fraction = (100e9 − 20e9 − 2·1,073,741,824) × 0.9
    #   = 77,852,516,352 × 0.9 = 70,067,264,716.8 B.
    s = trtllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False)
    assert s.usable_bytes(100e9, 20e9, 2 * GIB) == pytest.approx(70_067_264_716.8, rel=1e-12)


def test_guaranteed_no_evict_holds_the_whole_request(trtllm):
    # T1, T9: admission reserves the whole request, ISL + OSL = 1,000 + 500 with fixed lengths
    # (running mean output = the mean), not the running mean context 1,000 + 500/2.
    assert trtllm.running_context_tokens(1000, 500, 500) == 1500
    # With spread outputs the running requests are length-biased: each reserves its own OSL, and
    # those running hold E[OSL²]/E[OSL] on average. Half 200, half 800 tokens (mean 500):
    # (0.5·200² + 0.5·800²)/500 = (20,000 + 320,000)/500 = 680, so 1,000 + 680 = 1,680.
    assert trtllm.running_context_tokens(1000, 500, 680) == 1680
    # A job whose requests all carry max_tokens 32,768 (generate sends the plan's cap) reserves it
    # whatever the answer's length (getRemainingBlocksToCompletion: mPromptLen + mMaxNewTokens):
    # 1,000 + 32,768 = 33,768, against 1,680 for the answers' own lengths
    assert trtllm.running_context_tokens(1000, 500, 680, max_tokens=32_768) == 33_768
    assert trtllm.max_running(EngineSettings(0.9, 0.0, True, 8192, 128, 2048), 1e9, 2048) == 2048.0
    assert trtllm.mixed_prefill and not trtllm.caps_running_by_default(speculative=True, hybrid_model=True)


def test_auto_kv_follows_a_quantized_checkpoint(trtllm):
    # T2: kv_cache_config.dtype "auto" takes the checkpoint's KV quantization (FP8 for FP8/NVFP4).
    assert [trtllm.auto_kv_dtype(d) for d in (Dtype.FP8, Dtype.NVFP4, Dtype.BF16, Dtype.MXFP4)] == [
        Dtype.FP8,
        Dtype.FP8,
        Dtype.BF16,
        Dtype.BF16,
    ]
    assert trtllm.spec_state_copies(3) == 0 and trtllm.vision_cut(27, 1152) == 1.0


def test_offline_runs_take_trtllm_benchs_limits(trtllm):
    # Llama-3.1-8B BF16 TP1 on an H100, ISL = OSL = 1,000 (T5):
    # cache = (85,520,809,984 − 16,059,990,016) × 0.95 = 69,460,819,968 × 0.95 = 65,987,778,969.6 B;
    # a request holds 131,072 × 2,000 = 262,144,000 B → 251.7 requests < 256
    # → max(64, 32·ceil(251.7/32) = 256) = 256; tokens 251.7 × 2 = 503.4 → the 2,048 floor.
    model, h100 = load_model("llama-3.1-8b"), load_gpu("h100-sxm")
    assert _bench_engine_bytes(model, Dtype.BF16) == LLAMA_BF16_BYTES
    default = trtllm.settings(h100, Layout(), speculative=False)
    s = trtllm.offline_settings(default, model, h100, Layout(), Dtype.BF16, Dtype.BF16, 1000, 1000)
    assert (s.max_running, s.chunk_tokens) == (256, 2048)
    # With attention DP over TP2 the heuristic pools the TP × PP = 2 GPUs (T5: n_gpus = tp × pp):
    # cache = (2 × 85,520,809,984 − 16,059,990,016) × 0.95 = 147,240,769,945.6 B → 561.7 requests
    # → 128·ceil(561.7/128) = 640; tokens 561.7 × 2 = 1,123 → 2,048 (≥ 1,000 + 640); and each
    # attention-DP rank schedules that many: 1,280 and 4,096.
    dp = trtllm.offline_settings(
        default, model, h100, Layout(tp=2, attention_dp=True), Dtype.BF16, Dtype.BF16, 1000, 1000
    )
    assert (dp.max_running, dp.chunk_tokens) == (1280, 4096)
    # A format the heuristic does not know (MXFP4) keeps the LLM-API defaults 2,048 / 8,192.
    mx = trtllm.offline_settings(default, model, h100, Layout(), Dtype.MXFP4, Dtype.BF16, 1000, 1000)
    assert (mx.max_running, mx.chunk_tokens) == (2048, 8192)


def test_trtllm_bench_counts_mla_kv_as_multi_head_before_pr_16707(trtllm):
    # DeepSeek-R1 FP8, DEP8 on H200, ISL 1,024 / OSL 8,192 (dev.csv line 7). The heuristic of the
    # perf-overview's time costs MLA as MHA: num_key_value_heads 128, head_size 7,168 / 128 = 56,
    # FP8 KV: 2 × 61 × 128 × 56 × 1 = 874,496 B per token (the cache holds 35,136). cache =
    # (8 × 150,754,820,096 − ~6.7e11 B of FP8 weights) × 0.95 ≈ 5.1e11 B; a request holds
    # 874,496 × 9,216 = 8.06e9 B → ~63 requests < 64 → the floor max(64, ·) = 64 per rank,
    # × 8 attention-DP ranks = 512 (PR #16707: "capping DeepSeek-V3.2 at max_batch_size=64").
    model, h200 = load_model("deepseek-r1"), load_gpu("h200")
    layout = Layout(tp=8, ep=8, attention_dp=True)
    default = trtllm.settings(h200, layout, speculative=False)
    s = trtllm.offline_settings(default, model, h200, layout, Dtype.FP8, Dtype.FP8, 1024, 8192)
    assert s.max_running == 512
    # no chunked prefill in trtllm-bench: the budget holds a whole prompt plus the batch,
    # max(2,048, 1,024 + 64) = 2,048 per rank
    assert s.chunk_tokens == 8 * 2048


def _launch(**changes) -> Launch:
    base = Launch(
        repo="Qwen/Qwen3.6-27B",
        native_dtype="bf16",
        parsers="qwen3",
        layout=Layout(tp=1, dp=8),
        weight_dtype=Dtype.FP8,
        kv_dtype=Dtype.FP8,
        spec_method="mtp",
        draft_tokens=3,
        ssm_dtype=None,
        hybrid=True,
        max_running=MaxRunning(),
        planned_running=300,
        settings=EngineSettings(0.9, 2 * GIB, True, 8192, 128, 2048),
        planned_engine="trtllm",
    )
    return base._replace(**changes)


def test_launch_writes_the_yaml_then_one_server_per_replica(trtllm):
    assert trtllm.servers_per_replica(Layout(dp=2)) and not trtllm.servers_per_replica(Layout(tp=8))
    assert trtllm.launch_command(_launch()) == "\n".join(
        [
            # TensorRT-LLM takes the format from the checkpoint: fp8 of a BF16 repository is a
            # placeholder, said first (pasted as is, the BF16 repository was served; a new-user pass)
            "# FP8_CHECKPOINT: a ModelOpt fp8 checkpoint of Qwen/Qwen3.6-27B (its path or repository)",
            "cat > extra_llm_api_options.yaml <<'EOF'",
            "kv_cache_config:",
            "  free_gpu_memory_fraction: 0.90",
            "  dtype: fp8",
            "enable_chunked_prefill: true",
            "speculative_config:",
            "  decoding_type: MTP",
            "  num_nextn_predict_layers: 3",
            "EOF",
            "# one server per replica, each on its own GPUs and port:",
            "for i in $(seq 0 7); do",
            "  "
            + " \\\n    ".join(
                [
                    "CUDA_VISIBLE_DEVICES=$i trtllm-serve FP8_CHECKPOINT",
                    "--backend pytorch",
                    "--tp_size 1",
                    "--max_batch_size 300",
                    "--max_num_tokens 8192",
                    "--extra_llm_api_options extra_llm_api_options.yaml",
                    "--reasoning_parser qwen3",
                    "--port $((8000 + i)) &",
                ]
            ),
            "done",
            "# tokenplan generate takes each server: "
            + " ".join(f"--endpoint http://127.0.0.1:{8000 + i}/v1" for i in range(8)),
        ]
    )


def test_launch_turns_chunked_prefill_on_so_a_prompt_past_the_token_budget_runs(trtllm):
    # TensorRT-LLM's chunked prefill is off by default (llm_args enable_chunked_prefill=False), and
    # then its LLM API refuses a prompt longer than max_num_tokens. The default job's prompts are
    # lognormal (mean 1,024, sigma 0.8, cap 16,384): mu = ln 1,024 - 0.8^2 / 2 = 6.611, so a budget
    # of 2,048 tokens (ln 2,048 = 7.625, z = 1.27) would refuse about 10 % of them, 8,192 (z = 3.0)
    # about 0.1 %. The launch's budget is 2,048 here; the YAML turns chunking on, once, at top level.
    cmd = trtllm.launch_command(_launch(settings=EngineSettings(0.9, 2 * GIB, True, 2048, 128, 2048)))
    yaml = cmd.split("cat > extra_llm_api_options.yaml <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0].splitlines()
    assert "--max_num_tokens 2048" in cmd
    assert yaml.count("enable_chunked_prefill: true") == 1


def test_launch_for_another_planned_engine_keeps_trtllms_defaults(trtllm):
    # SGLang planned at 0.857: TRT-LLM keeps its own free_gpu_memory_fraction 0.9 (T2) and its
    # max_num_tokens; attention DP over TP4 gives each rank ceil(300 / 4) = 75 requests.
    cmd = trtllm.launch_command(
        _launch(
            planned_engine="sglang",
            layout=Layout(tp=4, ep=4, attention_dp=True),
            weight_dtype=Dtype.BF16,
            kv_dtype=Dtype.BF16,
            spec_method="eagle3",
            draft_tokens=2,
            parsers=None,
            settings=EngineSettings(0.857, 0.0, False, 16384, 512, None),
        )
    )
    assert cmd == "\n".join(
        [
            "cat > extra_llm_api_options.yaml <<'EOF'",
            "kv_cache_config:",
            "  free_gpu_memory_fraction: 0.90",
            "enable_chunked_prefill: true",
            "enable_attention_dp: true",
            # the published attention-DP recipes' balancing (InferenceMAX dsr1_*_trt*.sh), which the TTFT charges
            "attention_dp_config:",
            "  enable_balance: true",
            "  timeout_iters: 60",
            "  batching_wait_iters: 0",
            "speculative_config:",
            "  decoding_type: Eagle3",
            "  max_draft_len: 2",
            "  speculative_model_dir: DRAFT_MODEL  # the drafter's checkpoint",
            "EOF",
            " \\\n  ".join(
                [
                    "trtllm-serve Qwen/Qwen3.6-27B",
                    "--backend pytorch",
                    "--tp_size 4",
                    "--ep_size 4",
                    "--max_batch_size 75",
                    "--extra_llm_api_options extra_llm_api_options.yaml",
                ]
            ),
        ]
    )


def test_decoding_types_are_spelled_as_llm_args_declares_them(trtllm):
    # tensorrt_llm/llmapi/llm_args.py: EagleDecodingConfig Literal["Eagle"], DFlashDecodingConfig
    # Literal["DFlash"] (not EAGLE / DFLASH), each with its drafter in speculative_model_dir.
    for method, name in (("eagle", "Eagle"), ("dflash", "DFlash")):
        cmd = trtllm.launch_command(_launch(spec_method=method, draft_tokens=4))
        assert (
            f"speculative_config:\n  decoding_type: {name}\n  max_draft_len: 4\n"
            "  speculative_model_dir: DRAFT_MODEL  # the drafter's checkpoint\nEOF\n"
        ) in cmd


def test_a_replica_wider_than_a_host_is_one_mpi_job(trtllm):
    # TP4 × PP4 on hosts of 8: trtllm-serve under srun with trtllm-llmapi-launch, 16 tasks, 8 a
    # node (TensorRT-LLM docs, trtllm-serve multi-node).
    cmd = trtllm.launch_command(_launch(layout=Layout(tp=4, pp=4), spec_method=None, parsers=None, host_gpus=8))
    assert (
        "EOF\n# one replica spans 2 hosts of 8 GPUs: trtllm-serve runs as one MPI job over them (srun, or "
        "mpirun with trtllm-llmapi-launch), the YAML on a path every host reads\n"
        "srun -N 2 --ntasks 16 --ntasks-per-node 8 --mpi=pmix trtllm-llmapi-launch trtllm-serve FP8_CHECKPOINT \\\n"
        "  --backend pytorch \\\n  --tp_size 4 \\\n  --pp_size 4 \\\n"
    ) in cmd
    assert cmd.endswith("\n# tokenplan generate takes the server on HOST0: --endpoint http://HOST0:8000/v1")
    # reached from elsewhere: trtllm-serve's --host defaults to localhost (a break-it pass)
    assert "  --host 0.0.0.0\n# tokenplan generate takes the server on HOST0" in cmd
    assert "--host" not in trtllm.launch_command(_launch(layout=Layout(tp=8), spec_method=None, host_gpus=8))


def test_a_drafter_the_plan_was_given_is_the_speculative_model_dir(trtllm):
    cmd = trtllm.launch_command(_launch(spec_method="eagle3", draft_tokens=2, draft_model="/ckpt/eagle3"))
    assert '  speculative_model_dir: "/ckpt/eagle3"\nEOF\n' in cmd
    assert "DRAFT_MODEL" not in cmd


def test_an_nvfp4_kv_cache_is_written_in_the_yaml(trtllm):
    # KvCacheConfig.dtype takes auto, fp8 or nvfp4 (TensorRT-LLM #6244); the launch wrote only fp8,
    # so an nvfp4 plan served the checkpoint's KV format instead of the one its pool was sized in.
    yaml = trtllm.launch_command(_launch(kv_dtype=Dtype.NVFP4)).split("\n")
    assert yaml[2:5] == ["kv_cache_config:", "  free_gpu_memory_fraction: 0.90", "  dtype: nvfp4"]


def test_with_attention_dp_the_default_batch_and_token_caps_are_each_ranks(trtllm):
    # With enable_attention_dp each rank schedules its own batch under max_batch_size 2,048 and
    # max_num_tokens 8,192 (T1, T2; the launch writes both per rank): over TP8 the replica runs up
    # to 8 × 2,048 = 16,384 requests and 8 × 8,192 = 65,536 tokens a step, as offline_settings
    # scales trtllm-bench's per-rank limits; before, the online replica was capped at 2,048.
    h200 = load_gpu("h200")
    s = trtllm.settings(h200, Layout(tp=8, ep=8, attention_dp=True), speculative=False)
    assert (s.max_running, s.chunk_tokens) == (16384, 65536)
    plain = trtllm.settings(h200, Layout(tp=8, ep=8), speculative=False)
    assert (plain.max_running, plain.chunk_tokens) == (2048, 8192)
    # the plan's replica budget goes on the command line per rank: 65,536 / 8 = 8,192
    cmd = trtllm.launch_command(
        _launch(planned_engine="trtllm", layout=Layout(tp=8, ep=8, attention_dp=True), settings=s)
    )
    assert "--max_num_tokens 8192" in cmd
