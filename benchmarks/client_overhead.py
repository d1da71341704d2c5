"""Client overhead of ``tokenplan generate``: CPU per request and per token against a bare aiohttp loop, 5,000 in flight, resume RSS at 1M and 10M rows.

Every figure is measured against the fault server (tests/support/fault_server.py) without faults,
running in its own process on loopback, so the server's CPU is not counted. CPU is the client
process's ``getrusage`` user + system time; on loopback the system time includes the kernel's
delivery to the server, which a real network would not charge to the client.

1. ``client_request``: non-streamed requests (20,000, 256 in flight) through :class:`OpenAIClient`
   and, in the same session against the same server, through a bare aiohttp loop (one session,
   ``post`` + ``read`` + ``orjson.loads``, the least any aiohttp client can do): ``ratio`` is
   client / bare (goal ≤ 1.1). Both on asyncio's loop, and on uvloop's when it is installed.
2. ``client_token``: streamed answers of 64 tokens in 65 SSE chunks → CPU per output token, with
   the bare loop's (``data:`` lines split and parsed with orjson) beside it.
3. ``runner_unit``: the whole ``generate`` run (reader, run directory, pool, retries) per row.
4. ``in_flight``: 5,000 requests at once against a server that holds each for ``hold_s``; the
   server counts the most requests it was answering at the same moment (``GET /stats``).
5. ``rss_1m_rows``: peak RSS of ``generate`` on a 1,000,000-row input whose run directory already
   holds 990,000 stored records, sending the last 10,000; ``rss_10m_rows`` the same at 10,000,000
   rows (9,990,000 stored; ~5 GB under the temporary directory, deleted after; ``--rss-10m``).
   The stored records are the lines :class:`RunDir` writes (``orjson`` with a newline, shards of
   256 MiB), written directly to save time; ``scan_cpu_us_per_stored_row`` is the resume's
   CPU per stored row, from opening the run directory alone in a fresh process.

Run: ``python benchmarks/client_overhead.py [--quick | --short] [--rss-10m] [--only NAME ...]``;
prints one JSON object. ``--quick`` is a tenth of every size; ``--short`` a thousandth with a
1 s hold (seconds: CI runs it to check that the script still runs; its figures mean nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fault_server import FaultServerProcess  # noqa: E402

from tokenplan.client.openai import OpenAIClient  # noqa: E402

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "How fast is the client?"}], "max_tokens": 64}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _timed(one, n: int, concurrency: int) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, completion tokens) of ``n`` calls of ``one`` after a warm-up."""
    gate = asyncio.Semaphore(concurrency)

    async def gated() -> int:
        async with gate:
            return await one()

    await asyncio.gather(*(gated() for _ in range(min(n, 2 * concurrency))))
    cpu0_s, wall0_s = _cpu_s(), time.perf_counter()
    tokens = sum(await asyncio.gather(*(gated() for _ in range(n))))
    return _cpu_s() - cpu0_s, time.perf_counter() - wall0_s, tokens


async def _client(url: str, n: int, concurrency: int, stream: bool) -> tuple[float, float, int]:
    async with OpenAIClient(url, max_connections=concurrency) as client:

        async def one() -> int:
            done = await client.chat(BODY, deadline_s=120, stream=stream)
            return done.usage.completion_tokens if done.usage else 0

        return await _timed(one, n, concurrency)


