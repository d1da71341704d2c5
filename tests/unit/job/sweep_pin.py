"""The sweep whose figures ``test_sweep_pinned.py`` pins, and the script that wrote its fixture.

Every candidate a plan search would evaluate (``planning.space.candidates``) for a few models ×
hardware options × engines, each at several concurrencies, through ``job.evaluate.evaluate``;
each result reduced to its figures (floats as Python writes them, which JSON reads back to the
same double). ``sweep_pinned.json`` was first written by ``python tests/unit/job/sweep_pin.py`` at
commit dfd9b80, before issue 30 changed how the GEMM curves are read and how the batch search
runs, and is rewritten only by a commit that changes the physics on purpose (the engines' memory
allocation, SGLang's post-verify state copy), saying so, as the golden files are: never to make a
refactor pass (the test exists to say a refactor did not move the figures).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from tokenplan.catalog import load_engine, load_gpu, load_model, shipped_efficiency
from tokenplan.job.evaluate import Rejection, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf.speculative import parse_spec
from tokenplan.planning.space import HardwareOption, candidates

FIXTURE = Path(__file__).with_name("sweep_pinned.json")

# Pinned by digest, every 25th configuration also by its figures: dense, hybrid (Gated
# DeltaNet), MoE, MLA + MTP; GPUs with size-banded
# curves (B200, H200), the fitted form (MI300X), PCIe (RTX PRO 6000); separate and mixed prefill.
MODELS = ("qwen3.6-27b", "llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3")
OPTIONS = ((4, "rtx-pro-6000"), (8, "b200"), (8, "h200"), (8, "mi300x"))
ENGINES = ("sglang", "vllm", "trtllm")
CONCURRENCIES = (None, 64.0)
STRIDE = 25  # every STRIDE-th configuration of the listed sweep is stored in full
SPECS = ("none", "mtp:1", "mtp:3")
# Pinned by digest only: benchmarks/plan_sweep.py's sweep (SGLang, 7 models × 6 options × 6 concurrencies).
BENCH_MODELS = (
    "qwen3.6-27b",
    "llama-3.1-8b",
    "llama-3.3-70b",
    "qwen3-30b-a3b",
    "gpt-oss-120b",
    "deepseek-v3",
    "qwen3-235b-a22b",
)
BENCH_OPTIONS = ((4, "rtx-pro-6000"), (8, "b200"), (8, "h100-sxm"), (8, "h200"), (8, "mi300x"), (4, "l40s"))
BENCH_CONCURRENCIES = (None, 1.0, 16.0, 64.0, 256.0, 1024.0)
# The default job of ``tokenplan plan``.
ISL = LengthDist(1024, 0.8, 16384)
OSL = LengthDist(2500, 1.0, 32768)


def items(models, options, engines, concurrencies):
    """(model, gpu, config, efficiency, concurrency) of every configuration, in a fixed order."""
    table = shipped_efficiency()
    for engine_name in engines:
        engine = load_engine(engine_name)
        for name in models:
            model = load_model(name)
            specs = [parse_spec(s) for s in SPECS] if model.mtp_layers else [None]
            for count, key in options:
                gpu = load_gpu(key)
                eff = table.resolve(engine.name, gpu.architecture)
                for config in candidates(model, HardwareOption(gpu, count, None), engine, specs, None, None, 1.0):
                    for conc in concurrencies:
                        yield model, gpu, config, eff, conc


def figures(result) -> list:
    """One evaluation's figures: a rejection's kind and reason, or the steady state's numbers."""
    if isinstance(result, Rejection):
        return ["rejected", result.kind, result.reason]
    s, t = result.steady, result.steady.decode_step
    return [
        result.output_tok_s_total,
        result.output_tok_s_per_gpu,
        s.batch,
        s.limits.kv,
        s.limits.state,
        s.limits.max_running,
        s.limits.limit,
        s.limits.reason,
        s.tpot_s,
        s.ttft_s,
        s.cycle_s,
        s.prefill_share,
        s.roofline_output_tok_s,
        t.gemm_s,
        t.experts_s,
        t.attention_s,
        t.state_s,
        t.comm_s,
        t.overhead_s,
        t.memory_bound_s,
        t.compute_bound_s,
        t.bytes_moved,
        t.flops,
        list(result.warnings),
    ]


def run(sweep, stride: int = 0) -> dict:
    """Evaluate a sweep: how many configurations, the SHA-256 of their figures (one JSON line
    each) and, with ``stride``, the figures of every ``stride``-th one by its index."""
    h, rows, n = hashlib.sha256(), {}, 0
    for i, (m, g, c, e, conc) in enumerate(sweep):
        row = figures(evaluate(m, g, c, e, ISL, OSL, conc))
        h.update(json.dumps(row).encode() + b"\n")
        if stride and i % stride == 0:
            rows[str(i)] = row
        n += 1
    return {"configurations": n, "sha256": h.hexdigest(), "rows": rows}


def bench_sweep():
    """benchmarks/plan_sweep.py's configurations."""
    return items(BENCH_MODELS, BENCH_OPTIONS, ("sglang",), BENCH_CONCURRENCIES)


def listed_sweep():
    """The listed sweep's configurations (three engines)."""
    return items(MODELS, OPTIONS, ENGINES, CONCURRENCIES)


def main() -> int:
    pinned = {"bench": run(bench_sweep()), "listed": run(listed_sweep(), STRIDE)}
    FIXTURE.write_text(json.dumps(pinned, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
