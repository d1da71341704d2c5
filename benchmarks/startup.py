"""Start-up and wall time of the CLI against a bare interpreter, and where ``plan``'s time goes.

Times, as whole processes run alternately (one of each per round, so a change in the machine's
load falls on all of them alike), ``python -c pass`` (the floor no CLI can beat),
``tokenplan --version`` (start-up alone: click and the command table) and ``tokenplan plan`` (the
default job, search and rendering included), over ``--repeats`` rounds; prints each command's
median wall and CPU seconds (the child's user + system time) and its ratio to ``python -c pass``
(the median of the per-round ratios). Then the split of one ``tokenplan plan`` process, median
over the rounds, in CPU seconds of that process (``time.process_time``) and wall seconds: the
interpreter, ``tokenplan.cli`` (click and the command table), the imports ``plan`` needs (the
plan command's modules, loaded on first use), and the compute (search and rendering). It also
lists the heavy modules ``tokenplan plan`` imported that planning does not need (numpy, scipy, typer,
pyarrow, aiohttp, the runner, bench, plotting, pydantic: none of them computes a figure ``plan``
prints; the default plan reads the GPU catalog without pydantic, see ``catalog/gpus_plain.py``).

Run:  python benchmarks/startup.py [--repeats 11] [--short] [--no-bytecode]

The children run from compiled bytecode in a private ``PYTHONPYCACHEPREFIX`` (as an installed
CLI runs from the ``.pyc`` files pip writes), whatever ``PYTHONDONTWRITEBYTECODE`` says;
``--no-bytecode`` keeps this environment as it is (see :func:`bytecode_env`).

``--short`` runs each command once (CI: the script still runs); its figures mean nothing.
A report, not a test: wall times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tokenplan --version": CLI + ["--version"],
    "tokenplan plan": CLI + ["plan"],
}
NOT_NEEDED_TO_PLAN = (
    "numpy",
    "scipy",
    "pyarrow",
    "aiohttp",
    "tokenplan.runner",
    "tokenplan.client",
    "tokenplan.bench",
    "tokenplan.api.generate",
    "tokenplan.api.bench",
    "matplotlib",
    "plotly",
    "typer",
    "pydantic",
)

# One `tokenplan plan` in a child, timed in three parts; prints a JSON object on stderr.
SPLIT = """
import contextlib, io, json, sys, time
cpu, wall = time.process_time, time.perf_counter
c0, w0 = cpu(), wall()
import tokenplan.cli
c1, w1 = cpu(), wall()
import tokenplan.cli.plan, tokenplan.api.plan, tokenplan.report.plan_output
c2, w2 = cpu(), wall()
sys.argv = ["tokenplan", "plan"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        tokenplan.cli.main()
    except SystemExit:
        pass
c3, w3 = cpu(), wall()
print(json.dumps({"startup_cpu_s": c0, "cli_import_cpu_s": c1 - c0, "plan_import_cpu_s": c2 - c1,
                  "plan_run_cpu_s": c3 - c2, "cli_import_wall_s": w1 - w0, "plan_import_wall_s": w2 - w1,
                  "plan_run_wall_s": w3 - w2}), file=sys.stderr)
"""


# The children's environment (main sets it): with or without compiled bytecode (see bytecode_env).
ENV: dict[str, str] = dict(os.environ)


def bytecode_env(pycache: str) -> dict[str, str]:
    """This environment with bytecode caching on, into ``pycache`` (``PYTHONPYCACHEPREFIX``: no
    ``__pycache__`` is written into the source tree). An installed CLI runs from ``.pyc`` files
    (pip compiles them at install); where ``PYTHONDONTWRITEBYTECODE`` is set, as on a shared
    development machine, every run would instead compile the ~60 tokenplan modules ``plan``
    imports from source, a cost no installed CLI pays."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: the child's user + system time) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def split() -> dict[str, float]:
    """The parts of one ``tokenplan plan`` process (see ``SPLIT``), seconds."""
    run = subprocess.run([sys.executable, "-c", SPLIT], capture_output=True, text=True, check=True, env=ENV)
    return json.loads(run.stderr.strip().splitlines()[-1])


def imported_by_plan() -> list[str]:
    """The names from NOT_NEEDED_TO_PLAN that ``tokenplan plan`` imports, each with how many of
    its modules."""
    env = dict(ENV, PYTHONPROFILEIMPORTTIME="1")
    run = subprocess.run(COMMANDS["tokenplan plan"], env=env, capture_output=True, text=True, check=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()}
    found = [
        next(p for p in NOT_NEEDED_TO_PLAN if n == p or n.startswith(p + "."))
        for n in names
        if any(n == p or n.startswith(p + ".") for p in NOT_NEEDED_TO_PLAN)
    ]
    return [f"{p} ({found.count(p)} modules)" for p in sorted(set(found))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--short", action="store_true", help="each command once (CI: the script runs)")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="run the children in this environment as it is, PYTHONDONTWRITEBYTECODE included "
        "(default: from .pyc files in a private cache, as an installed CLI runs)",
    )
    args = parser.parse_args()
    repeats = 1 if args.short else args.repeats
    with tempfile.TemporaryDirectory(prefix="tokenplan-pycache-") as pycache:
        if not args.no_bytecode:
            ENV.clear()
            ENV.update(bytecode_env(pycache))
        compiled = "PYTHONDONTWRITEBYTECODE" not in ENV
        print(
            "bytecode: "
            + (
                "from .pyc files (a private cache, warmed by the first run of each command)"
                if compiled
                else "compiled from source on every run (PYTHONDONTWRITEBYTECODE is set)"
            )
        )
        report(repeats)


def report(repeats: int) -> None:
    """Time the commands alternately and split ``plan`` processes; print the figures."""
    for argv in COMMANDS.values():
        timed(argv)  # warm the file cache and .pyc files
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    parts = []
    for _ in range(repeats):  # one of each per round
        for name, argv in COMMANDS.items():
            runs[name].append(timed(argv))
        parts.append(split())
    floor = runs["python -c pass"]
    print(f"median of {repeats} rounds, commands run alternately:")
    for name, times in runs.items():
        wall = statistics.median(w for w, _ in times)
        cpu = statistics.median(c for _, c in times)
        ratio = statistics.median(w / f for (w, _), (f, _) in zip(times, floor))
        print(f"  {name:22s} wall {wall:.3f} s  CPU {cpu:.3f} s  {ratio:5.1f}× python -c pass")
    med = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    imports = med["cli_import_cpu_s"] + med["plan_import_cpu_s"]
    print(
        f"tokenplan plan, CPU of the process (median of {repeats}): interpreter {med['startup_cpu_s']:.3f} s, "
        f"imports {imports:.3f} s (tokenplan.cli {med['cli_import_cpu_s']:.3f} s, plan's modules "
        f"{med['plan_import_cpu_s']:.3f} s), compute (search + rendering) {med['plan_run_cpu_s']:.3f} s"
    )
    print(
        f"tokenplan plan, wall: tokenplan.cli {med['cli_import_wall_s']:.3f} s, plan's modules "
        f"{med['plan_import_wall_s']:.3f} s, compute {med['plan_run_wall_s']:.3f} s"
    )
    extra = imported_by_plan()
    print("modules plan imports but does not need:", ", ".join(extra) if extra else "none")


if __name__ == "__main__":
    main()
