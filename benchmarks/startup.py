"""Start-up and wall time of the CLI against a bare interpreter.

Times, as whole processes, ``python -c pass`` (the floor no CLI can beat), ``tokenplan --version``
(start-up alone: typer and the command table) and ``tokenplan plan`` (the default job, search and
rendering included), each over ``--repeats`` runs, and prints the minimum and median of each.
It also lists which heavy modules ``tokenplan plan`` imported (aiohttp, the runner, bench, report
are not needed to plan and must not be loaded).

Run:  python benchmarks/startup.py [--repeats 7]

A report, not a test: wall times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tokenplan --version": CLI + ["--version"],
    "tokenplan plan": CLI + ["plan"],
}
NOT_NEEDED_TO_PLAN = ("aiohttp", "tokenplan.runner", "tokenplan.client", "tokenplan.bench",
                      "tokenplan.api.generate", "tokenplan.api.bench", "matplotlib", "plotly")


def wall_s(argv: list[str]) -> float:
    """Seconds of wall time for one run of ``argv`` (output discarded)."""
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def imported_by_plan() -> list[str]:
    """Top-level names from NOT_NEEDED_TO_PLAN that ``tokenplan plan`` imports."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    run = subprocess.run(COMMANDS["tokenplan plan"], env=env, capture_output=True, text=True,
                         check=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()}
    return sorted(n for n in names if n.startswith(NOT_NEEDED_TO_PLAN))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for name, argv in COMMANDS.items():
        wall_s(argv)  # warm the file cache and .pyc files
        times = [wall_s(argv) for _ in range(args.repeats)]
        print(f"{name:22s} min {min(times):.3f} s  median {statistics.median(times):.3f} s")
    extra = imported_by_plan()
    print("modules plan imports but does not need:", ", ".join(extra) if extra else "none")


if __name__ == "__main__":
    main()
