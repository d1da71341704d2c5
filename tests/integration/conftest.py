"""Fixtures: the tiny reasoning model served by ``transformers serve``, and the fault server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.engines import TransformersServe  # noqa: E402
from tests.support.tiny_model import build_reasoning_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reasoning_model(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="session")
def served_model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    server = TransformersServe(tiny_model_dir, tmp_path_factory.mktemp("serve"))
    yield server
    server.stop()
