"""Names users bring from other tools: AIConfigurator's system names and Hugging Face model ids."""

from __future__ import annotations

import pytest

from tokenplan.catalog import gpu_key, load_gpu, load_model
from tokenplan.catalog import model_for_hf_id as model_key
from tokenplan.errors import CatalogError


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
    ],
)
def test_hugging_face_ids_resolve_to_shipped_models(hf_id: str, name: str) -> None:
    assert model_key(hf_id) == name and load_model(hf_id).name == name


def test_an_unknown_hf_id_is_not_a_model() -> None:
    assert model_key("someone/not-a-model") is None
