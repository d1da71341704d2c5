"""``generate --backend ray`` against the local backend on the same input: rows/s and client CPU per row.

Both runs send the same prompts to the same fault-injecting server (tests/support/fault_server.py,
no faults, 64 completion tokens, answering at once), each server in its own process on loopback so
its CPU is not counted. Client CPU:

- local backend: the ``generate`` process's ``getrusage`` user + system time;
- Ray backend: the driver's CPU time plus every actor process's CPU time (``summary.json``'s
  ``ray`` section), over the run; Ray's own daemons (GCS, raylet) are not counted, so the figure
  is a lower bound of what the cluster spends;
- ``server_cpu_ms_per_row``: the fault servers' CPU over the run (``/proc/PID/stat``), not client
  CPU, but on one machine it takes the same cores, so it says how much of them the client had.

Rows/s count only the sending: the Ray backend's clock starts when its actors are up (the cluster
and actor start is reported apart as ``startup_s``). ``driver_read`` times the driver's input path
alone (read, parse, anti-join against a done-set holding half the ids) on 10 × ``--rows`` rows.

Run: ``RAY_AUTH_MODE=disabled python benchmarks/ray_backend.py [--rows 20000] [--actors 2] [--endpoints 1]
[--concurrency 256] [--short]``; ``--endpoints N`` starts N fault servers (one process each) and
gives both backends all of them, ``--concurrency`` in flight on each;
prints one JSON object. Needs ``pip install 'tokenplan[ray]'`` (Ray, and h11 for the test server).
``--short`` sends 200 rows and times the driver's read over 2,000 (seconds: CI runs it to check
that the script still runs; its figures mean nothing); where Ray is not installed, as in CI, it
says so in the output and runs the local backend and the driver's read alone.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fault_server import FaultServerProcess  # noqa: E402

RUNNER = """
import json, resource, sys, time
from tokenplan.api.generate import GenerateRequest, generate
start = resource.getrusage(resource.RUSAGE_SELF)
wall0 = time.perf_counter()
result = generate(GenerateRequest.build(**json.loads(sys.argv[1])))
end = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"stored": result.stored, "ok": result.accounting_ok, "summary": result.summary,
                  "cpu_s": end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime,
                  "wall_s": time.perf_counter() - wall0}))
"""


def _run(options: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(options)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, from ``/proc/PID/stat`` (fields 14, 15; proc(5))."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write_prompts(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        for i in range(rows):
            fh.write(json.dumps({"id": f"row-{i:07d}", "prompt": f"Question {i}: " + "lorem ipsum " * 12}) + "\n")


def compare(
    workdir: str,
    rows: int,
    actors: int,
    concurrency: int,
    backends: tuple[str, ...] = ("local", "ray"),
    endpoints: int = 1,
) -> dict:
    data = Path(workdir) / "in.jsonl"
    _write_prompts(data, rows)
    out: dict = {"rows": rows, "endpoints": endpoints, "concurrency_per_endpoint": concurrency}
    for backend in backends:
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(FaultServerProcess(workdir, tokens=64)) for _ in range(endpoints)]
            options = {
                "inputs": [str(data)],
                "out_dir": str(Path(workdir) / backend),
                "endpoints": [server.url for server in servers],
                "model": "fault-model",
                "concurrency": concurrency,
                "backend": backend,
            }
            if backend == "ray":
                options["actors"] = actors
            server_cpu0_s = sum(_process_cpu_s(server.proc.pid) for server in servers)
            result = _run(options)
            server_cpu_s = sum(_process_cpu_s(server.proc.pid) for server in servers) - server_cpu0_s
        summary = result["summary"]
        entry = {
            "accounting_ok": result["ok"],
            "stored": result["stored"],
            "rows_per_s": rows / summary["elapsed_s"],
            "wall_s": result["wall_s"],
            "server_cpu_ms_per_row": 1e3 * server_cpu_s / rows,
        }
        if backend == "local":
            entry["client_cpu_ms_per_row"] = 1e3 * result["cpu_s"] / rows
        else:
            ray_stats = summary["ray"]
            cpu_s = ray_stats["driver_cpu_s"] + ray_stats["actor_cpu_s"]
            entry.update(
                actors=actors,
                startup_s=ray_stats["startup_s"],
                client_cpu_ms_per_row=1e3 * cpu_s / rows,
                driver_cpu_ms_per_row=1e3 * ray_stats["driver_cpu_s"] / rows,
                actor_cpu_ms_per_row=1e3 * ray_stats["actor_cpu_s"] / rows,
            )
        out[backend] = entry
    return out


def driver_read(workdir: str, rows: int) -> dict:
    """The driver's own input path: read, parse and anti-join ``rows`` rows (half already done)."""
    import time
    from array import array

    from tokenplan.runner.input.rows import read_rows
    from tokenplan.runner.ray.work import pending_units
    from tokenplan.runner.spec import RunTally
    from tokenplan.runner.store.idset import IdSet, id_key
    from tokenplan.runner.store.record_ids import repeated_keys

    data = Path(workdir) / "read.jsonl"
    _write_prompts(data, rows)
    # the run directory's done-set, as RunDir.open builds it: half the rows stored
    done = IdSet(repeated_keys(array("Q", (id_key(f"row-{i:07d}") for i in range(0, rows, 2))))[0])
    cpu0_s, wall0_s = time.process_time(), time.perf_counter()
    pending = sum(1 for _ in pending_units(read_rows([data]), done, 1, RunTally(), lambda _: None))
    return {
        "rows": rows,
        "pending": pending,
        "rows_per_s": rows / (time.perf_counter() - wall0_s),
        "cpu_us_per_row": 1e6 * (time.process_time() - cpu0_s) / rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=256, help="requests in flight per endpoint")
    parser.add_argument("--endpoints", type=int, default=1, help="fault servers, one process each")
    parser.add_argument("--no-driver-read", action="store_true", help="skip the driver's read timing")
    parser.add_argument("--short", action="store_true", help="200 rows; without Ray, the local backend alone (CI)")
    args = parser.parse_args()
    rows = 200 if args.short else args.rows
    has_ray = importlib.util.find_spec("ray") is not None
    if not has_ray and not args.short:
        raise SystemExit(
            "benchmarks/ray_backend.py: Ray is not installed; pip install 'tokenplan[ray]' "
            "(or run with --short for the local backend alone)"
        )
    with tempfile.TemporaryDirectory() as workdir:
        backends = ("local", "ray") if has_ray else ("local",)
        results = compare(workdir, rows, args.actors, args.concurrency, backends, args.endpoints)
        if not has_ray:
            results["ray"] = "not run: Ray is not installed (pip install 'tokenplan[ray]')"
        if not args.no_driver_read:
            results["driver_read"] = driver_read(workdir, 10 * rows)
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
