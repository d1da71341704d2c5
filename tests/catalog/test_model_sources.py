"""Every shipped model says where its config.json comes from (README: "tokenplan catalog
gpus|models — every figure with its source"; a new-user pass found ``catalog models --json``
without one)."""

from __future__ import annotations

from tokenplan.catalog import model_names
from tokenplan.catalog.listing import catalog_models, model_sources


def test_every_shipped_model_has_its_recorded_source() -> None:
    sources = model_sources()
    assert set(model_names()) <= set(sources), sorted(set(model_names()) - set(sources))
    listed = {m.name: m.source for m in catalog_models()}
    # SOURCES.md: "| qwen3.5-27b.json | Qwen/Qwen3.5-27B | |" and the Qwen3.6 row with its note
    assert listed["qwen3.5-27b"] == "huggingface.co/Qwen/Qwen3.5-27B"
    assert listed["qwen3.6-27b"] == (
        "huggingface.co/nvidia/Qwen3.6-27B-NVFP4 (same architecture as Qwen/Qwen3.6-27B; quantization removed)"
    )
