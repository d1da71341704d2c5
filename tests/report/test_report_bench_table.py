"""``tokenplan report``'s bench table: latencies in ms as ``bench`` prints them, GPUs counted right."""

from __future__ import annotations

import json
from pathlib import Path

from tests.report.conftest import bench_level

from tokenplan.api.report import report_inputs
from tokenplan.report.html import measurements_report_html


def test_a_fast_servers_tpot_keeps_its_precision_in_ms_and_one_gpu_is_singular(tmp_path: Path) -> None:
    level = bench_level(1, 360.0)
    # vLLM on the CPU (docs/bench.md): TPOT p50 2.4 ms, p99 3.1 ms; TTFT p50 14.5 ms, p99 20.5 ms.
    # In seconds to 3 decimals they read 0.002 / 0.003 (−17 %, −3 %) and 0.014 / 0.021 (0.0145 s → 0.014 or 0.015 by float rounding).
    level["tpot_s"] = {"mean": 0.0025, "p50": 0.0024, "p90": 0.003, "p99": 0.0031}
    level["ttft_s"] = {"mean": 0.015, "p50": 0.0145, "p90": 0.02, "p99": 0.0205}
    bench = {"model": "tiny-llama", "endpoints": ["http://127.0.0.1:8000/v1"], "num_gpus": 1, "levels": [level]}
    (tmp_path / "bench.json").write_text(json.dumps(bench | {"server": {}, "cap": {}}))
    page = measurements_report_html(report_inputs([], bench_path=str(tmp_path / "bench.json")))
    assert "TPOT p50 / p99 ms" in page and "TTFT p50 / p99 ms" in page
    assert "2.4 / 3.1" in page and "14.5 / 20.5" in page
    assert "on 1 GPU</h2>" in page and "1 GPUs" not in page
