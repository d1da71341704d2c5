"""One concurrency limit: the pool admits ``concurrency_per_endpoint`` × endpoints units at once."""

from __future__ import annotations

import asyncio

from tokenplan.client.endpoints import EndpointPool, PoolSettings


def test_the_pool_admits_concurrency_times_endpoints_and_one_more_after_a_release() -> None:
    async def scenario() -> tuple[int, bool, bool]:
        # 3 per endpoint × 2 endpoints = 6 units at once (no request is sent: admission only)
        pool = EndpointPool(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], PoolSettings(3))
        try:
            admitted = 0
            for _ in range(6):
                await asyncio.wait_for(pool.admit(), 1.0)
                admitted += 1
            seventh = asyncio.create_task(pool.admit())
            for _ in range(10):  # a free slot would let it in at its first turn of the loop; it must not
                await asyncio.sleep(0)
            blocked = not seventh.done()
            pool.release()
            await asyncio.wait_for(seventh, 1.0)  # a release lets exactly it in
            return admitted, blocked, seventh.done()
        finally:
            await pool.aclose()

    assert asyncio.run(scenario()) == (6, True, True)
