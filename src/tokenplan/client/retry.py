"""What is retried, how long to wait between tries, and how long one request may take.

Retried: transport errors (refused or dropped connections), a passed deadline (a stalled server),
HTTP 429 and 5xx, and 200 answers that are not a finished chat completion (malformed, or a
``finish_reason`` such as vLLM's ``abort``). Not retried: other 4xx (bad request, context too
long, unknown model) — sending them again gives the same answer — and an answer over the size cap. A
``finish_reason == "length"`` answer is a completion, not a failure: its policy belongs to the
caller. Backoff is exponential with full jitter (AWS Architecture Blog, "Exponential Backoff and
Jitter", 2015), honouring a server's ``Retry-After`` when it is longer.

The deadline scales with ``max_tokens``: a 32k-token thinking answer under heavy batching can take
15–30 minutes, so fixed 600 s limits (the OpenAI SDK's) abandon requests the server keeps
generating.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tokenplan.client.answer_size import LIMIT_TOKENS
from tokenplan.client.openai import RequestFailed

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    Attributes:
        max_attempts: tries in all, the first included (≥ 1).
        base_delay_s: the backoff before the second try, before jitter (seconds).
        max_delay_s: the cap on one backoff (seconds).
    """

    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def delay_s(self, failed_attempts: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Wait before the next try after ``failed_attempts`` failures (seconds).

        Full jitter: uniform in ``[0, min(max_delay_s, base_delay_s · 2^(failed_attempts − 1))]``,
        raised to ``retry_after_s`` when the server asked for longer (capped at ``max_delay_s``).
        """
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (failed_attempts - 1))
        wait = rng.uniform(0.0, ceiling)
        if retry_after_s is not None:
            wait = max(wait, min(retry_after_s, self.max_delay_s))
        return wait


def is_retryable(failure: RequestFailed) -> bool:
    """True for transport errors, deadlines, protocol errors, 429 and 5xx; False for other 4xx and
    for an over-size answer (the same request would grow as large again)."""
    if failure.kind == "oversize":
        return False
    if failure.kind != "status":
        return True
    status = failure.status or 0
    return status == 429 or status >= 500


def deadline_s(max_tokens: int, *, base_s: float = 120.0, slowest_tok_s: float = 10.0) -> float:
    """Per-request deadline for an answer of up to ``max_tokens`` tokens (seconds).

    ``base_s`` covers queueing and prefill; ``slowest_tok_s`` is the slowest decode speed per
    request still considered alive (tokens/s). Example: 32,768 tokens at 10 tok/s → 3,277 s,
    plus 120 s = 3,397 s, above the 15–30 minutes such answers take under heavy batching. Tokens
    count up to :data:`~tokenplan.client.answer_size.LIMIT_TOKENS` (262,144 → at most 26,334 s, 7.3 h),
    so a huge ``max_tokens`` from a Batch line or a plan file cannot make a request wait for days.
    """
    return base_s + min(max_tokens, LIMIT_TOKENS) / slowest_tok_s


async def call_with_retries(
    send: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    rng: random.Random,
    *,
    on_failure: Callable[[RequestFailed], None] | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> tuple[T, int]:
    """Call ``send`` until it succeeds, fails for good, or ``policy.max_attempts`` tries are used.

    Returns ``(result, attempts)``. ``on_failure`` sees every failure (e.g. to eject an endpoint).

    Raises:
        RetriesExhausted: the last failure, with the number of tries made.
    """
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return await send(), attempt
        except RequestFailed as failure:
            if on_failure is not None:
                on_failure(failure)
            if not is_retryable(failure) or attempt == policy.max_attempts:
                raise RetriesExhausted(failure, attempt) from failure
            await sleep(policy.delay_s(attempt, rng, failure.retry_after_s))
    raise AssertionError("unreachable: the loop returns or raises")


class RetriesExhausted(Exception):
    """A request failed for good: ``failure`` is the last failure, ``attempts`` the tries made."""

    def __init__(self, failure: RequestFailed, attempts: int):
        self.failure, self.attempts = failure, attempts
        super().__init__(f"{failure} (after {attempts} attempt{'s' if attempts > 1 else ''})")
