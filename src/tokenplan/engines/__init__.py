"""Inference engines behind one seam: :class:`Engine` (``base.py``) and its implementations,
SGLang (``sglang.py``), vLLM (``vllm.py``) and TensorRT-LLM (``trtllm.py``).

An engine's rules are code in its own module; its figures are data in ``catalog/engines.yaml``
(read by ``tokenplan.catalog.load_engine``, which builds the engine with :func:`from_catalog`).
The performance model, the job simulation, the planner and the API ask the engine, never test
its name. Below ``perf``: imports ``arch``, ``hardware`` and ``units`` only, reads no file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenplan.engines.base import CachePools, Engine, EngineSettings, Launch
from tokenplan.engines.sglang import Sglang
from tokenplan.engines.trtllm import Trtllm
from tokenplan.engines.vllm import Vllm

__all__ = [
    "ENGINE_TYPES",
    "CachePools",
    "Engine",
    "EngineSettings",
    "Launch",
    "Sglang",
    "Trtllm",
    "Vllm",
    "from_catalog",
]

# Catalog key → the class that implements it; a new engine is a module here and an entry in
# catalog/engines.yaml.
ENGINE_TYPES: dict[str, type[Sglang | Vllm | Trtllm]] = {"sglang": Sglang, "vllm": Vllm, "trtllm": Trtllm}


def from_catalog(name: str, entry: Mapping[str, Any]) -> Engine:
    """The engine ``name`` built from its parsed ``catalog/engines.yaml`` entry.

    Raises:
        KeyError: ``name`` has no implementation here, or the entry lacks a key (both are
            defects of the shipped catalog, which tests/unit/engines load in full).
        TypeError: the entry has a key the engine does not know.
    """
    return ENGINE_TYPES[name].from_entry(name, entry)
