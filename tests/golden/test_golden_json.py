"""The README's ``--json`` examples print byte-for-byte what they printed before issue 13.

The expected files are the outputs of the code at the commit that added them (before the top
floor was redesigned); see ``regenerate.py`` for when they may be rewritten. The commands run
together (one interpreter start each), so the module costs about one start per core.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, HERE, run_case  # noqa: E402


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cwd = tmp_path_factory.mktemp("golden")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_case, args, cwd) for name, args in CASES.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_output_is_byte_identical(outputs: dict[str, str], name: str) -> None:
    expected = (HERE / name).read_text(encoding="utf-8")
    json.loads(expected)  # the golden file is JSON, not an error message
    assert outputs[name] == expected, f"tokenplan {' '.join(CASES[name])} changed its --json output"


def test_every_golden_file_has_a_case() -> None:
    assert sorted(p.name for p in HERE.glob("*.json")) == sorted(CASES)
