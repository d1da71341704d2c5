"""Measurement files as ``tokenplan generate`` and ``tokenplan bench`` write them, for the report
tests: a run directory with ``summary.json`` and a bench JSON with two concurrency levels."""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tokenplan_cmd() -> list[str]:
    """The installed ``tokenplan`` script of this interpreter, else the same entry point via ``-c``."""
    script = Path(sysconfig.get_path("scripts")) / "tokenplan"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from tokenplan.cli import main; main()"]


def latency(mean_s: float) -> dict:
    """A bench latency distribution (seconds): p50 = mean, p90 = 1.5×, p99 = 2×."""
    return {"mean": mean_s, "p50": mean_s, "p90": 1.5 * mean_s, "p99": 2 * mean_s}


def bench_level(concurrency: int, output_tok_s: float) -> dict:
    return {
        "concurrency": concurrency,
        "achieved_concurrency": concurrency * 0.97,
        "requests": 40 * concurrency,
        "errors": 0,
        "duration_s": 60.0,
        "request_throughput_per_s": output_tok_s / 2500,
        "output_tok_s": output_tok_s,
        "total_tok_s": output_tok_s * 1.4,
        "ttft_s": latency(0.4 + concurrency / 500),
        "tpot_s": latency(0.02 + concurrency / 20000),
        "itl_s": latency(0.02),
        "e2e_s": latency(60.0),
    }


@pytest.fixture(scope="session")
def bench_file(tmp_path_factory) -> Path:
    """8 GPUs measured at 64 and 512 requests in flight."""
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    path.write_text(
        json.dumps(
            {
                "model": "qwen3.6-27b",
                "endpoints": ["http://127.0.0.1:30000/v1"],
                "num_gpus": 8,
                "levels": [bench_level(64, 12_000.0), bench_level(512, 41_000.0)],
                "server": {},
                "cap": {},
            }
        )
    )
    return path


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """A finished generate run: 1,000 units in 2 hours, 2.5 M output tokens."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "model": "qwen3.6-27b",
                "units_total": 1000,
                "stored": 998,
                "skipped": 0,
                "errors": 2,
                "duplicates": 0,
                "rejected_rows": 0,
                "already_done": 0,
                "interrupted": False,
                "elapsed_s": 7200.0,
                "output_tokens": 2_500_000,
                "output_tok_s": 347.2,
                "plan_output_tok_s": 400.0,
                "requests_per_s": 0.14,
                "requests": 1000,
                "latency_e2e": {"count": 1000, "mean_ms": 9e4, "p50_ms": 8e4, "p90_ms": 1.5e5, "p99_ms": 2e5},
                "latency_ttft": None,
                "completion_tokens_histogram": [],
            }
        )
    )
    return folder