async def _bare(url: str, n: int, concurrency: int, stream: bool) -> tuple[float, float, int]:
    """The same requests through aiohttp alone: the floor for an aiohttp client."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers={"Content-Type": "application/json"}) as session:
        chat_url = url + "/chat/completions"

        async def one() -> int:
            body = {**BODY, "stream": stream} | ({"stream_options": {"include_usage": True}} if stream else {})
            async with session.post(chat_url, data=orjson.dumps(body)) as response:
                if not stream:
                    return orjson.loads(await response.read())["usage"]["completion_tokens"]
                tokens = 0
                async for line in response.content:
                    if line.startswith(b"data: {"):
                        usage = orjson.loads(line[6:]).get("usage")
                        tokens = usage["completion_tokens"] if usage else tokens
                return tokens

        return await _timed(one, n, concurrency)


def _loops() -> dict:
    """The event loops to measure on: asyncio's, and uvloop's when it is installed."""
    loops = {"asyncio": asyncio.new_event_loop}
    try:
        import uvloop

        loops["uvloop"] = uvloop.new_event_loop
    except ImportError:
        pass
    return loops


def _on(loop_factory, make) -> tuple[float, float, int]:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(make())


def client_request(workdir: str, n: int) -> dict:
    out: dict = {"requests": n, "concurrency": 256}
    with FaultServerProcess(workdir, tokens=64) as server:
        for name, factory in _loops().items():
            # client, bare, client, bare: the best of two each (a shared, loaded machine)
            client = min(_on(factory, lambda: _client(server.url, n, 256, False))[0] for _ in range(2))
            bare = min(_on(factory, lambda: _bare(server.url, n, 256, False))[0] for _ in range(2))
            out[name] = {
                "client_cpu_ms_per_request": 1e3 * client / n,
                "bare_cpu_ms_per_request": 1e3 * bare / n,
                "ratio": client / bare,
            }
    return out


def client_token(workdir: str, n: int) -> dict:
    out: dict = {"requests": n}
    with FaultServerProcess(workdir, tokens=64) as server:
        for name, factory in _loops().items():
            client_s, _, tokens = _on(factory, lambda: _client(server.url, n, 256, True))
            bare_s, _, bare_tokens = _on(factory, lambda: _bare(server.url, n, 256, True))
            out[name] = {
                "tokens": tokens,
                "client_cpu_us_per_token": 1e6 * client_s / tokens,
                "bare_cpu_us_per_token": 1e6 * bare_s / bare_tokens,
            }
    return out


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
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(options)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _write_prompts(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        for i in range(rows):
            fh.write(json.dumps({"id": f"row-{i:07d}", "prompt": f"Question {i}: " + "lorem ipsum " * 12}) + "\n")


def runner_unit(workdir: str, rows: int) -> dict:
    data = Path(workdir) / "runner.jsonl"
    _write_prompts(data, rows)
    with FaultServerProcess(workdir, tokens=64) as server:
        out = _run_generate(
            {
                "inputs": [str(data)],
                "out_dir": str(Path(workdir) / "runner-run"),
                "endpoints": [server.url],
                "model": "fault-model",
                "concurrency": 256,
            }
        )
    return {
        "rows": rows,
        "cpu_ms_per_row": 1e3 * out["cpu_s"] / rows,
        "rows_per_s": rows / out["wall_s"],
        "accounting_ok": out["ok"],
    }


SCAN = """
import json, resource, sys
from pathlib import Path
from tokenplan.runner.store.rundir import RunDir
start = resource.getrusage(resource.RUSAGE_SELF)
run = RunDir.open(Path(sys.argv[1]), json.loads(sys.argv[2]))
end = resource.getrusage(resource.RUSAGE_SELF)
run.close()
print(json.dumps({"done": len(run.done_ids), "cpu_s": end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime}))
"""


def _store(run_dir: Path, rows: int, shard_bytes: int = 256 * 2**20) -> None:
    """``rows`` stored records in ``run_dir/shards``, byte for byte what :class:`RunDir` writes
    (``orjson.dumps`` with a newline) for the records an earlier run would have stored."""
    index, fh = 0, (run_dir / "shards" / "part-00000.jsonl").open("wb")
    for i in range(rows):
        fh.write(
            orjson.dumps(
                {
                    "id": f"row-{i:07d}",
                    "conversations": [
                        {"role": "user", "content": f"Question {i}: " + "lorem ipsum " * 12},
                        {"role": "assistant", "content": "reply", "reasoning_content": "thought"},
                    ],
                    "turns": [
                        {
                            "finish_reason": "stop",
                            "usage": {"prompt_tokens": 40, "completion_tokens": 64, "reasoning_tokens": None},
                            "latency_s": 0.01,
                        }
                    ],
                },
                option=orjson.OPT_APPEND_NEWLINE,
            )
        )
        if fh.tell() >= shard_bytes:
            fh.close()
            index += 1
            fh = (run_dir / "shards" / f"part-{index:05d}.jsonl").open("wb")
    fh.close()


def rss_resume(workdir: str, rows: int, to_send: int) -> dict:
    from tokenplan.api.generate import GenerateRequest, check_request
    from tokenplan.runner.prepare import run_spec
    from tokenplan.runner.store.rundir import RunDir

    data, run_dir = Path(workdir) / f"big-{rows}.jsonl", Path(workdir) / f"big-run-{rows}"
    _write_prompts(data, rows)
    try:
        with FaultServerProcess(workdir, tokens=64) as server:
            options = {
                "inputs": [str(data)],
                "out_dir": str(run_dir),
                "endpoints": [server.url],
                "model": "fault-model",
                "concurrency": 1024,
            }
            request = GenerateRequest.build(**options)
            # The identity generate binds the run directory to, through its public path (the same
            # run_spec generate builds), so that the second run resumes rather than refuses it.
            identity = run_spec(request, check_request(request), []).identity
            RunDir.open(run_dir, identity).close()
            _store(run_dir, rows - to_send)
            scan = json.loads(
                subprocess.run(
                    [sys.executable, "-c", SCAN, str(run_dir), json.dumps(identity)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            out = _run_generate(options)
        input_mb = data.stat().st_size / 2**20
    finally:
        data.unlink(missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "rows": rows,
        "already_stored": rows - to_send,
        "sent": out["sent"],
        "accounting_ok": out["ok"],
        "peak_rss_mib": out["peak_rss_bytes"] / 2**20,
        "input_mib": input_mb,
        "wall_s": out["wall_s"],
        "scan_cpu_us_per_stored_row": 1e6 * scan["cpu_s"] / (rows - to_send),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--short", action="store_true", help="tiny sizes, seconds (CI: the script runs)")
    parser.add_argument("--rss-10m", action="store_true", help="also the 10M-row resume (~5 GB of /tmp, minutes)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these measurements")
    args = parser.parse_args()
    scale = 1000 if args.short else 10 if args.quick else 1
    measures = {
        "client_request": lambda d: client_request(d, 20_000 // scale),
        "client_token": lambda d: client_token(d, 5_000 // scale),
        "runner_unit": lambda d: runner_unit(d, 20_000 // scale),
        "in_flight": lambda d: in_flight(d, 5_000 // scale, hold_s=1.0 if args.short else 10.0),
        "rss_1m_rows": lambda d: rss_resume(d, 1_000_000 // scale, 10_000 // scale),
    }
    if args.rss_10m:
        measures["rss_10m_rows"] = lambda d: rss_resume(d, 10_000_000 // scale, 10_000 // scale)
    with tempfile.TemporaryDirectory() as workdir:
        results = {name: measure(workdir) for name, measure in measures.items() if not args.only or name in args.only}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
