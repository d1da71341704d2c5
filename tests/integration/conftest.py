"""Fixtures: the tiny reasoning model served by ``transformers serve``, and the fault server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# The fixtures import their support modules (httpx, transformers) when used, not at collection, so
# a module that needs neither (the Ray tests: pytest and tokenplan[ray] alone) collects without them.


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.tiny_model import build_reasoning_model

    return build_reasoning_model(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="session")
def served_model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    from tests.support.engines import TransformersServe

    server = TransformersServe(tiny_model_dir, tmp_path_factory.mktemp("serve"))
    yield server
    server.stop()
