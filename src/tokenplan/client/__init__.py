"""OpenAI-compatible HTTP client: async only, shared by ``tokenplan generate`` and ``tokenplan bench``.

- :mod:`tokenplan.client.openai` — one chat request → :class:`Completion` (text, reasoning,
  finish_reason, usage, timings); the one SSE parser.
- :mod:`tokenplan.client.reasoning` — ``reasoning_content`` / ``reasoning`` / ``<think>…</think>``
  → one field.
- :mod:`tokenplan.client.endpoints` — a pool of endpoints: least outstanding requests, health check,
  eject and probe back.
- :mod:`tokenplan.client.retry` — what is retried, backoff with jitter, deadline from max_tokens.
- :mod:`tokenplan.client.metrics` — TTFT, TPOT, ITL, E2E and their percentiles.

Nothing here retries behind the caller's back: one call of :meth:`OpenAIClient.chat` is one HTTP
request. Retries are the caller's decision (:func:`tokenplan.client.retry.call_with_retries`).
"""
