"""Plan-sweep throughput: configurations evaluated per second on one core.

Evaluates every candidate a plan search would (``tokenplan.planning.space.candidates``: layouts
× weight dtypes × KV dtypes × speculative settings × running-request caps) for several models ×
hardware options, each at several concurrencies, through ``tokenplan.job.evaluate.evaluate`` —
the one path ``plan`` and ``predict`` share. Rejections count as evaluated configurations (the
plan evaluates them too, to report their reason).

Run:  python benchmarks/plan_sweep.py [--repeats 5] [--profile] [--short]

Prints the number of configurations, the time of each repeat, configurations per CPU-second
(the process's CPU time, ``time.process_time``: on a shared, loaded machine wall time measures
the other processes too) and per wall-second, best and median repeat, and the time for 10,000
configurations. The first repeat is cold (model parsing and per-model caches fill); the figure
quoted is the median of the repeats. Step times are kept by the value of what they depend on
(``perf.step_constants``), and the GEMM curves' fractions by the rows they are read at
(``perf.gemm.fractions_at_rows``), so a repeat of the same search would find every one of them:
each repeat forgets both first (``forget_steps``) and times one search as a new process runs it,
with the cyclic garbage collector paused as ``planning.search.search_option`` pauses it.
The README's figure is this script's "CPU median" line, run alternately with the same script at
the peer commit (three runs each), with the ratio of the medians. ``--short`` runs one model on
one option once, in seconds, to check that the script still runs (CI); its figures mean nothing.
This is a report, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from tokenplan.catalog import load_engine, load_gpu, load_model, shipped_efficiency
from tokenplan.job.evaluate import Rejection, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf.speculative import parse_spec
from tokenplan.perf.step_constants import forget_steps
from tokenplan.planning.search import cyclic_gc_paused
from tokenplan.planning.space import HardwareOption, candidates

MODELS = (
    "qwen3.6-27b",
    "llama-3.1-8b",
    "llama-3.3-70b",
    "qwen3-30b-a3b",
    "gpt-oss-120b",
    "deepseek-v3",
    "qwen3-235b-a22b",
)
OPTIONS = ((4, "rtx-pro-6000"), (8, "b200"), (8, "h100-sxm"), (8, "h200"), (8, "mi300x"), (4, "l40s"))
CONCURRENCIES = (None, 1.0, 16.0, 64.0, 256.0, 1024.0)
SPECS = ("none", "mtp:1", "mtp:3")
ENGINE = "sglang"

# The default job of ``tokenplan plan``: lognormal ISL mean 1,024 (σ 0.8, cap 16,384) and
# OSL mean 2,500 (σ 1.0, cap 32,768).
ISL = LengthDist(1024, 0.8, 16384)
OSL = LengthDist(2500, 1.0, 32768)


def pin_to_one_core() -> str:
    """Pin this process to CPU 0 where the OS allows it; say what was done."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
        return "pinned to CPU 0"
    return "not pinned (no sched_setaffinity on this OS)"


def work_items(models: tuple[str, ...] = MODELS, options: tuple = OPTIONS) -> list[tuple]:
    """(model, gpu, config, efficiency, concurrency) for every configuration of the sweep."""
    engine = load_engine(ENGINE)
    table = shipped_efficiency()
    items = []
    for name in models:
        model = load_model(name)
        specs = [parse_spec(s) for s in SPECS]
        if model.mtp_layers == 0:
            specs = [None]
        for count, key in options:
            gpu = load_gpu(key)
            eff = table.resolve(engine.name, gpu.architecture)
            option = HardwareOption(gpu, count, None)
            for config in candidates(model, option, engine, specs, None, None, 1.0):
                for conc in CONCURRENCIES:
                    items.append((model, gpu, config, eff, conc))
    return items


def sweep(items: list[tuple]) -> tuple[int, int]:
    """Evaluate every item; return (evaluations that run, rejections)."""
    runs = rejected = 0
    for model, gpu, config, eff, conc in items:
        result = evaluate(model, gpu, config, eff, ISL, OSL, conc)
        if isinstance(result, Rejection):
            rejected += 1
        else:
            runs += 1
    return runs, rejected


def timed_sweep(models: tuple[str, ...] = MODELS, options: tuple = OPTIONS) -> tuple[int, float, float]:
    """Build the candidates and evaluate them (what a plan search does) with no step time kept
    from an earlier repeat (``forget_steps``: step times are kept by the value of what they depend
    on, so a repeat of the same search would find them all); (configurations, CPU seconds of this
    process, wall seconds)."""
    forget_steps()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with cyclic_gc_paused():  # as plan's search_option evaluates its candidates
        items = work_items(models, options)
        sweep(items)
    return len(items), time.process_time() - cpu0, time.perf_counter() - wall0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile one warm repeat; print the top functions")
    parser.add_argument("--short", action="store_true", help="one model, one option, one repeat (CI: it runs)")
    args = parser.parse_args()
    models, options = (MODELS[:1], OPTIONS[1:2]) if args.short else (MODELS, OPTIONS)
    repeats = 1 if args.short else args.repeats

    print(f"tokenplan plan sweep — {pin_to_one_core()}, Python {sys.version.split()[0]}")
    items = work_items(models, options)
    runs, rejected = sweep(items)
    print(
        f"{len(items):,} configurations per repeat ({len(models)} models × {len(options)} hardware options × "
        f"candidates × {len(CONCURRENCIES)} concurrencies): {runs:,} run, {rejected:,} rejected"
    )

    cpu, wall = [], []
    for i in range(repeats):
        n, c, w = timed_sweep(models, options)
        cpu.append(c)
        wall.append(w)
        print(
            f"  repeat {i + 1}: CPU {c:.3f} s ({n / c:,.0f} configurations per CPU-second), "
            f"wall {w:.3f} s ({n / w:,.0f}/s)"
        )
    n = len(items)
    for name, seconds in (("CPU", cpu), ("wall", wall)):
        best, median = min(seconds), statistics.median(seconds)
        print(
            f"{name:4s} best {n / best:,.0f} configurations/s, median {n / median:,.0f} → "
            f"{10_000 * median / n:.3f} s per 10,000"
        )
    median = statistics.median(cpu)
    print("target: 10,000 configurations in ≤ 1 CPU-second —", "met" if 10_000 * median / n <= 1.0 else "NOT met")

    # The same figure over the configurations that run only (rejections stop early and are cheaper).
    running = [it for it in items if not isinstance(evaluate(it[0], it[1], it[2], it[3], ISL, OSL, it[4]), Rejection)]
    run_seconds = []
    for _ in range(repeats):
        forget_steps()
        start = time.process_time()
        with cyclic_gc_paused():
            sweep(running)
        run_seconds.append(time.process_time() - start)
    run_median = statistics.median(run_seconds)
    print(
        f"runnable only ({len(running):,}): median {len(running) / run_median:,.0f} configurations per "
        f"CPU-second → {10_000 * run_median / len(running):.3f} s per 10,000"
    )

    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        timed_sweep(models, options)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
