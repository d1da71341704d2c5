"""How large an answer, and how many tokens, the client's derived limits allow for.

:data:`LIMIT_TOKENS` bounds what a request's ``max_tokens`` can lift them to (the answer-size cap
here, the request deadline in :mod:`tokenplan.client.retry`); :func:`answer_bytes_cap` is the
default cap on one answer body (``generate --max-answer-bytes``).
"""

from __future__ import annotations

# The most tokens the derived limits (answer size, request deadline) allow for, whatever max_tokens a
# Batch line or a plan file asks: 262,144 is the context of nine catalog models (Qwen3-2507 among
# them), the most common longest one; an answer cannot outgrow its context. Without it, max_tokens
# 10^9 lifted the size cap to ~1 TB and an endless stream grew to 5 GB RSS in 25 s (issue 26).
LIMIT_TOKENS = 2**18


def answer_bytes_cap(max_tokens: int) -> int:
    """The default cap on one answer body (bytes): 1 MiB + 1 KiB per requested token, the tokens
    counted up to :data:`LIMIT_TOKENS` (so at most 1 MiB + 256 MiB = 269,484,032 bytes).

    A streamed chunk carrying one token is ~200 bytes of JSON wrapper (``data: {"id":
    "chatcmpl-…","object":"chat.completion.chunk","created":…,"model":…,"choices":[{"index":0,
    "delta":{"content":"…"},"finish_reason":null}]}``) plus the token, ≤ 24 bytes even when every
    character is ``\\uXXXX``-escaped; 1 KiB per token leaves 4× for long model names and logprobs.
    Example: max_tokens 32,768 → 1 MiB + 32 MiB = 34,603,008 bytes.
    """
    return 2**20 + 1024 * min(max_tokens, LIMIT_TOKENS)
