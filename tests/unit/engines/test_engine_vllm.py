"""vLLM behind the Engine protocol, against hand arithmetic from its sources (engine-facts V1
cache.py gpu_memory_utilization 0.92, V2 get_batch_defaults, V5 CUDA-graph sizes, V15 non-torch
memory, V16 MambaSpec). H100 SXM: 81,559 MiB = 85,520,809,984 B (catalog/gpus.yaml)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenplan.catalog import launch_info, load_engine, load_gpu, model_names
from tokenplan.engines import Engine, EngineSettings, Launch, Vllm
from tokenplan.engines.launch import MaxRunning
from tokenplan.engines.vllm import vllm_graph_capture_sizes
from tokenplan.perf.layout import Layout
from tokenplan.units import Dtype

MIB = 1_048_576


@pytest.fixture(scope="module")
def vllm() -> Vllm:
    engine = load_engine("vllm")
    assert isinstance(engine, Vllm) and isinstance(engine, Engine)
    return engine


def test_capture_sizes_follow_the_default_list():
    # [1, 2, 4] + 8..248 step 8 (31 sizes) + 256..512 step 16 (17 sizes) = 51 sizes at 512.
    assert len(vllm_graph_capture_sizes(512)) == 3 + 31 + 17
    assert vllm_graph_capture_sizes(4) == [1, 2, 4]
    assert vllm_graph_capture_sizes(20) == [1, 2, 4, 8, 16]


def test_large_gpu_defaults_on_an_h100(vllm):
    # 81,559 MiB ≥ 70 GiB = 71,680 MiB and not Ampere: max_num_batched_tokens 8,192, max_num_seqs
    # 1,024 (V2); graphs up to min(2·1,024, 512, 8,192) = 512 → 51 sizes × 24 MiB = 1,224 MiB.
    s = vllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False)
    assert (s.chunk_tokens, s.max_running, s.graph_max_bs) == (8192, 1024, 512)
    # Sampler peak 24 B per logit (top-k/top-p sort copies, catalog/engines.yaml); non-torch
    # 0.13 GiB as vllm-project/vllm#50722 logs it.
    assert (s.profile_tokens, s.profile_seqs, s.sampler_bytes_per_logit) == (8192, 1024, 24)
    assert s.graph_estimate_bytes == 1_224 * MIB
    assert (s.memory_fraction, s.reserve_bytes, s.fraction_of_free) == (0.92, 0.13 * 1024 * MIB, False)


def test_a100_and_small_gpus_keep_the_small_defaults(vllm):
    # V2: "≥ 70 GiB and not A100", else max_num_batched_tokens 2,048, max_num_seqs 256.
    for gpu in (load_gpu("a100-80gb"), load_gpu("l40s")):
        s = vllm.settings(gpu, Layout(), speculative=False)
        assert (s.chunk_tokens, s.max_running, s.profile_seqs) == (2048, 256, 256)
        assert s.graph_max_bs == 512  # min(2·256, 512, 2,048)


def test_a_user_cap_shrinks_the_profiled_rows_and_the_graphs(vllm):
    # max_num_seqs 100: graphs up to min(200, 512, 8,192) = 200 → [1, 2, 4] + 8..200 step 8 (25)
    # = 28 sizes × 24 MiB = 672 MiB; a user fraction replaces 0.92.
    s = vllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False, memory_fraction=0.8, max_running=100)
    assert (s.max_running, s.profile_seqs, s.graph_max_bs) == (100, 100, 200)
    assert s.graph_estimate_bytes == 28 * 24 * MIB
    assert s.memory_fraction == 0.8


def test_a_token_budget_below_the_default_seqs_lowers_them_and_a_set_cap_above_it_is_refused(vllm):
    # V2: an unset max_num_seqs is min(1,024, max_num_batched_tokens) = min(1,024, 512) = 512
    s = vllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False, chunk_tokens=512)
    assert (s.chunk_tokens, s.max_running, s.profile_seqs) == (512, 512, 512)
    # a set max_num_seqs above the budget: SchedulerConfig._verify_args raises, vLLM does not start
    from tokenplan.api.resolve import PredictRequest, resolve
    from tokenplan.errors import InputError

    request = PredictRequest(model="qwen3.6-27b", gpu="h100-sxm", engine="vllm", max_num_batched_tokens=100)
    with pytest.raises(InputError, match=r"at least --max-running \(200\): vLLM refuses to start below max_num_seqs"):
        resolve(replace(request, max_running=200))
    resolve(replace(request, max_running=100))  # equal is allowed (≥)


def test_usable_memory_is_a_share_of_total_memory(vllm):
    # V1: total × utilization − weights − reserve: 100e9 × 0.92 − 20e9 − 5e9 = 67e9.
    s = EngineSettings(0.92, 0.0, False, 8192, 512, 1024)
    assert s.usable_bytes(100e9, 20e9, 5e9) == pytest.approx(67e9, rel=1e-15)


def test_scheduler_state_and_kv_defaults(vllm):
    s = vllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False)
    assert vllm.max_running(s, 1e9, 2048) == 1024.0  # max_num_seqs, not the KV pool
    assert vllm.running_context_tokens(1000, 500, 400) == 1200  # no reservation for future tokens (V6)
    assert vllm.mixed_prefill  # chunked prefill mixes prompts into decode steps (V2/V14)
    assert (vllm.spec_state_copies(3), vllm.spec_state_copies(None)) == (3, 0)  # k blocks (V16)
    assert vllm.pools.state_to_kv_memory_ratio is None and vllm.pools.slots(True) == 1
    assert not vllm.caps_running_by_default(speculative=True, hybrid_model=True)
    assert (vllm.vision_cut(27, 1152), vllm.auto_kv_dtype(Dtype.NVFP4)) == (1.0, Dtype.BF16)
    assert vllm.tight_settings(s) is None


def _launch(**changes) -> Launch:
    base = Launch(
        repo="deepseek-ai/DeepSeek-V3",
        native_dtype="fp8",
        parsers=None,
        layout=Layout(tp=8, ep=8, attention_dp=True),
        weight_dtype=Dtype.FP8,
        kv_dtype=Dtype.BF16,
        spec_method="mtp",
        draft_tokens=2,
        ssm_dtype=None,
        hybrid=False,
        max_running=MaxRunning(),
        planned_running=1000,
        settings=EngineSettings(0.857, 0.0, False, 16384, 512, None),
        planned_engine="sglang",
    )
    return base._replace(**changes)


def test_launch_with_attention_dp_splits_the_batch_over_the_ranks(vllm):
    # DP attention: TP 1 per rank, 8 DP ranks, expert parallel; --max-num-seqs per rank
    # ceil(1,000 / 8) = 125; another engine planned → vLLM's own 0.92 (V1).
    assert vllm.launch_command(_launch()) == " \\\n  ".join(
        [
            "vllm serve deepseek-ai/DeepSeek-V3",
            "--tensor-parallel-size 1",
            "--data-parallel-size 8",
            "--enable-expert-parallel",
            "--gpu-memory-utilization 0.92",
            "--max-num-seqs 125",
            '--speculative-config \'{"method":"mtp","num_speculative_tokens":2}\'',
        ]
    )


def test_a_separate_drafter_is_the_speculative_configs_model(vllm):
    # SpeculativeConfig (vllm/config/speculative.py): eagle, eagle3 and dflash without "model"
    # raise "num_speculative_tokens was provided but without speculative model."; mtp takes the
    # target's own layers. The plan does not know the drafter: "DRAFT_MODEL" and a comment line.
    cmd = vllm.launch_command(_launch(spec_method="eagle3", draft_tokens=3))
    assert cmd.split("\n")[0] == (
        "# DRAFT_MODEL: put the drafter's checkpoint there (eagle3 draft model for deepseek-ai/DeepSeek-V3: "
        "a local path or Hugging Face repository)"
    )
    assert cmd.endswith(
        """--speculative-config '{"method":"eagle3","model":"DRAFT_MODEL","num_speculative_tokens":3}'"""
    )
    dflash = vllm.launch_command(_launch(spec_method="dflash", draft_tokens=8))
    assert """'{"method":"dflash","model":"DRAFT_MODEL","num_speculative_tokens":8}'""" in dflash
    assert "DRAFT_MODEL" not in vllm.launch_command(_launch())


def test_a_replica_wider_than_a_host_runs_the_mp_executor_over_its_hosts(vllm):
    # TP4 × PP4 on hosts of 8: 2 hosts. ParallelConfig nnodes / node_rank / master_addr with the mp
    # executor; every host but HOST0 runs --headless (docs/serving/parallelism_scaling.md).
    cmd = vllm.launch_command(_launch(layout=Layout(tp=4, pp=4), spec_method=None, host_gpus=8))
    lines = cmd.split("\n")
    assert lines[0] == (
        "# one replica spans 2 hosts of 8 GPUs: run the command below on each, NODE_RANK=0 on HOST0 "
        "(the first; its address, where the API server runs) and 1 on the others (headless)"
    )
    assert lines[1:4] == [
        "vllm serve deepseek-ai/DeepSeek-V3 \\",
        "  --tensor-parallel-size 4 \\",
        "  --pipeline-parallel-size 4 \\",
    ]
    assert lines[-3:] == [
        "  --distributed-executor-backend mp --nnodes 2 --node-rank $NODE_RANK --master-addr HOST0 \\",
        '  $([ "$NODE_RANK" = 0 ] || echo --headless)',
        "# tokenplan generate takes the server on HOST0: --endpoint http://HOST0:8000/v1",
    ]
    # attention DP across hosts: vLLM's data-parallel flags, not written; no mp-executor flags.
    adp = vllm.launch_command(_launch(layout=Layout(tp=8, ep=8, attention_dp=True), spec_method=None, host_gpus=4))
    assert "--nnodes" not in adp and "data_parallel_deployment.md" in adp.split("\n")[0]


def test_launch_for_a_planned_vllm_uses_the_plans_fraction(vllm):
    planned = _launch(
        layout=Layout(tp=2, dp=2),
        planned_engine="vllm",
        spec_method=None,
        weight_dtype=Dtype.NVFP4,
        kv_dtype=Dtype.FP8,
        parsers={"vllm": "deepseek_r1"},
        settings=EngineSettings(0.9, 0.0, False, 8192, 512, 1024),
    )
    # NVFP4 from a BF16/FP8 repository: vLLM reads modelopt_fp4 from a checkpoint quantized offline,
    # so the command names no --quantization (a flag naming another method than that checkpoint's
    # own is refused: engines.launch.quantizes_at_load)
    note = (
        "# nvfp4 weights are not made at load time from a fp8 checkpoint: put a nvfp4 checkpoint of deepseek-ai/DeepSeek-V3, "
        "quantized offline (NVIDIA ModelOpt; AutoAWQ for w4a16), in its place below\n"
    )
    assert vllm.launch_command(planned) == note + " \\\n  ".join(
        [
            "vllm serve deepseek-ai/DeepSeek-V3",
            "--tensor-parallel-size 2",
            "--data-parallel-size 2",
            "--kv-cache-dtype fp8",
            "--gpu-memory-utilization 0.90",
            "--max-num-seqs 1000",
            "--reasoning-parser deepseek_r1",
        ]
    )


def test_launch_writes_a_user_token_budget(vllm):
    # A planned vLLM with --max-num-batched-tokens set: the flag comes with the plan's value.
    planned = _launch(
        layout=Layout(tp=4),
        planned_engine="vllm",
        spec_method=None,
        settings=EngineSettings(0.85, 0.0, False, 40_000, 512, 1024, chunk_set=True),
    )
    assert "--max-num-batched-tokens 40000" in vllm.launch_command(planned).split(" \\\n  ")
    assert "--max-num-batched-tokens" not in vllm.launch_command(_launch(planned_engine="vllm"))


def test_a_drafter_the_plan_was_given_is_the_speculative_configs_model(vllm):
    cmd = vllm.launch_command(_launch(spec_method="dflash", draft_tokens=8, draft_model="z-lab/Qwen3.6-27B-DFlash"))
    assert """'{"method":"dflash","model":"z-lab/Qwen3.6-27B-DFlash","num_speculative_tokens":8}'""" in cmd
    assert "DRAFT_MODEL" not in cmd


@pytest.mark.parametrize("kv", [Dtype.FP8, Dtype.NVFP4])
def test_the_launch_names_the_kv_format_the_pool_was_sized_in(vllm, kv):
    # vLLM's CacheDType takes fp8 and nvfp4 (vllm#40177); without the flag auto serves BF16 KV, 2× (fp8)
    # or 65,536 / 18,432 = 3.6× (nvfp4, Qwen3.6-27B's bytes per token) the room the plan sized.
    assert f"--kv-cache-dtype {kv.value}" in vllm.launch_command(_launch(kv_dtype=kv)).split(" \\\n  ")
    assert "--kv-cache-dtype" not in vllm.launch_command(_launch(kv_dtype=Dtype.BF16))


def test_a_cap_above_the_default_token_budget_raises_the_budget_the_launch_sets(vllm):
    # vLLM refuses max_num_seqs above max_num_batched_tokens (SchedulerConfig); the H100's default
    # budget is 8,192 (V2). A cap of 9,000 alone: the budget becomes 9,000 and the launch writes it
    # (a new-user pass: --max-num-seqs 9000 was printed without it, a server that does not start).
    s = vllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False, max_running=9000)
    assert (s.chunk_tokens, s.chunk_set, s.max_running) == (9000, True, 9000)
    # 1,024 fits the 8,192 budget: nothing raised, nothing written
    s = vllm.settings(load_gpu("h100-sxm"), Layout(), speculative=False, max_running=1024)
    assert (s.chunk_tokens, s.chunk_set) == (8192, False)
    # DP attention over TP8: max_num_seqs is per engine rank, ⌈9,000 / 8⌉ = 1,125 ≤ 8,192, so no
    # rank's budget is raised; the replica's budget is the 8 ranks' 8 × 8,192 = 65,536 tokens
    s = vllm.settings(load_gpu("h100-sxm"), Layout(tp=8, ep=8, attention_dp=True), speculative=False, max_running=9000)
    assert (s.chunk_tokens, s.chunk_set, s.max_running) == (65536, False, 9000)
    assert (s.profile_tokens, s.profile_seqs) == (8192, 1125)  # each GPU profiles its own rank


def test_with_dp_attention_the_default_cap_and_budget_are_each_engine_ranks(vllm):
    # vLLM deploys each DP rank as a separate engine core ("each DP rank is deployed as a separate
    # core engine process", docs/serving/data_parallel_deployment.md), each with its own scheduler:
    # max_num_seqs 1,024 and max_num_batched_tokens 8,192 apply per rank (V2, an 80 GB H100 takes
    # the large-GPU defaults). Over TP8 the replica runs up to 8 × 1,024 = 8,192 requests and
    # 8 × 8,192 = 65,536 tokens a step; before, the plan capped the whole replica at 1,024
    # (--max-num-seqs 128 per rank). Each GPU still profiles one rank: 8,192 tokens, 1,024 rows,
    # and captures graphs up to min(2 × 1,024, 512, 8,192) = 512 per rank, 8 × 512 = 4,096 in all.
    h100 = load_gpu("h100-sxm")
    s = vllm.settings(h100, Layout(tp=8, ep=8, attention_dp=True), speculative=False)
    assert (s.max_running, s.chunk_tokens, s.profile_tokens, s.profile_seqs) == (8192, 65536, 8192, 1024)
    assert (s.graph_max_bs, s.graph_cap_tokens) == (4096, 4096)
    plain = vllm.settings(h100, Layout(tp=8, ep=8), speculative=False)  # one engine core over TP8
    assert (plain.max_running, plain.chunk_tokens, plain.profile_seqs, plain.graph_max_bs) == (1024, 8192, 1024, 512)
    # the per-GPU memory reserve is the same either way: the profiling run is one rank's
    assert (plain.graph_estimate_bytes, plain.profile_tokens) == (s.graph_estimate_bytes, s.profile_tokens)
    # a budget the plan sets is written per rank: 65,536 / 8 = 8,192
    chunked = replace(s, chunk_set=True)
    line = vllm.launch_command(
        _launch(layout=Layout(tp=8, ep=8, attention_dp=True), settings=chunked, planned_engine="vllm")
    )
    assert "--max-num-batched-tokens 8192" in line and "--max-num-seqs" in line


# The names vLLM registers (vllm-project/vllm vllm/reasoning/__init__.py,
# _REASONING_PARSERS_TO_REGISTER: "deepseek_r1", "glm45", "kimi_k2", "minimax_m2", "nemotron_v3",
# "openai_gptoss", "qwen3", …); ReasoningParserManager.get_reasoning_parser raises
# KeyError(f"Reasoning parser '{name}' not found. Available parsers: …") for any other
# (vllm/reasoning/abs_reasoning_parsers.py). SGLang's DetectorMap spells DeepSeek-R1 "deepseek-r1"
# and Nemotron-3-Nano "nemotron_3"; vLLM does not.
VLLM_REASONING_PARSERS = {"deepseek_r1", "glm45", "kimi_k2", "minimax_m2", "nemotron_v3", "openai_gptoss", "qwen3"}


def test_every_catalog_model_names_a_reasoning_parser_vllm_registers():
    for name in model_names():
        _, parsers, _ = launch_info(name, name)
        launch = _launch(parsers=parsers)
        parser = launch.parser("vllm")
        if parser is not None:
            assert parser in VLLM_REASONING_PARSERS, (name, parser)
    assert _launch(parsers=launch_info("deepseek-r1", "deepseek-r1")[1]).parser("vllm") == "deepseek_r1"
    assert _launch(parsers=launch_info("deepseek-r1", "deepseek-r1")[1]).parser("sglang") == "deepseek-r1"


def test_with_dp_attention_the_budget_is_checked_against_each_ranks_cap():
    # --max-running is the replica's; with DP attention each of the 8 TP ranks is an engine core
    # whose max_num_seqs is ceil(4,096 / 8) = 512, and SchedulerConfig._verify_args checks each
    # rank's max_num_batched_tokens against its own max_num_seqs: 2,048 ≥ 512 starts, 511 < 512 not.
    from tokenplan.api.resolve import PredictRequest, resolve
    from tokenplan.errors import InputError

    request = PredictRequest(
        model="deepseek-r1", gpu="b200", num_gpus=8, tp=8, ep=8, attention_dp=True, weight_dtype="fp8", engine="vllm"
    )
    s = resolve(replace(request, max_running=4096, max_num_batched_tokens=2048))
    assert (s.config.max_running.requests, s.config.chunk_tokens) == (4096, 2048)
    resolve(replace(request, max_running=4096, max_num_batched_tokens=512))  # 512 per rank: equal is allowed
    with pytest.raises(InputError, match=r"at least --max-running \(4096\) / 8 DP-attention ranks = 512"):
        resolve(replace(request, max_running=4096, max_num_batched_tokens=511))
    with pytest.raises(InputError, match=r"at least --max-running \(4096\): vLLM"):  # without DP attention: one rank
        resolve(replace(request, attention_dp=False, max_running=4096, max_num_batched_tokens=2048))


def test_another_engines_plan_writes_a_budget_its_running_cap_fits(vllm):
    # A plan made for SGLang with 4,096 running per replica (TP2, no DP attention): the vLLM command
    # in --json writes --max-num-seqs 4096, which vLLM refuses above max_num_batched_tokens, 2,048
    # by default on an A100 or a GPU under 70 GiB (V2; a break-it pass: Qwen3-30B-A3B on 8× A100).
    # The command sets max(4,096, 8,192) = 8,192, the ≥ 70 GiB default; a cap of 20,000 sets itself.
    # A cap of 2,048 fits every default and writes no budget.
    def line(running: int) -> str:
        return vllm.launch_command(
            _launch(layout=Layout(tp=2), planned_running=running, spec_method=None, planned_engine="sglang")
        )

    assert "--max-num-seqs 4096" in line(4096) and "--max-num-batched-tokens 8192" in line(4096)
    assert "--max-num-batched-tokens 20000" in line(20000)
    assert "--max-num-batched-tokens" not in line(2048)


def test_fp8_from_a_quantized_checkpoint_is_not_made_at_load_time(vllm):
    # a new-user pass: --weight-dtype fp8 on an AWQ checkpoint wrote `--quantization fp8` beside it,
    # which vLLM refuses (a method other than the checkpoint's own); FP8 is made at load time from
    # a 16-bit checkpoint only, and 16-bit weights not at all from a quantized one.
    from tokenplan.engines.launch import checkpoint_note

    awq = _launch(
        layout=Layout(tp=1), planned_engine="vllm", spec_method=None, weight_dtype=Dtype.FP8, native_dtype="w4a16"
    )
    assert vllm.launch_command(awq).startswith(
        "# fp8 weights are not made at load time from a w4a16 checkpoint: put a fp8 checkpoint of"
    )
    bf16 = _launch(
        layout=Layout(tp=1), planned_engine="vllm", spec_method=None, weight_dtype=Dtype.FP8, native_dtype="bf16"
    )
    assert checkpoint_note(bf16) is None  # --quantization fp8 on a BF16 checkpoint: quantized as it loads
    up = _launch(
        layout=Layout(tp=1), planned_engine="vllm", spec_method=None, weight_dtype=Dtype.BF16, native_dtype="fp8"
    )
    assert checkpoint_note(up) == (
        "# bf16 weights are not made from a fp8 checkpoint: put the bf16 release of deepseek-ai/DeepSeek-V3 in its place below"
    )


def test_a_launch_for_the_jobs_longest_request_sets_max_model_len(vllm):
    # job.deploy sets Config.max_model_len where the model's whole context does not fit one rank's
    # KV cache (a new-user pass: Llama-4 Scout's 10,485,760 tokens left "nothing runs" on vLLM);
    # the planned vLLM command then writes it (EngineArgs --max-model-len), another engine's not.
    planned = _launch(layout=Layout(tp=1), planned_engine="vllm", spec_method=None, max_model_len=18_612)
    assert "--max-model-len 18612" in vllm.launch_command(planned)
    other = _launch(layout=Layout(tp=1), planned_engine="sglang", spec_method=None, max_model_len=18_612)
    assert "--max-model-len" not in vllm.launch_command(other)
    assert "--max-model-len" not in vllm.launch_command(
        _launch(layout=Layout(tp=1), planned_engine="vllm", spec_method=None)
    )


def test_a_16_bit_checkpoint_serves_either_16_bit_format(vllm):
    # a break-it pass: --weight-dtype fp16 on a float16 checkpoint (read as 16-bit, native bf16) said
    # "fp16 weights are not made from a bf16 checkpoint"; the engine casts one to the other as it loads
    from tokenplan.engines.launch import checkpoint_note

    fp16 = _launch(
        layout=Layout(tp=1), planned_engine="vllm", spec_method=None, weight_dtype=Dtype.FP16, native_dtype="bf16"
    )
    assert checkpoint_note(fp16) is None
