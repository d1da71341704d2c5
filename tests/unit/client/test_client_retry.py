"""What is retried, the backoff bounds and the deadline scaled from max_tokens."""

import asyncio
import random

import pytest

from tokenplan.client.openai import RequestFailed
from tokenplan.client.retry import RetriesExhausted, RetryPolicy, call_with_retries, deadline_s, is_retryable


@pytest.mark.parametrize(
    ("failure", "retried"),
    [
        (RequestFailed("transport", "ConnectError"), True),
        (RequestFailed("deadline", "stalled"), True),
        (RequestFailed("protocol", "not JSON"), True),
        (RequestFailed("status", "busy", status=429), True),
        (RequestFailed("status", "boom", status=503), True),
        (RequestFailed("status", "context too long", status=400), False),
        (RequestFailed("status", "unknown model", status=404), False),
    ],
)
def test_transport_deadline_429_and_5xx_are_retried_other_4xx_are_not(failure: RequestFailed, retried: bool) -> None:
    assert is_retryable(failure) is retried


def test_backoff_is_full_jitter_under_a_doubling_cap() -> None:
    policy, rng = RetryPolicy(max_attempts=10, base_delay_s=1.0, max_delay_s=60.0), random.Random(1)
    # After k failures the ceiling is min(60, 1 · 2^(k−1)): 1, 2, 4, 8, 16, 32, 60, 60.
    for failures, ceiling in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 60), (8, 60)]:
        waits = [policy.delay_s(failures, rng) for _ in range(200)]
        assert 0 <= min(waits) and max(waits) <= ceiling
        assert max(waits) > ceiling / 2  # 200 uniform draws: P(all below half) = 2^-200


def test_a_longer_retry_after_wins_but_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.001, max_delay_s=30.0)
    assert policy.delay_s(1, random.Random(0), retry_after_s=7.0) == 7.0
    assert policy.delay_s(1, random.Random(0), retry_after_s=500.0) == 30.0


def test_deadline_covers_a_32k_thinking_answer() -> None:
    # 120 s + 32,768 tokens / 10 tok/s = 120 + 3,276.8 = 3,396.8 s (> 30 min such answers take).
    assert deadline_s(32_768) == pytest.approx(3_396.8)


def test_retries_stop_at_the_first_non_retryable_failure() -> None:
    calls = []

    async def send() -> str:
        calls.append(1)
        raise RequestFailed("status", "bad", status=400)

    with pytest.raises(RetriesExhausted) as caught:
        asyncio.run(call_with_retries(send, RetryPolicy(max_attempts=5), random.Random(0)))
    assert (caught.value.attempts, len(calls)) == (1, 1)


def test_retries_are_bounded_by_max_attempts_then_succeed_or_give_up() -> None:
    outcomes = iter([RequestFailed("status", "x", status=500), RequestFailed("transport", "drop"), "ok"])

    async def send() -> str:
        value = next(outcomes)
        if isinstance(value, RequestFailed):
            raise value
        return value

    async def no_sleep(_: float) -> None:
        return None

    assert asyncio.run(call_with_retries(send, RetryPolicy(max_attempts=3), random.Random(0), sleep=no_sleep)) == (
        "ok",
        3,
    )
    outcomes = iter([RequestFailed("status", "x", status=500)] * 2)
    with pytest.raises(RetriesExhausted) as caught:
        asyncio.run(call_with_retries(send, RetryPolicy(max_attempts=2), random.Random(0), sleep=no_sleep))
    assert caught.value.attempts == 2 and caught.value.failure.status == 500
