"""Names users bring from other tools: AIConfigurator's system names and Hugging Face model ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.catalog import gpu_key, load_gpu, load_model
from tokenplan.catalog import model_for_hf_id as model_key
from tokenplan.errors import CatalogError, ConfigError


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("h200_sxm", "h200"),
        ("b200_sxm", "b200"),
        ("H100_SXM", "h100-sxm"),
        ("a100_sxm", "a100-80gb"),
        ("h100-sxm", "h100-sxm"),
    ],
)
def test_aiconfigurator_system_names_resolve_to_catalog_gpus(name: str, key: str) -> None:
    assert gpu_key(name) == key and load_gpu(name).key == key


def test_an_unknown_gpu_still_names_the_allowed_keys() -> None:
    with pytest.raises(CatalogError, match=r"gpu 'h999_sxm' is not in the catalog"):
        load_gpu("h999_sxm")


@pytest.mark.parametrize(
    ("hf_id", "name"),
    [
        ("Qwen/Qwen3-8B", "qwen3-8b"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"),
        ("openai/gpt-oss-20b", "gpt-oss-20b"),
        # the instruction-tuned releases the launch serves, and the base names the configs came from
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Meta-Llama-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Meta-Llama-3.1-405B-Instruct", "llama-3.1-405b"),
        ("meta-llama/Llama-2-70b-hf", "llama-2-70b"),
        ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
        ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ],
)
def test_hugging_face_ids_resolve_to_shipped_models(hf_id: str, name: str) -> None:
    assert model_key(hf_id) == name and load_model(hf_id).name == name


def test_an_unknown_hf_id_is_not_a_model() -> None:
    assert model_key("someone/not-a-model") is None


def test_an_fp8_checkpoints_id_is_read_as_released_in_fp8_and_launched_from_itself() -> None:
    from tokenplan.catalog import launch_info

    # Qwen/Qwen3.6-27B-FP8 is the publisher's FP8 checkpoint of the BF16 qwen3.6-27b: --weight-dtype
    # auto (the released format) means FP8 for it, and the launch loads that repository
    assert load_model("Qwen/Qwen3.6-27B-FP8").native_weight_dtype == "fp8"
    assert load_model("Qwen/Qwen3.6-27B").native_weight_dtype == "bf16"
    assert load_model("qwen3.6-27b").native_weight_dtype == "bf16"
    assert launch_info("Qwen/Qwen3.6-27B-FP8", "qwen3.6-27b")[0] == "Qwen/Qwen3.6-27B-FP8"
    assert launch_info("qwen3.6-27b", "qwen3.6-27b")[0] == "Qwen/Qwen3.6-27B"
    # a model released in FP8 stays FP8 (deepseek-ai/DeepSeek-R1's own checkpoint)
    assert load_model("deepseek-ai/DeepSeek-R1").native_weight_dtype == "fp8"


def test_a_plan_in_another_format_than_the_named_checkpoint_launches_the_bf16_release() -> None:
    from tokenplan.api.plan import PlanRequest, plan
    from tokenplan.catalog import base_repo_of

    # The FP8 checkpoint cannot be loaded as BF16: a BF16 plan of it launches the BF16 release
    # it was made from; an FP8 plan launches the checkpoint named; a model released in FP8 has
    # no BF16 release behind its own id.
    assert base_repo_of("Qwen/Qwen3.6-27B-FP8", "qwen3.6-27b") == "Qwen/Qwen3.6-27B"
    assert base_repo_of("Qwen/Qwen3.6-27B", "qwen3.6-27b") is None
    assert base_repo_of("deepseek-ai/DeepSeek-R1", "deepseek-r1") is None
    for dtype, repo in (("bf16", "Qwen/Qwen3.6-27B"), ("fp8", "Qwen/Qwen3.6-27B-FP8")):
        req = PlanRequest(model="Qwen/Qwen3.6-27B-FP8", gpus=("8xb200",), weight_dtypes=(dtype,), engine="vllm")
        launch = plan(req).options[0].chosen.launch["vllm"]
        assert f"vllm serve {repo} " in launch and (dtype == "fp8" or "FP8" not in launch), launch


def test_qwen3_5_family_launches_trtllm_with_its_forced_thinking_parser() -> None:
    from tokenplan.catalog import launch_info

    # TensorRT-LLM registers "qwen3_5" with reasoning_at_start=True (PR #14659): Qwen3.5/3.6's
    # template pre-injects "<think>", which its "qwen3" key (reasoning_at_start=False) misses
    for model in ("qwen3.6-27b", "qwen3.5-397b-a17b"):
        _, parsers, _ = launch_info(model, model)
        assert parsers == {"sglang": "qwen3", "vllm": "qwen3", "trtllm": "qwen3_5"}
    assert launch_info("qwen3-32b", "qwen3-32b")[1] == "qwen3"  # Qwen3 itself emits its "<think>"


def test_an_empty_folder_named_like_a_catalog_model_does_not_shadow_it(tmp_path, monkeypatch):
    # a break-it pass: an empty ./qwen3-8b in the working directory refused --model qwen3-8b
    # ("qwen3-8b holds none") and would have printed that folder as the launch's model path.
    from tokenplan.catalog import launch_info, load_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen3-8b").mkdir()
    spec = load_model.__wrapped__("qwen3-8b")  # past the cache: the folder is new
    assert spec.name == "qwen3-8b" and spec.num_layers == 36  # Qwen3-8B's config.json
    assert launch_info("qwen3-8b", "qwen3-8b")[0] == "Qwen/Qwen3-8B"
    # a folder that holds a config.json is still read as the user's model
    (tmp_path / "qwen3-8b" / "config.json").write_text("{}")  # an empty object: its keys are missing
    with pytest.raises(ConfigError, match="qwen3-8b/config.json"):
        load_model.__wrapped__("qwen3-8b")


@pytest.mark.parametrize(
    ("name", "repo"),
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct"),
        ("llama-2-70b", "meta-llama/Llama-2-70b-chat-hf"),
        ("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
    ],
)
def test_a_catalog_model_whose_config_came_from_a_base_model_launches_its_chat_release(name: str, repo: str) -> None:
    # a generation job sends chat requests; a base checkpoint's tokenizer has no chat template
    from tokenplan.catalog import launch_info

    assert launch_info(name, name)[0] == repo


def test_a_config_json_in_the_working_directory_is_named_after_its_folder(tmp_path, monkeypatch) -> None:
    # a new-user pass: --model ./config.json gave the model the name "" (title, bullets, --json)
    folder = tmp_path / "my-model"
    folder.mkdir()
    source = Path(__file__).parents[2] / "src/tokenplan/catalog/models/qwen3-32b.json"
    (folder / "config.json").write_text(source.read_text())
    monkeypatch.chdir(folder)
    assert load_model("./config.json").name == "my-model"
