"""Issue 26: ``generate()`` and ``bench()`` inside a running event loop, as in a Jupyter cell, and
their ``*_async`` variants.

Jupyter runs every cell inside its event loop; ``asyncio.run`` refuses to start there
("asyncio.run() cannot be called from a running event loop"). Each test calls the API from a
coroutine under ``asyncio.run``, which is the same situation, against the fault server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.fault_server import FaultServerProcess  # noqa: E402

import tokenplan  # noqa: E402
from tokenplan.api.bench import BenchRequest, bench  # noqa: E402
from tokenplan.api.generate import GenerateRequest, generate  # noqa: E402
from tokenplan.runner.store.appendlog import iter_records, shard_paths

FAST = {"retry_base_delay_s": 0.01, "probe_interval_s": 0.2}
ROWS = 4


def _request(tmp_path: Path, url: str, **options) -> GenerateRequest:
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(ROWS))
    )
    return GenerateRequest.build(
        inputs=[str(tmp_path / "in.jsonl")],
        out_dir=tmp_path / "run",
        endpoints=[url],
        model="fault-model",
        **FAST,
        **options,
    )


def _bench_request(url: str) -> BenchRequest:
    return BenchRequest(
        endpoints=(url,),
        model="fault-model",
        concurrencies=(2,),
        isl=16,
        osl=4,
        num_prompts=4,
        warmup_requests=0,
        metrics=False,
    )


def test_generate_works_inside_a_running_loop(tmp_path: Path) -> None:
    async def cell() -> tokenplan.api.generate.GenerateResult:
        return generate(_request(tmp_path, server.url))

    with FaultServerProcess(str(tmp_path)) as server:
        result = asyncio.run(cell())
    assert (result.stored, result.accounting_ok, result.interrupted) == (ROWS, True, False)


def test_generate_async_is_awaited_and_leaves_the_loop_free(tmp_path: Path) -> None:
    async def cell() -> tuple[tokenplan.api.generate.GenerateResult, int]:
        ticks, done = 0, asyncio.Event()

        async def other_work() -> None:  # another task of the notebook's loop
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(other_work())
        try:
            result = await tokenplan.generate_async(_request(tmp_path, server.url, concurrency=1))
        finally:
            done.set()
            await ticker
        return result, ticks

    # 0.1 s per answer, one at a time: the run lasts ≥ 4 × 0.1 = 0.4 s, in which the other task runs.
    with FaultServerProcess(str(tmp_path), delay_s=0.1) as server:
        result, ticks = asyncio.run(cell())
    assert (result.stored, result.accounting_ok) == (ROWS, True)
    assert ticks >= 2


def test_a_cancelled_generate_async_keeps_its_records_and_a_rerun_resumes(tmp_path: Path) -> None:
    async def cell() -> None:
        first_stored = asyncio.Event()

        def on_progress(snapshot) -> None:  # noqa: ANN001 - a runner Snapshot, every 0.5 s on this loop
            if snapshot.stored >= 1:
                first_stored.set()

        task = asyncio.create_task(
            tokenplan.generate_async(_request(tmp_path, server.url, concurrency=1), on_progress=on_progress)
        )
        await asyncio.wait([task, asyncio.create_task(first_stored.wait())], return_when=asyncio.FIRST_COMPLETED)
        assert not task.done(), task  # 0.5 s per answer: the run is still going when its first record lands
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    # One answer at a time, 0.5 s each: the progress tick (every 0.5 s) sees the first record at most
    # 0.5 s after it is stored, when at most 2 of the 4 are; the cancellation leaves at least 2 unsent.
    with FaultServerProcess(str(tmp_path), delay_s=0.5) as server:
        asyncio.run(cell())
        kept = sum(1 for path in shard_paths(tmp_path / "run" / "shards") for _ in iter_records(path))
        assert 1 <= kept <= ROWS - 2
        rerun = generate(_request(tmp_path, server.url))  # the lock was released: the rerun opens the directory
    assert (rerun.already_done, rerun.stored, rerun.accounting_ok) == (kept, ROWS, True)


def test_bench_works_inside_a_running_loop_and_bench_async_is_awaited(tmp_path: Path) -> None:
    async def cell() -> tuple[dict, dict]:
        return bench(_bench_request(server.url)).data, (await tokenplan.bench_async(_bench_request(server.url))).data

    with FaultServerProcess(str(tmp_path)) as server:
        blocking, awaited = asyncio.run(cell())
    for data in (blocking, awaited):
        level = data["levels"][0]
        assert (level["concurrency"], level["requests"], level["errors"]) == (2, 4, 0)


@pytest.mark.parametrize("name", ["generate_async", "bench_async"])
def test_the_async_variants_are_documented(name: str) -> None:
    doc = getattr(tokenplan, name).__doc__
    assert doc and "await" in doc
