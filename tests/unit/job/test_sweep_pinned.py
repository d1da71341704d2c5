"""A plan sweep's figures are bit-for-bit those of the code before issue 30's speed-up.

Issue 30 reads the GEMM curves once per deployment and GEMM size instead of once per family per
step, and computes the wave prefill count without numpy; both must leave every figure unchanged,
to the last bit. Here, and only here, the expected values are a recorded output of the code
rather than figures derived by hand: the requirement itself is equality with the old code, so
the old code's output is the oracle. ``sweep_pinned.json`` was written by ``sweep_pin.py`` at
commit dfd9b80 (before the change), and written again after each intended change of figures
(the search stopped offering EP across pipeline stages, 23,664 → 21,744 and 9,692 → 8,944
configurations; last: SGLang rejects speculative decoding with pipeline stages, 4,992 and 1,168
configurations become rejections, each said in the stored reason; then the wording of the
"no sequence fits the KV cache" rejection, which names the tokens a running request holds, and
a state-slot limit named as such, with no figure moved; DP attention's running caps and token
budgets per engine rank under vLLM and TRT-LLM, and the refit after them); it holds, for benchmarks/plan_sweep.py's 21,744
configurations and for 8,944 configurations under SGLang, vLLM and TRT-LLM (separate and mixed
prefill), the count and the SHA-256 of every configuration's figures (throughput, batch and its
limits, TPOT, TTFT, cycle, decode-step breakdown, warnings, rejection reasons), and the figures
of every 25th configuration of the second sweep in full, so that a change says which figure
moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep_pin import FIXTURE, STRIDE, bench_sweep, listed_sweep, run  # noqa: E402

PINNED = json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_listed_sweep_figures_are_unchanged() -> None:
    got = run(listed_sweep(), STRIDE)
    expected = PINNED["listed"]
    assert got["configurations"] == expected["configurations"]
    for index, row in expected["rows"].items():
        assert got["rows"][index] == row, f"configuration {index} of the listed sweep changed"
    assert got["sha256"] == expected["sha256"], "a configuration between the stored ones changed"


def test_benchmark_sweep_figures_are_unchanged() -> None:
    got = run(bench_sweep())
    assert got["configurations"] == PINNED["bench"]["configurations"]
    assert got["sha256"] == PINNED["bench"]["sha256"]
