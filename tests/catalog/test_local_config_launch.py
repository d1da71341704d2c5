"""A local config.json is launched as its model_type's shipped models are, and a path that does
not exist is not read as a catalog name (a new-user pass: ``--model ./qwen3.6-27b``, no such
folder, planned the catalog's BF16 model and launched ``--model-path ./qwen3.6-27b``; a copy of
Qwen3.6-27B's config.json in a folder was launched without ``--reasoning-parser``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.catalog import launch_info, load_model
from tokenplan.errors import InputError

MODELS = Path(__file__).resolve().parents[2] / "src" / "tokenplan" / "catalog" / "models"


def _copy(tmp_path: Path, model: str) -> str:
    folder = tmp_path / model
    folder.mkdir()
    shutil.copy(MODELS / f"{model}.json", folder / "config.json")
    return str(folder)


@pytest.mark.parametrize("name", ["./qwen3.6-27b", "/no/such/dir/qwen3.6-27b", "../qwen3.6-27b/"])
def test_a_path_that_does_not_exist_is_refused_not_read_as_a_catalog_name(name: str) -> None:
    with pytest.raises(InputError) as caught:
        load_model(name)
    assert "nothing is at this path" in str(caught.value)


def test_a_hugging_face_id_of_a_catalog_model_still_resolves() -> None:
    assert load_model("Qwen/Qwen3.6-27B-FP8").native_weight_dtype == "fp8"


def test_a_copy_of_a_shipped_config_gets_its_types_parser(tmp_path: Path) -> None:
    # launch.yaml: every qwen3_5 model is launched with SGLang/vLLM "qwen3", TensorRT-LLM "qwen3_5"
    folder = _copy(tmp_path, "qwen3.6-27b")
    parsers = launch_info(folder, load_model(folder).name)[1]
    assert parsers == {"sglang": "qwen3", "vllm": "qwen3", "trtllm": "qwen3_5"}
    commands = plan(PlanRequest(model=folder, gpus=("8xb200",))).to_json()["options"][0]["launch"]
    assert "--reasoning-parser qwen3" in commands["sglang"] and "--reasoning-parser qwen3" in commands["vllm"]


def test_a_type_whose_shipped_models_disagree_gets_no_parser(tmp_path: Path) -> None:
    # deepseek_v3: DeepSeek-V3 has no parser, DeepSeek-R1 has one; the type does not say which
    folder = _copy(tmp_path, "deepseek-r1")
    assert launch_info(folder, load_model(folder).name)[1] is None


def test_a_copy_of_a_model_that_ships_its_own_code_gets_the_flag(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "kimi-k2.5")  # kimi_k25: launch.yaml trust_remote_code true
    assert launch_info(folder, load_model(folder).name)[2] is True
    assert launch_info(_copy(tmp_path, "qwen3-8b"), "qwen3-8b")[2] is False


def test_a_config_that_is_not_an_object_gets_no_parser(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps([1, 2]))
    assert launch_info(str(folder), "odd")[1:] == (None, False)


def test_an_empty_folder_shaped_like_a_hub_id_is_read_as_that_id_by_plan_and_launch(tmp_path, monkeypatch) -> None:
    # a break-it pass: load_model read an empty ./Qwen/Qwen3.6-27B as the id, the launch as a
    # local folder (--model-path /…/Qwen/Qwen3.6-27B, no parser); both now read it as the id
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Qwen" / "Qwen3.6-27B").mkdir(parents=True)
    name = load_model("Qwen/Qwen3.6-27B").name
    repo, parsers, _ = launch_info("Qwen/Qwen3.6-27B", name)
    assert (name, repo, parsers["sglang"]) == ("qwen3.6-27b", "Qwen/Qwen3.6-27B", "qwen3")


def test_a_tilde_path_is_expanded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _copy(tmp_path, "qwen3-8b")
    assert load_model("~/qwen3-8b").hidden_size == 4096  # Qwen3-8B's config: hidden_size 4096
    assert launch_info("~/qwen3-8b", "qwen3-8b")[0] == str((tmp_path / "qwen3-8b").resolve())


def test_another_owners_id_or_a_mistyped_path_is_said_to_be_read_as_an_id() -> None:
    said = [a for a in load_model("checkpoints/qwen3.6-27b").approximations if "nothing is at this path" in a]
    assert said == [
        "--model checkpoints/qwen3.6-27b: nothing is at this path; read as the Hugging Face id of a qwen3.6-27b checkpoint"
    ]
    assert not any("nothing is at this path" in a for a in load_model("Qwen/Qwen3.6-27B-FP8").approximations)
