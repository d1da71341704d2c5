"""Client overhead of ``tokenplan generate``: CPU per request and per token, 5,000 in flight, RSS at 1M rows.

Every figure is measured against the fault server (tests/support/fault_server.py) without faults,
running in its own process on loopback, so the server's CPU is not counted. CPU is the client
process's ``getrusage`` user + system time; on loopback the system time includes the kernel's
delivery to the server, which a real network would not charge to the client.

1. ``client_request``: non-streamed requests through :class:`OpenAIClient` (target ≤ 0.3 ms).
2. ``client_token``: streamed answers of 64 tokens in 65 SSE chunks → CPU per output token.
3. ``runner_unit``: the whole ``generate`` run (reader, run directory, pool, retries) per row.
4. ``in_flight``: 5,000 requests at once against a server that holds each for ``hold_s``; the
   server counts the most requests it was answering at the same moment (``GET /stats``).
5. ``rss_1m_rows``: peak RSS of ``generate`` on a 1,000,000-row input whose run directory already
   holds 990,000 stored records (written through :class:`RunDir`), sending the last 10,000.

Run: ``python benchmarks/client_overhead.py [--quick | --short]``; prints one JSON object.
``--quick`` is a tenth of every size; ``--short`` a thousandth with a 1 s hold (seconds: CI runs it
to check that the script still runs; its figures mean nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fault_server import FaultServerProcess  # noqa: E402
from tokenplan.client.openai import OpenAIClient  # noqa: E402

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "How fast is the client?"}],
        "max_tokens": 64}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _requests(url: str, n: int, concurrency: int, stream: bool) -> tuple[float, float, int]:
    """(client CPU seconds, wall seconds, completion tokens) for ``n`` requests after a warm-up."""
    async with OpenAIClient(url, max_connections=concurrency) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> int:
            async with gate:
                done = await client.chat(BODY, deadline_s=120, stream=stream)
                return done.usage.completion_tokens if done.usage else 0

        await asyncio.gather(*(one() for _ in range(min(n, 2 * concurrency))))
        cpu0_s, wall0_s = _cpu_s(), time.perf_counter()
        tokens = sum(await asyncio.gather(*(one() for _ in range(n))))
        return _cpu_s() - cpu0_s, time.perf_counter() - wall0_s, tokens


def client_request(workdir: str, n: int) -> dict:
    with FaultServerProcess(workdir, tokens=64) as server:
        cpu_s, wall_s, _ = asyncio.run(_requests(server.url, n, 256, stream=False))
    return {"requests": n, "concurrency": 256, "cpu_ms_per_request": 1e3 * cpu_s / n, "requests_per_s": n / wall_s}


def client_token(workdir: str, n: int) -> dict:
    with FaultServerProcess(workdir, tokens=64) as server:
        cpu_s, wall_s, tokens = asyncio.run(_requests(server.url, n, 256, stream=True))
    return {"requests": n, "tokens": tokens, "cpu_us_per_token": 1e6 * cpu_s / tokens,
            "cpu_ms_per_streamed_request": 1e3 * cpu_s / n}


def in_flight(workdir: str, n: int, hold_s: float) -> dict:
    with FaultServerProcess(workdir, tokens=16, delay_s=hold_s) as server:
        async def burst() -> float:
            async with OpenAIClient(server.url, max_connections=n) as client:
                start_s = time.perf_counter()
                await asyncio.gather(*(client.chat(BODY, deadline_s=120) for _ in range(n)))
                return time.perf_counter() - start_s

        wall_s = asyncio.run(burst())
        stats = httpx.get(server.url.removesuffix("/v1") + "/stats").json()
    return {"requests": n, "hold_s": hold_s, "wall_s": wall_s, "server_max_in_flight": stats["max_active"]}


RUNNER = """
import json, resource, sys, time
from tokenplan.api.generate import GenerateRequest, generate
start = resource.getrusage(resource.RUSAGE_SELF)
wall0 = time.perf_counter()
result = generate(GenerateRequest.build(**json.loads(sys.argv[1])))
end = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"stored": result.stored, "sent": result.summary["requests"], "ok": result.accounting_ok,
                  "cpu_s": end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime,
                  "wall_s": time.perf_counter() - wall0, "peak_rss_bytes": end.ru_maxrss * 1024}))
"""


def _run_generate(options: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(options)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _write_prompts(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        for i in range(rows):
            fh.write(json.dumps({"id": f"row-{i:07d}", "prompt": f"Question {i}: " + "lorem ipsum " * 12}) + "\n")


def runner_unit(workdir: str, rows: int) -> dict:
    data = Path(workdir) / "runner.jsonl"
    _write_prompts(data, rows)
    with FaultServerProcess(workdir, tokens=64) as server:
        out = _run_generate({"inputs": [str(data)], "out_dir": str(Path(workdir) / "runner-run"),
                             "endpoints": [server.url], "model": "fault-model", "concurrency": 256})
    return {"rows": rows, "cpu_ms_per_row": 1e3 * out["cpu_s"] / rows, "rows_per_s": rows / out["wall_s"],
            "accounting_ok": out["ok"]}


def rss_1m_rows(workdir: str, rows: int, to_send: int) -> dict:
    from tokenplan.api.generate import GenerateRequest, check_request, run_spec
    from tokenplan.runner.rundir import RunDir

    data, run_dir = Path(workdir) / "big.jsonl", Path(workdir) / "big-run"
    _write_prompts(data, rows)
    with FaultServerProcess(workdir, tokens=64) as server:
        options = {"inputs": [str(data)], "out_dir": str(run_dir), "endpoints": [server.url],
                   "model": "fault-model", "concurrency": 1024}
        request = GenerateRequest.build(**options)
        # The identity generate binds the run directory to, through its public path (the same
        # run_spec generate builds), so that the second run resumes rather than refuses it.
        stored = RunDir.open(run_dir, run_spec(request, check_request(request), []).identity)
        for i in range(rows - to_send):  # what an earlier run would have stored
            stored.write_done({"id": f"row-{i:07d}", "conversations": [
                {"role": "user", "content": f"Question {i}: " + "lorem ipsum " * 12},
                {"role": "assistant", "content": "reply", "reasoning_content": "thought"}],
                "turns": [{"finish_reason": "stop", "usage": {"prompt_tokens": 40, "completion_tokens": 64,
                                                              "reasoning_tokens": None}, "latency_s": 0.01}]})
        stored.close()
        out = _run_generate(options)
    return {"rows": rows, "already_stored": rows - to_send, "sent": out["sent"], "accounting_ok": out["ok"],
            "peak_rss_mb": out["peak_rss_bytes"] / 2**20, "input_mb": data.stat().st_size / 2**20,
            "wall_s": out["wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--short", action="store_true", help="tiny sizes, seconds (CI: the script runs)")
    args = parser.parse_args()
    scale = 1000 if args.short else 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as workdir:
        results = {
            "client_request": client_request(workdir, 20_000 // scale),
            "client_token": client_token(workdir, 5_000 // scale),
            "runner_unit": runner_unit(workdir, 20_000 // scale),
            "in_flight": in_flight(workdir, 5_000 // scale, hold_s=1.0 if args.short else 10.0),
            "rss_1m_rows": rss_1m_rows(workdir, 1_000_000 // scale, 10_000 // scale),
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
