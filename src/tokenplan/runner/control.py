"""The HTTP statuses ``generate`` reads as a refusal or as fatal, and the control request that
tells a refused job from refused rows (:mod:`tokenplan.runner.refusals`)."""

from __future__ import annotations

import random
import re
from typing import Any

from tokenplan.client.openai import Completion, OpenAIClient, RequestFailed
from tokenplan.client.retry import RetriesExhausted, call_with_retries
from tokenplan.runner.requests import request_body, seed_for
from tokenplan.runner.spec import JobSettings

# 401/403/404: bad key, model or route — they concern every request, so they end the run.
FATAL_STATUSES = frozenset({401, 403, 404})
# 400/413/422: this request is refused (a prompt beyond the context, a body too large) — the row's
# own outcome, unless the refusal rule (runner.refusals) finds it job-wide. 422 is both: Hugging
# Face TGI answers its input validation (a prompt whose tokens + max_new_tokens pass the context)
# with 422 (router `InferError::ValidationError => StatusCode::UNPROCESSABLE_ENTITY`), one row's
# fate; `transformers serve` answers a field it does not take (top_k) with 422 on every request,
# which the rule and its control request stop after min(8, rows) rows. As fatal, one TGI row too
# long stopped every rerun (a break-it pass).
REFUSED_STATUSES = frozenset({400, 413, 422})


def fatal_line(failure: RequestFailed, model: str, endpoint: str) -> str | None:
    """The line that ends a run for ``failure`` of a request to ``endpoint``, or None for a
    failure that is the row's own: a 401/403/404 (:data:`FATAL_STATUSES`), or a redirect, which
    is not followed (:mod:`tokenplan.client.openai`) and concerns every request alike."""
    if failure.redirect:
        return f"{endpoint} {failure.detail}"
    if failure.kind == "status" and failure.status in FATAL_STATUSES:
        return (
            f"the server answered {failure.status} ({failure.detail}) for model {model!r}: "
            "check --endpoint, --model and the API key variable"
        )
    return None


# The control request's prompt (tokenplan.runner.refusals): one line any chat model answers briefly.
CONTROL_MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Reply with the single word OK."}]


async def control_request(client: OpenAIClient, job: JobSettings) -> tuple[bool | None, str]:
    """The control request of :mod:`tokenplan.runner.refusals`: the job's settings (``max_tokens``,
    sampling, a ``seed`` where the job sends one) on a one-line prompt, to an endpoint that
    refused rows before answering any. Not a row: nothing is stored or counted. Transient
    failures (5xx, 429, a dropped connection, a timeout) are tried again as a row's are
    (``job.retry``).

    Returns:
        (True, "") when it is answered (the rows are refused, not the settings); (False, the
        server's message) when it is refused as the rows were (400, 413, 422); (None, what came
        back) when every try failed otherwise, or the client failed in a way it does not know:
        no verdict on the settings (the stop says so; held refusals stay unfinal).
    """
    job_seed = job.sampling.seed
    seed = None if job_seed is None else seed_for(job_seed, "tokenplan-control", 0, 0)
    body = request_body(job.model, CONTROL_MESSAGES, job.sampling, seed)

    async def once() -> Completion:
        return await client.chat(body, deadline_s=job.deadline_s, stream=job.stream, max_bytes=job.max_answer_bytes)

    try:
        await call_with_retries(once, job.retry, random.Random())
    except RetriesExhausted as exhausted:
        failure = exhausted.failure
        refused = failure.kind == "status" and failure.status in REFUSED_STATUSES | FATAL_STATUSES
        shown = f"{failure.status} {failure.detail}" if failure.status else f"{failure.kind}: {failure.detail}"
        return (False if refused else None), shown
    except Exception as failed:  # nothing the client knows (a bug): no verdict, said in the stop's line
        return None, f"{type(failed).__name__}: {failed}"
    return True, ""


# The engines' words for a request past the context (the context, then the prompt's tokens):
# vLLM "This model's maximum context length is 4096 tokens. However, you requested 5500 tokens
# (2000 in the messages, 3500 in the completion)" (serving_engine._validate_input) and, newer,
# "... maximum context length is 4096 tokens and your request has 2000 input tokens (3500 > 4096 -
# 2000)"; SGLang "... maximum context length of 4096 tokens. You requested a total of 5500 tokens:
# 2000 tokens from the input messages and 3500 tokens for the completion"; TensorRT-LLM "The sum
# of prompt length (2000) and query length (0) max_tokens (3500) should not exceed max_seq_len (4096)";
# Hugging Face TGI (422) "`inputs` tokens + `max_new_tokens` must be <= 4096. Given: 2000 `inputs`
# tokens and 3500 `max_new_tokens`" (router validation.rs, MaxTotalTokens).
_CONTEXT = re.compile(r"maximum context length (?:is|of) (\d+)|max_seq_len \((\d+)\)|`max_new_tokens` must be <= (\d+)")
_PROMPT = re.compile(
    r"(\d+) in the messages|has (\d+) input tokens|(\d+) tokens from the input|prompt length \((\d+)\)"
    r"|Given: (\d+) `inputs` tokens"
)
_QUERY = re.compile(r"query length \((\d+)\)")  # TensorRT-LLM counts it in the sum too


def context_room(failure: RequestFailed, asked: object) -> int | None:
    """The ``max_tokens`` a refused request fits its context with, or None: a 400/413/422 whose
    message states the served context and the prompt's tokens (:data:`_CONTEXT`, :data:`_PROMPT`),
    for a request whose ``max_tokens`` (``asked``) is below the context by itself but not beside
    this prompt. Sent again with the room left less one token (≥ 1 token), the answer stops at
    the context, as the plan assumes; a ``max_tokens`` that passes the context alone is a setting
    every request carries, left to the refusal rule (``runner.refusals``)."""
    if failure.kind != "status" or failure.status not in REFUSED_STATUSES or not isinstance(asked, int):
        return None
    context, prompt = _CONTEXT.search(failure.detail or ""), _PROMPT.search(failure.detail or "")
    if context is None or prompt is None:
        return None
    ctx = int(next(g for g in context.groups() if g is not None))
    query = _QUERY.search(failure.detail or "")
    # one token under the sum the context takes: SGLang refuses a prompt + max_new_tokens that
    # equals its context too (``>= _max_req_len``, tokenizer_manager), vLLM only one above it (a
    # break-it pass: the room, sent again, was refused by SGLang and the row skipped)
    room = ctx - int(next(g for g in prompt.groups() if g is not None)) - (int(query.group(1)) if query else 0) - 1
    return room if asked < ctx and 1 <= room < asked else None
