"""Launch commands per engine: each engine's own command and its own memory setting; the
planned engine's command first (engine-facts S1, V1, T1, T2, T12)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tokenplan.api.plan import PlanRequest, plan


@pytest.fixture(scope="module")
def trtllm() -> dict:
    return plan(PlanRequest(engine="trtllm", gpus=("8xb200",))).to_json()["options"][0]


def test_trtllm_plan_launches_trtllm_serve_with_its_yaml(trtllm):
    launch = trtllm["launch"]
    assert list(launch) == ["trtllm", "sglang", "vllm"]
    cmd = launch["trtllm"]
    # the repository, or where the plan's weights are another format the placeholder for its checkpoint
    served = "FP8_CHECKPOINT" if trtllm["weight_dtype"] == "fp8" else "Qwen/Qwen3.6-27B"
    assert f"trtllm-serve {served}" in cmd and "--backend pytorch" in cmd
    assert "--extra_llm_api_options extra_llm_api_options.yaml" in cmd
    yaml_text = cmd.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0]
    # TRT-LLM's own memory setting: kv_cache_config.free_gpu_memory_fraction, default 0.9 (T2).
    assert "kv_cache_config:\n  free_gpu_memory_fraction: 0.90" in yaml_text
    if trtllm["kv_dtype"] == "fp8":
        assert "  dtype: fp8" in yaml_text
    if trtllm["spec"].startswith("mtp"):
        k = int(re.search(r"k=(\d+)", trtllm["spec"]).group(1))
        assert f"speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: {k}" in yaml_text
    # the plan's batch, or fewer where TRT-LLM's default pool cannot hold it with headroom
    batch = int(re.search(r"--max_batch_size (\d+)", cmd).group(1))
    assert 1 <= batch <= trtllm["max_running_requests"]
    # No SGLang or vLLM flag in the TRT-LLM command, and no SGLang fraction anywhere: 0.9 is TRT-LLM's.
    assert "--mem-fraction-static" not in cmd and "--tp-size" not in cmd and "--gpu-memory-utilization" not in cmd
    # SGLang's command sizes its own --mem-fraction-static for the batch (no TRT-LLM figure in it).
    assert "free_gpu_memory_fraction" not in launch["sglang"] and "--mem-fraction-static" in launch["sglang"]


def test_trtllm_data_parallel_means_one_server_per_replica(trtllm):
    if trtllm["layout"].endswith("DP8"):
        assert (
            "# one server per replica, each on its own GPUs and port:\nfor i in $(seq 0 7)"
            in trtllm["launch"]["trtllm"]
        )
        # So each endpoint gets one replica's batch plus 10 % (at least 8): the batch its launch
        # allows, --max_batch_size, where that is below the plan's
        launched = int(re.search(r"--max_batch_size (\d+)", trtllm["launch"]["trtllm"]).group(1))
        limit = min(trtllm["max_running_requests"], launched)
        assert trtllm["concurrency_per_endpoint"] == limit + max(8, -(-limit // 10))


def test_sglang_plan_keeps_each_engines_own_memory_setting():
    o = plan(PlanRequest(gpus=("8xb200",))).to_json()["options"][0]
    assert list(o["launch"]) == ["sglang", "vllm", "trtllm"]
    assert re.search(r"--mem-fraction-static 0\.\d{3}", o["launch"]["sglang"])
    assert "--gpu-memory-utilization 0.92" in o["launch"]["vllm"]  # vLLM's default (V1)
    assert "free_gpu_memory_fraction: 0.90" in o["launch"]["trtllm"]  # TRT-LLM's default (T2)


def test_amd_has_no_trtllm_command():
    o = plan(PlanRequest(gpus=("8xmi300x",), specs=("none",))).to_json()["options"][0]
    assert list(o["launch"]) == ["sglang", "vllm"]


def test_no_command_for_an_engine_that_refuses_the_configuration():
    # vLLM runs NVFP4 weight-only on Hopper (Marlin); SGLang and TensorRT-LLM refuse NVFP4 below
    # Blackwell, as the search rejects them (job.deploy.format_issues). A vLLM plan on H200 gave
    # their NVFP4 commands in --json all the same (a break-it pass): now it gives neither, and a
    # warning says why. Likewise SGLang's DFLASH refuses PP: a vLLM DFlash plan at PP2 has no
    # SGLang command.
    o = plan(
        PlanRequest(model="qwen3-235b-a22b", gpus=("8xh200",), engine="vllm", weight_dtypes=("nvfp4",), specs=("none",))
    ).to_json()["options"][0]
    assert o["weight_dtype"] == "nvfp4" and list(o["launch"]) == ["vllm"]
    for name in ("SGLang", "TensorRT-LLM"):
        assert f"no {name} command in --json: NVFP4 weights: {name} runs NVFP4 only on Blackwell" in " ".join(
            o["warnings"]
        )
    o = plan(PlanRequest(gpus=("8xb200",), engine="vllm", specs=("dflash:7",), tp=1, dp=4)).to_json()["options"][0]
    assert "PP2" in o["best"] and list(o["launch"]) == ["vllm", "trtllm"]
    assert any(w.startswith("no SGLang command in --json: SGLang's DFLASH does not run") for w in o["warnings"])


def test_another_engines_command_left_at_sglangs_default_cap_says_so():
    # A vLLM plan with MTP k=1 for DeepSeek-V3 on 8× B200 at TP8 (one engine core, no DP attention:
    # --ep 1) and short requests (500 + 500 tokens, so no pool binds) runs vLLM's default
    # max_num_seqs, 1,024 per replica on a ≥ 70 GiB GPU (V2). The SGLang command in --json writes no
    # --max-running-requests (its pool holds the batch, nothing was lifted), so SGLang's default cap
    # with speculative decoding (48, engine-facts S5) would bind: a warning says so. The planned
    # engine's own launch is unaffected. (With DP attention vLLM's cap is 1,024 per engine rank and
    # the default-length job fills the pools, whose SGLang command then writes its cap; on
    # Qwen3.6-27B, a GDN hybrid, the vLLM plan fixes a running cap that keeps its steps in CUDA
    # graphs, job.graphs, and the SGLang command carries it.)
    job = {"model": "deepseek-v3", "gpus": ("8xb200",), "specs": ("mtp:1",), "tp": 8, "ep": 1}
    short = {"isl_mean": 500.0, "osl_mean": 500.0}
    o = plan(PlanRequest(engine="vllm", **job, **short)).to_json()["options"][0]  # type: ignore[arg-type]
    assert o["batch_per_replica"] == 1024 and "--max-running-requests" not in o["launch"]["sglang"]
    said = [w for w in o["warnings"] if "keeps SGLang's default running cap" in w]
    assert len(said) == 1 and "plan with --engine sglang" in said[0]
    sglang = plan(PlanRequest(**job, **short)).to_json()["options"][0]  # type: ignore[arg-type]
    assert not any("default running cap" in w for w in sglang["warnings"])


def test_sglangs_default_cap_is_not_said_to_bind_where_it_holds_the_batch():
    # A TensorRT-LLM plan of Llama-3.1-8B with EAGLE-3 on 8× H100 runs 28 per replica; SGLang's
    # default cap with speculative decoding, 48 (engine-facts S5), holds that: a break-it pass saw
    # "keeps SGLang's default running cap (48 ...), below the 28 planned".
    o = plan(PlanRequest(model="llama-3.1-8b", gpus=("8xh100-sxm",), specs=("eagle3",), engine="trtllm")).to_json()
    option = o["options"][0]
    assert option["batch_per_replica"] <= 48
    assert not any("default running cap" in w for w in option["warnings"])


def test_terminal_shows_only_the_planned_engines_command():
    from click.testing import CliRunner

    from tokenplan.cli import app

    out = CliRunner().invoke(app, ["plan", "--engine", "trtllm", "--gpu", "8xb200", "--spec", "none"]).stdout
    assert "trtllm-serve" in out and "sglang.launch_server" not in out and "--mem-fraction-static" not in out


def test_a_local_config_launches_from_its_own_folder_as_an_absolute_path(tmp_path, monkeypatch):
    # A bare folder name would be read as a Hugging Face repository id by every engine.
    folder = tmp_path / "my-checkpoint"
    folder.mkdir()
    shipped = Path(__file__).resolve().parents[2] / "src/tokenplan/catalog/models/qwen3-32b.json"
    (folder / "config.json").write_text(shipped.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for given in ("my-checkpoint/config.json", "my-checkpoint"):
        launch = plan(PlanRequest(model=given, gpus=("8xh200",), specs=("none",))).to_json()["options"][0]["launch"]
        assert f"--model-path {folder}" in launch["sglang"]
        assert all(f"{folder}" in cmd for cmd in launch.values())


def test_a_job_smaller_than_the_replicas_hold_is_driven_at_its_own_batch():
    # 1,000 prompts on 64 B200: each of the dp replicas runs 1,000 / dp of them, not its running
    # limit; SGLang runs a server per replica, so the endpoint gets ⌈1,000/dp⌉ plus 10 % (at least
    # 8; e.g. DP32: 32 + 8 = 40), not the limit.
    o = plan(PlanRequest(gpus=("64xb200",), samples=1000, specs=("none",))).to_json()["options"][0]
    dp = int(re.search(r"DP(\d+)", o["layout"]).group(1))
    in_flight = math.ceil(1000 / dp)
    assert o["concurrency_per_endpoint"] == in_flight + max(8, math.ceil(0.1 * in_flight))
    assert o["concurrency_per_endpoint"] < o["max_running_requests"]


def test_replicas_beyond_one_host_loop_a_server_per_replica_on_each_host():
    # 24 B200 at TP1: three 8-GPU HGX hosts, each running 8 one-GPU servers on ports 30000..30007;
    # the client keeps one replica's batch (+10 %) on each endpoint. vLLM keeps a server per host
    # (--max-num-seqs is each DP engine core's own).
    o = plan(PlanRequest(gpus=("24xb200",), specs=("none",))).to_json()["options"][0]
    assert o["layout"].startswith("TP1×DP24")
    cmd = o["launch"]["sglang"]
    assert cmd.startswith(
        "# one server per replica, each on its own GPUs and port on each of 3 hosts:\n"
        "for i in $(seq 0 7); do\n  CUDA_VISIBLE_DEVICES=$i python -m sglang.launch_server"
    )
    assert "--dp-size" not in cmd and "--endpoint http://HOST:30007/v1" in cmd
    assert "--data-parallel-size 8" in o["launch"]["vllm"]
    in_flight = math.ceil(o["batch_per_replica"])
    assert o["concurrency_per_endpoint"] == in_flight + max(8, math.ceil(0.1 * in_flight))


def test_the_default_cap_warning_names_only_the_caps_that_apply():
    # Qwen3.6-27B (a GDN hybrid) planned on vLLM without speculation: the SGLang command keeps its
    # radix cache on, so its cap is the state slots ÷ 5; the warning named "48 with speculative
    # decoding" too, which does not apply without speculation (a new-user pass). PP2 is fixed: its
    # batch of 1,024 per replica is above SGLang's default cap (the measured TP1×DP8 the plan now
    # leads with runs 484, under it, planning.measured)
    o = plan(PlanRequest(engine="vllm", gpus=("8xb200",), specs=("none",), pp=2)).to_json()["options"][0]
    said = [w for w in o["warnings"] if "keeps SGLang's default running cap" in w]
    assert said and all("state slots ÷ 5" in w and "speculative" not in w for w in said)
