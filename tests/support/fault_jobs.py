"""A small generate job against the fault-injecting server (tests.support.fault_server), shared by
the integration tests of faults, refusals and run outcomes: its input, its request and its files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenplan.api.generate import GenerateRequest

FAST_RETRY = {"retry_base_delay_s": 0.01, "probe_interval_s": 0.2}  # seconds: retries and probes without waiting


def prompts(path: Path, n: int) -> Path:
    """Write ``n`` rows ``{"id": "r<i>", "prompt": "prompt <i>"}`` as JSONL to ``path``."""
    path.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"prompt {i}"}) + "\n" for i in range(n)))
    return path


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file (none when it does not exist)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def fault_request(tmp_path: Path, url: str, **options: Any) -> GenerateRequest:
    """The request of a job over ``tmp_path/in.jsonl`` into ``tmp_path/run`` against ``url``."""
    return GenerateRequest.build(
        **{
            "inputs": [str(tmp_path / "in.jsonl")],
            "out_dir": tmp_path / "run",
            "endpoints": [url],
            "model": "fault-model",
            **FAST_RETRY,
            **options,
        }
    )
