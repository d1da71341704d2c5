"""Answers validated at the client boundary: unfinished, malformed, error-shaped and over-size
answers become RequestFailed; a fuzz test shows no input makes the parser raise anything else."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.fault_server import FaultServerProcess

from tokenplan.client.answer_size import answer_bytes_cap
from tokenplan.client.answers import (
    TERMINAL_FINISH_REASONS,
    Completion,
    RequestFailed,
    Timings,
    answer_tokens_cap,
    error_message,
    parse_whole,
)
from tokenplan.client.auth import redact
from tokenplan.client.openai import OpenAIClient, public_url
from tokenplan.client.sse import SSELines
from tokenplan.client.stream import StreamAccumulator

T = Timings(0.0, 1.0)
BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def _whole(finish: object = "stop", content: object = "hi", usage: object = None) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    if finish is not ...:
        choice["finish_reason"] = finish
    body: dict = {"model": "m", "choices": [choice]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


@pytest.mark.parametrize("finish", sorted(TERMINAL_FINISH_REASONS))
def test_a_terminal_finish_reason_finishes_the_answer(finish: str) -> None:
    assert parse_whole(_whole(finish), T).finish_reason == finish


@pytest.mark.parametrize("finish", ["abort", None, ..., {"weird": 1}, 3, "", "content_filter"])
def test_an_unfinished_or_odd_finish_reason_is_a_protocol_failure_with_what_came_back(finish: object) -> None:
    with pytest.raises(RequestFailed) as caught:
        parse_whole(_whole(finish), T)
    assert caught.value.kind == "protocol" and "finish_reason" in caught.value.detail
    assert '"content": "hi"' in caught.value.received


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (_whole(usage={"prompt_tokens": "ten", "completion_tokens": 1}), "usage.prompt_tokens"),
        (_whole(usage={"prompt_tokens": 1, "completion_tokens": -2}), "usage.completion_tokens"),
        (_whole(usage={"prompt_tokens": 1, "completion_tokens": 1e300}), "usage.completion_tokens"),
        (_whole(usage=[1, 2]), "usage"),
        (_whole(usage={"completion_tokens_details": {"reasoning_tokens": True}}), "usage.reasoning_tokens"),
        (_whole(content=12345), "message.content"),
        (b'{"choices": []}', "no choices"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_a_malformed_field_is_a_protocol_failure_naming_it(raw: bytes, field: str) -> None:
    with pytest.raises(RequestFailed) as caught:
        parse_whole(raw, T)
    assert caught.value.kind == "protocol" and field in caught.value.detail


def _stream(*payloads: bytes) -> Completion:
    acc, lines = StreamAccumulator(), SSELines()
    for block in payloads:
        for data in lines.feed(block):
            if acc.feed(data, 0.5):
                break
    for data in lines.close():
        acc.feed(data, 0.5)
    return acc.completion(0.0, 1.0)


def _chunk(delta: dict, finish: object = None) -> bytes:
    return (
        b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"
    )


def test_a_stream_that_ends_without_finish_reason_or_done_is_not_an_answer() -> None:
    with pytest.raises(RequestFailed, match="without a finish_reason") as caught:
        _stream(_chunk({"content": "hel"}), _chunk({"content": "lo"}))
    assert caught.value.kind == "protocol"


def test_a_streamed_abort_is_not_an_answer() -> None:
    with pytest.raises(RequestFailed, match="'abort'"):
        _stream(_chunk({"content": "hel"}), _chunk({}, "abort"), b"data: [DONE]\n\n")


def test_a_streamed_non_string_delta_is_a_protocol_failure() -> None:
    with pytest.raises(RequestFailed, match="delta.content"):
        _stream(_chunk({"content": 12345}), _chunk({}, "stop"), b"data: [DONE]\n\n")


def test_ping_events_and_empty_data_lines_are_skipped() -> None:
    done = _stream(
        b"event: ping\ndata:\n\n: keep-alive\n\n",
        _chunk({"content": "ok"}),
        _chunk({}, "stop"),
        b"data: \n\ndata: [DONE]\n\n",
    )
    assert (done.content, done.finish_reason) == ("ok", "stop")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            b'{"object": "error", "message": "prompt too long", "type": "BadRequestError", "code": 400}',
            "prompt too long",
        ),
        (b'{"error": {"message": "rate limited", "type": "x"}}', "rate limited"),
        (b'{"error": "model not found"}', "model not found"),
        (b'{"detail": "Not authenticated"}', "Not authenticated"),
        (
            b'{"detail": [{"loc": ["body", "top_k"], "msg": "extra fields not permitted"}]}',
            "extra fields not permitted",
        ),
        (b"upstream connect error\n or disconnect", "upstream connect error or disconnect"),
    ],
)
def test_the_servers_message_is_kept_for_every_common_error_shape(raw: bytes, message: str) -> None:
    assert error_message(raw, "Bad Request") == message


def test_an_empty_error_body_falls_back_to_the_reason() -> None:
    assert error_message(b"", "Bad Request") == "Bad Request"


def test_secrets_and_bearer_tokens_are_redacted() -> None:
    text = "bad header Authorization: Bearer sk-abc123, key sk-abc123 and pw hunter2"
    assert redact(text, ["sk-abc123", "hunter2"]) == "bad header Authorization: Bearer ***, key *** and pw ***"


def test_endpoints_are_printed_without_credentials() -> None:
    assert public_url("http://user:hunter2@host:8000/v1/") == "http://host:8000/v1"
    assert public_url("http://host:8000/v1") == "http://host:8000/v1"


def test_the_default_answer_cap_follows_max_tokens() -> None:
    assert answer_bytes_cap(32_768) == 2**20 + 32_768 * 1024 == 34_603_008


# ---- fuzz: no input makes the parser raise anything but RequestFailed -------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "choices",
        "usage",
        "model",
        "error",
        "message",
        "delta",
        "finish_reason",
        "content",
        "reasoning_content",
        "prompt_tokens",
        "completion_tokens",
        "completion_tokens_details",
    ]
)
_answerish = st.recursive(
    st.none() | st.integers(-3, 10) | st.sampled_from(["stop", "abort", "length", "x", 1e300, 2**70, "\ud800"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=16,
)


def _check(raw: bytes) -> None:
    try:
        done = parse_whole(raw, T)
    except RequestFailed as failure:
        assert failure.kind == "protocol"
        return
    assert isinstance(done.content, str) and done.finish_reason in TERMINAL_FINISH_REASONS
    assert done.usage is None or (isinstance(done.usage.prompt_tokens, int) and done.usage.prompt_tokens >= 0)
    _storable(done)


def _storable(done: Completion) -> None:
    """What the runner stores of an answer can be written (orjson raises on anything it cannot)."""
    usage = (
        None
        if done.usage is None
        else [done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.reasoning_tokens]
    )
    orjson.dumps([done.content, done.reasoning, done.finish_reason, usage, done.model])


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        _json.map(lambda v: json.dumps(v).encode()),
        _answerish.map(lambda v: json.dumps(v).encode()),
    )
)
def test_fuzz_whole_answers_parse_or_fail_as_protocol(raw: bytes) -> None:
    _check(raw)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=60),
            _answerish.map(lambda v: b"data: " + json.dumps(v).encode() + b"\n\n"),
            st.sampled_from([b"data: [DONE]\n\n", b"event: ping\n", b"data:\n\n", b"\r\n"]),
        ),
        max_size=8,
    )
)
def test_fuzz_streams_parse_or_fail_as_protocol(blocks: list[bytes]) -> None:
    try:
        done = _stream(*blocks)
    except RequestFailed as failure:
        assert failure.kind == "protocol"
        return
    assert isinstance(done.content, str) and done.finish_reason in TERMINAL_FINISH_REASONS
    _storable(done)


# ---- against the fault server ----------------------------------------------------------------


def _scripted(tmp_path: Path, entries: list[dict]) -> FaultServerProcess:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(entries))
    return FaultServerProcess(str(tmp_path), script=str(script))


async def _chat(url: str, **kwargs) -> Completion:
    async with OpenAIClient(url, max_connections=2, api_key=kwargs.pop("api_key", None)) as client:
        return await client.chat(BODY, **{"deadline_s": 10, **kwargs})


def test_an_answer_over_the_cap_is_an_oversize_failure(tmp_path: Path) -> None:
    # max_tokens 8 → cap 1 MiB + 8 KiB = 1,056,768 bytes; the answer is 2,000,000 characters.
    big = json.dumps({"choices": [{"message": {"content": "x" * 2_000_000}, "finish_reason": "stop"}]})
    with _scripted(tmp_path, [{"raw": big}]) as server:
        with pytest.raises(RequestFailed) as whole:
            asyncio.run(_chat(server.url))
        with pytest.raises(RequestFailed) as streamed:
            asyncio.run(_chat(server.url, stream=True))
    assert whole.value.kind == streamed.value.kind == "oversize"
    assert "1,056,768 bytes" in whole.value.detail


def test_a_server_echoing_the_key_has_it_redacted(tmp_path: Path) -> None:
    entry = {"status": 400, "raw": json.dumps({"object": "error", "message": "bad header {{authorization}}"})}
    with _scripted(tmp_path, [entry]) as server:
        with pytest.raises(RequestFailed) as caught:
            asyncio.run(_chat(server.url, api_key="sk-secret-42"))
    assert caught.value.detail == "bad header Bearer ***"
    assert "sk-secret-42" not in str(caught.value)


def test_a_ping_first_stream_is_answered(tmp_path: Path) -> None:
    raw = (
        "event: ping\ndata:\n\n" + _chunk({"content": "ok"}).decode() + _chunk({}, "stop").decode() + "data: [DONE]\n\n"
    )
    with _scripted(tmp_path, [{"raw": raw, "content_type": "text/event-stream"}]) as server:
        done = asyncio.run(_chat(server.url, stream=True))
    assert (done.content, done.finish_reason) == ("ok", "stop")


def test_an_error_field_that_is_null_does_not_fail_a_good_answer() -> None:
    body = json.loads(_whole("stop"))
    body["error"] = None
    assert parse_whole(json.dumps(body).encode(), T).content == "hi"
    with pytest.raises(RequestFailed, match="error in a 200 answer: overloaded"):
        parse_whole(json.dumps({**body, "error": {"message": "overloaded"}}).encode(), T)


def test_usage_beyond_what_the_request_allowed_is_malformed_one_token_past_and_not_at_it(tmp_path: Path) -> None:
    # BODY asks max_tokens 8: 8 completion tokens can be, 9 cannot; at n 2 (two choices of up to 8) 9 can.
    answers = [_whole(usage={"prompt_tokens": 3, "completion_tokens": done}).decode() for done in (8, 9, 9)]
    with _scripted(tmp_path, [{"raw": raw} for raw in answers]) as server:
        assert asyncio.run(_chat(server.url)).usage.completion_tokens == 8
        with pytest.raises(RequestFailed) as past:
            asyncio.run(_chat(server.url))

        async def two_choices() -> Completion:
            async with OpenAIClient(server.url, max_connections=2) as client:
                return await client.chat({**BODY, "n": 2}, deadline_s=10)

        assert asyncio.run(two_choices()).usage.completion_tokens == 9
    assert (past.value.kind, past.value.malformed) == ("protocol", True)
    assert past.value.detail == "usage.completion_tokens is 9, more than the request's max_tokens (allowed: 0 to 8)"
    assert '"completion_tokens": 9' in past.value.received


def test_the_token_cap_of_a_request_is_its_max_completion_tokens_or_max_tokens_times_n() -> None:
    assert answer_tokens_cap({"max_tokens": 64}) == 64
    assert answer_tokens_cap({"max_tokens": 64, "max_completion_tokens": 32}) == 32  # the newer name wins
    assert answer_tokens_cap({"max_tokens": 64, "n": 3}) == 192
    assert answer_tokens_cap({"max_tokens": True}) is None and answer_tokens_cap({}) is None
    # reasoning tokens are part of the completion tokens: more of them than of those is malformed
    usage = {"prompt_tokens": 1, "completion_tokens": 7, "completion_tokens_details": {"reasoning_tokens": 7}}
    assert parse_whole(_whole(usage=usage), T).usage.reasoning_tokens == 7
    usage["completion_tokens_details"] = {"reasoning_tokens": 8}
    with pytest.raises(RequestFailed, match=r"^protocol: usage\.reasoning_tokens is 8, more than usage\."):
        parse_whole(_whole(usage=usage), T)
