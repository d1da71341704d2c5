"""What ``tokenplan bench`` asks the servers before it measures: do they serve the model, does
the first accept ``ignore_eos``, and which prompts to send.

1. :func:`check_servers` — ``GET /models`` on every endpoint; one that cannot be reached or does
   not serve the model ends the bench before the sweep (:class:`~tokenplan.errors.ServerError`).
2. :func:`probe_workload` — a 1-token chat (``max_tokens 1``) learns whether ``ignore_eos`` is
   accepted (a 400/422 to it means no: the note says so and the sweep runs without it); then the
   prompts: a dataset's, else random prompts of exact length through ``/tokenize`` and
   ``/detokenize``, else (no tokenizer endpoint) lengths approximated from two probe chats
   (:mod:`tokenplan.bench.workload`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tokenplan.bench.workload import (
    SideRequestFailed,
    Workload,
    calibrate_words,
    dataset_workload,
    probe_messages,
    random_workload_approx,
    random_workload_exact,
)
from tokenplan.client.endpoints import v1_hint
from tokenplan.client.openai import OpenAIClient, RequestFailed
from tokenplan.client.retry import RetriesExhausted, RetryPolicy, call_with_retries
from tokenplan.errors import ServerError

# A health probe (GET /models) answers in milliseconds; 10 s tolerates a server still warming up.
PROBE_DEADLINE_S = 10.0
# A 1-token calibration request waits behind at most one prefill of a loaded server.
TOKEN_PROBE_DEADLINE_S = 120.0
PROBE_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.5, max_delay_s=5.0)  # 3 tries, a few seconds at most


@dataclass(frozen=True, slots=True)
class WorkloadAsk:
    """The prompts a bench wants: ``n`` random prompts of ``isl`` tokens answering ``osl`` (seeded
    by ``seed``), or a ``dataset`` file's prompts (``osl`` caps their answers); ``ignore_eos`` is
    asked for unless the server refuses it. ``api_key`` goes to the tokenizer side requests."""

    model: str
    isl: int | None
    osl: int | None
    dataset: str | None
    n: int
    seed: int
    ignore_eos: bool
    api_key: str | None = None


async def check_servers(clients: list[OpenAIClient], model: str) -> None:
    """Ask every endpoint for its models (``clients``: one per endpoint).

    Raises:
        ServerError: an endpoint cannot be reached, or does not serve ``model``.
    """
    for client in clients:  # messages name client.base_url: no credentials, query values masked
        try:
            served = await client.models(deadline_s=PROBE_DEADLINE_S)
        except RequestFailed as failure:
            if failure.redirect:  # not followed (tokenplan.client.openai): where it points, what to give
                raise ServerError(f"{client.base_url} {failure.detail}") from None
            raise ServerError(f"cannot reach {client.base_url}: {failure}{v1_hint(client.base_url, failure)}") from None
        if model not in served:
            raise ServerError(
                f"{client.base_url} does not serve model {model!r} (it serves: {', '.join(served) or 'nothing'})"
            )


async def probe_tokens(client: OpenAIClient, model: str, messages: tuple[dict, ...], ignore_eos: bool) -> int:
    """The prompt tokens the server counts for ``messages`` (its ``usage``), from a 1-token answer.

    Raises:
        RequestFailed: the request failed.
        ServerError: the answer carries no usage.
    """
    body = {"model": model, "messages": list(messages), "max_tokens": 1, "temperature": 0.0}
    if ignore_eos:
        body["ignore_eos"] = True
    try:
        # a transient failure (a 500, a dropped connection) is tried again, as generate's requests
        # are: one random 500 ended the whole sweep before it began
        done, _ = await call_with_retries(
            lambda: client.chat(body, deadline_s=TOKEN_PROBE_DEADLINE_S), PROBE_RETRY, random.Random(0)
        )
    except RetriesExhausted as exhausted:
        raise exhausted.failure from None
    if done.usage is None:
        raise ServerError("the server's answers carry no usage: token counts cannot be measured")
    return done.usage.prompt_tokens


async def _probe(client: OpenAIClient, model: str, messages: tuple[dict, ...], ignore_eos: bool) -> int:
    """:func:`probe_tokens`, a failed request raised as one line (ServerError) naming the server."""
    try:
        return await probe_tokens(client, model, messages, ignore_eos)
    except RequestFailed as failure:
        raise _probe_failed(client, failure) from None


def _probe_failed(client: OpenAIClient, failure: RequestFailed) -> ServerError:
    """A failed 1-token probe as one line naming the server; a redirect (not followed) says where
    it points and the ``--endpoint`` to give."""
    if failure.redirect:
        return ServerError(f"{client.base_url} {failure.detail}")
    return ServerError(f"{client.base_url}: a 1-token probe request failed: {failure}")


async def probe_workload(
    ask: WorkloadAsk, client: OpenAIClient, base_url: str, notes: list[str]
) -> tuple[Workload, bool]:
    """The prompts and whether ``ignore_eos`` is accepted (tried once with a 1-token probe);
    ``notes`` gains what the bench should say (``ignore_eos`` refused, lengths approximated).

    Raises:
        ServerError: the 1-token probe failed otherwise, or the answers carry no usage.
        InputError, ConfigError: an unreadable or malformed dataset file.
    """
    short, long = probe_messages(ask.seed)
    ignore_eos = ask.ignore_eos
    try:
        short_tokens = await probe_tokens(client, ask.model, short, ignore_eos)
    except RequestFailed as failure:
        if not ignore_eos or failure.kind != "status" or failure.status not in (400, 422):
            raise _probe_failed(client, failure) from None
        ignore_eos = False
        notes.append(f"the server refused ignore_eos ({failure}); output lengths are the model's own")
        short_tokens = await _probe(client, ask.model, short, False)
    if ask.dataset is not None:
        return dataset_workload(ask.dataset, ask.osl, None), ignore_eos
    if ask.isl is None or ask.osl is None:  # random prompts: the bench command always sets both
        raise TypeError(f"WorkloadAsk: random prompts need isl and osl, got {ask.isl!r}, {ask.osl!r}")
    try:
        return (
            await random_workload_exact(base_url, ask.model, ask.isl, ask.osl, ask.n, ask.seed, api_key=ask.api_key),
            ignore_eos,
        )
    except (SideRequestFailed, KeyError, TypeError, ValueError):
        pass
    long_tokens = await _probe(client, ask.model, long, ignore_eos)
    overhead, per_word = calibrate_words(short_tokens, long_tokens)
    notes.append(
        f"no /tokenize endpoint: prompt lengths approximated ({per_word:.2f} tokens per word, "
        f"{overhead:.0f} template tokens, from two probe requests)"
    )
    return random_workload_approx(ask.isl, ask.osl, ask.n, ask.seed, overhead, per_word), ignore_eos
