"""An engine with no draft model for a checkpoint's MTP layers gets no MTP plan and no command
(engines/mtp_support.py gives each entry's source): SGLang skips MiniMax-M3's ``model.mtp``
layers and TensorRT-LLM does not load them, while vLLM runs them (``MiniMaxM3MTP``). The
MiniMax-M2.x releases hold no MTP weights, so MiniMax-M2.5 plans no MTP on any engine; nor does
MiniMax-M3's BF16 release, so the catalog's MiniMax-M3 plans none and the engine table applies to
a user's config that names MTP layers."""

from __future__ import annotations

import shutil
from pathlib import Path

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.catalog import load_model
from tokenplan.engines.mtp_support import mtp_refusal

MODELS = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models"


def test_the_table_refuses_only_the_pairs_the_engines_sources_refuse():
    assert mtp_refusal("sglang", "MiniMaxM3ForCausalLM") is not None
    assert mtp_refusal("trtllm", "MiniMaxM3ForCausalLM") is not None
    assert mtp_refusal("vllm", "MiniMaxM3ForCausalLM") is None
    # Qwen3.5/3.6 (qwen3_5 in vLLM's override) and DeepSeek-V3 (deepseek_mtp) run their MTP layers
    assert mtp_refusal("vllm", "Qwen3_5ForConditionalGeneration") is None
    assert mtp_refusal("trtllm", "DeepseekV3ForCausalLM") is None
    # where one engine runs it the reason names that engine; where none does, another draft
    assert "use --engine vllm, another draft" in mtp_refusal("sglang", "MiniMaxM3ForCausalLM")
    assert "--engine" not in mtp_refusal("vllm", "MiniMaxM2ForCausalLM")


def test_minimax_m25_ships_no_mtp_layers():
    # its config.json says use_mtp true, num_mtp_modules 3, but the release's weights hold no
    # mtp.* tensors (MiniMax-AI/MiniMax-M2.5 issue #8): the default plan searched and recommended
    # MTP k=1 for it, a launch that loads no draft
    assert load_model("minimax-m2.5").mtp_layers == 0
    p = plan(PlanRequest(model="minimax-m2.5", gpus=("8xh200",))).to_json()
    assert p["options"][0]["spec"] == "none"
    assert any(line.startswith("MTP was not searched: minimax-m2.5 ships no MTP layers") for line in p["answer"])


def _m3_with_mtp(tmp_path: Path) -> str:
    """A user's MiniMax-M3 config.json that names one MTP layer (the catalog's copy of the BF16
    release's, read as is: num_nextn_predict_layers 1), as a derivative holding the layer would."""
    path = tmp_path / "config.json"
    shutil.copy(MODELS / "minimax-m3.json", path)
    assert load_model(str(path)).mtp_layers == 1
    return str(path)


def test_the_catalogs_minimax_m3_release_ships_no_mtp_layers():
    # its text_config names num_nextn_predict_layers 1 and num_mtp_modules 7, but the BF16 release's
    # weight map holds no mtp.* tensor (catalog/launch.yaml release_mtp_layers): vLLM's MiniMaxM3MTP
    # would fail to load "MTP layer 0", so no engine runs it and the plan searches none
    assert load_model("minimax-m3").mtp_layers == 0
    p = plan(PlanRequest(model="minimax-m3", gpus=("8xb200",), engine="vllm", specs=("mtp:1",))).to_json()
    assert any(line.startswith("MTP was not searched: minimax-m3 ships no MTP layers") for line in p["answer"])
    assert all('"method":"mtp"' not in o.get("launch", {}).get("vllm", "") for o in p["options"])


def test_an_sglang_mtp_plan_of_minimax_m3_says_why_nothing_runs(tmp_path):
    p = plan(PlanRequest(model=_m3_with_mtp(tmp_path), gpus=("8xb200",), specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert "best" not in option  # nothing runs
    # one reason for every configuration searched: it holds for every layout and format alike
    (reason,) = option["rejected"]
    assert option["rejected"][reason] == option["configurations"]
    assert reason.startswith("SGLang builds no MTP draft for MiniMax-M3") and "--engine vllm" in reason


def test_a_vllm_mtp_plan_of_minimax_m3_writes_no_command_for_the_engines_that_cannot_start_it(tmp_path):
    p = plan(PlanRequest(model=_m3_with_mtp(tmp_path), gpus=("8xb200",), engine="vllm", specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert list(option["launch"]) == ["vllm"]
    assert '"method":"mtp"' in option["launch"]["vllm"]
    said = " ".join(option["warnings"])
    assert "no SGLang command in --json: SGLang builds no MTP draft for MiniMax-M3" in said
    assert "no TensorRT-LLM command in --json: TensorRT-LLM does not load MiniMax-M3's MTP layers" in said


def test_a_model_whose_mtp_every_engine_runs_keeps_every_command():
    p = plan(PlanRequest(model="qwen3.6-27b", gpus=("1xb200",), specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert '"method":"mtp"' in option["launch"]["vllm"]
    assert "decoding_type: MTP" in option["launch"]["trtllm"]


def test_qwen3_next_plans_its_one_mtp_layer():
    # its config.json names no MTP layer, yet the checkpoint ships one: vLLM's
    # Qwen3NextMultiTokenPredictor reads getattr(config, "num_nextn_predict_layers", 1), and SGLang
    # sets it to 1 for the Qwen3NextForCausalLMMTP draft (arch.hf_defaults). The plan said
    # "MTP was not searched: qwen3-next-80b-a3b ships no MTP layers".
    assert load_model("qwen3-next-80b-a3b").mtp_layers == 1
    p = plan(PlanRequest(model="qwen3-next-80b-a3b", gpus=("4xh200",), specs=("mtp:1",))).to_json()
    assert not any(line.startswith("MTP was not searched") for line in p["answer"])
    assert p["options"][0]["spec"].startswith("mtp")


def test_vllm_runs_no_qwen35_mtp_draft_with_pipeline_parallelism():
    # vLLM's Qwen3_5MTP implements no SupportsPP (v0.28.0 qwen3_5_mtp.py; vllm#36643), so the engine
    # refuses PP > 1 with MTP; the vLLM plan listed TP1×PP2×DP2 and TP1×PP4 MTP alternatives
    p = plan(PlanRequest(model="qwen3.6-27b", gpus=("8xb200",), engine="vllm", specs=("mtp:1",))).to_json()
    (option,) = p["options"]
    assert all("PP" not in a["configuration"] for a in option["alternatives"])
    refusals = [r for r in option["rejected"] if "does not implement pipeline parallelism" in r]
    assert len(refusals) == 1 and "use TP or DP without PP, or --spec none" in refusals[0]
    # without speculation PP stays searched, and SGLang's own PP refusal is its own
    plain = plan(PlanRequest(model="qwen3.6-27b", gpus=("8xb200",), engine="vllm", specs=("none",))).to_json()
    assert not any("does not implement pipeline parallelism" in r for r in plain["options"][0]["rejected"])
