"""The tool calls of an answer, at the client boundary: kept in OpenAI's form from a whole answer
and joined from a stream's pieces as the OpenAI SDK joins them; a malformed call is a ``protocol``
failure of the answer's shape (retried, then recorded), never stored."""

from __future__ import annotations

import json

import pytest

from tokenplan.client.answers import RequestFailed, Timings, parse_whole
from tokenplan.client.stream import StreamAccumulator
from tokenplan.client.tool_calls import ToolCall, ToolCallDeltas, ToolCallError, parse_tool_calls

T = Timings(0.0, 1.0)
WEATHER = {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def _whole(message: dict, finish: str = "tool_calls") -> bytes:
    body = {
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7},
    }
    return json.dumps(body).encode()


def _stream(*deltas: dict, finish: str = "tool_calls") -> StreamAccumulator:
    acc = StreamAccumulator()
    for i, delta in enumerate(deltas):
        acc.feed(json.dumps({"model": "m", "choices": [{"index": 0, "delta": delta}]}).encode(), float(i + 1))
    acc.feed(json.dumps({"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}).encode(), 9.0)
    acc.feed(b"[DONE]", 9.0)
    return acc


def test_a_whole_answers_calls_are_kept_as_openai_writes_them() -> None:
    done = parse_whole(_whole({"content": None, "tool_calls": [WEATHER]}), T)
    assert (done.content, done.reasoning, done.finish_reason) == ("", None, "tool_calls")
    assert done.tool_calls == (ToolCall("call_9", "get_weather", '{"city":"Paris"}'),)
    assert [call.as_message() for call in done.tool_calls] == [WEATHER]


def test_calls_beside_text_and_a_stop_finish_are_kept_and_an_empty_list_is_no_call() -> None:
    # vLLM answers a named tool_choice with finish_reason "stop" and empty content
    named = parse_whole(_whole({"content": "", "tool_calls": [WEATHER]}, "stop"), T)
    assert [c.as_message() for c in named.tool_calls] == [WEATHER]
    both = parse_whole(_whole({"content": "Let me check.", "tool_calls": [WEATHER]}), T)
    assert (both.content, len(both.tool_calls)) == ("Let me check.", 1)
    words = parse_whole(_whole({"content": "Sunny.", "tool_calls": []}, "stop"), T)  # vLLM sends [] with words
    assert (words.content, words.tool_calls) == ("Sunny.", ())


def test_tgi_object_arguments_become_json_text_and_a_missing_id_stays_missing() -> None:
    call = {"type": "function", "function": {"name": "f", "arguments": {"city": "Paris", "days": 2}}}
    done = parse_whole(_whole({"content": None, "tool_calls": [call]}), T)
    assert [c.as_message() for c in done.tool_calls] == [
        {"type": "function", "function": {"name": "f", "arguments": '{"city":"Paris","days":2}'}}
    ]


@pytest.mark.parametrize(
    ("calls", "detail"),
    [
        ({"id": "x"}, "choices[0].message.tool_calls is dict, not a list"),
        ([{"id": "c1"}], "choices[0].message.tool_calls[0] is not an object with a 'function' object"),
        (
            [{"function": {"arguments": "{}"}}],
            "choices[0].message.tool_calls[0].function.name is NoneType, not a string",
        ),
        ([{"function": {"name": ""}}], "choices[0].message.tool_calls[0].function.name is empty"),
        ([{"function": {"name": "f", "arguments": 5}}], "choices[0].message.tool_calls[0].function.arguments is int"),
        ([{"id": 7, "function": {"name": "f"}}], "choices[0].message.tool_calls[0].id is int, not a string"),
    ],
)
def test_a_malformed_call_is_a_protocol_failure_of_the_answers_shape(calls: object, detail: str) -> None:
    with pytest.raises(RequestFailed) as failed:
        parse_whole(_whole({"content": None, "tool_calls": calls}), T)
    assert failed.value.kind == "protocol" and failed.value.detail.startswith(detail) and failed.value.malformed


def test_a_tool_calls_finish_with_no_call_and_no_text_lost_its_answer() -> None:
    with pytest.raises(
        RequestFailed, match="empty answer: content null, no reasoning, no tool call, finish_reason 'tool_calls'"
    ):
        parse_whole(_whole({"content": None}), T)
    # with reasoning alone too: the finish says the answer is a call, and none came (a break-it
    # pass: stored, it was counted done and left out of the export as "no answer text")
    with pytest.raises(RequestFailed, match="'tool_calls' with reasoning but no tool call and no content"):
        parse_whole(_whole({"content": None, "reasoning_content": "hmm"}), T)
    # the deprecated function_call answer is not read: refused, not stored empty
    with pytest.raises(RequestFailed, match="a function_call answer"):
        parse_whole(_whole({"content": None, "function_call": {"name": "f", "arguments": "{}"}}, "function_call"), T)


def test_streamed_pieces_are_joined_by_index_in_arrival_order() -> None:
    acc = _stream(
        {"role": "assistant", "content": None},
        {
            "tool_calls": [
                {"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_", "arguments": ""}}
            ]
        },
        {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather"}}]},
        {
            "tool_calls": [
                {"index": 1, "function": {"name": "time", "arguments": '{"tz"'}},
                {"index": 0, "function": {"arguments": '{"city":'}},
            ]
        },
        {
            "tool_calls": [
                {"index": 0, "function": {"arguments": '"Paris"}'}},
                {"index": 1, "function": {"arguments": ':"CET"}'}},
            ]
        },
    )
    done = acc.completion(0.0, 10.0)
    assert (done.content, done.finish_reason) == ("", "tool_calls")
    assert [c.as_message() for c in done.tool_calls] == [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz":"CET"}'}},
    ]
    # each chunk holding a piece of a call marks an arrival (TTFT from the first); the role-only chunk does not
    assert done.timings.chunk_times_s == (2.0, 3.0, 4.0, 5.0)


def test_a_streamed_call_naming_no_function_or_without_an_index_is_a_protocol_failure() -> None:
    acc = _stream({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
    with pytest.raises(RequestFailed, match="delta.tool_calls: the call at index 0 names no function") as failed:
        acc.completion(0.0, 10.0)
    assert failed.value.malformed
    with pytest.raises(RequestFailed, match=r"delta.tool_calls\[\].index is None, not a call's index"):
        _stream({"tool_calls": [{"function": {"name": "f"}}]})


def test_a_redacted_call_loses_the_secret_in_every_text() -> None:
    call = ToolCall("id-KEY", "f", '{"token":"KEY"}')
    assert call.redacted(lambda text: text.replace("KEY", "***")) == ToolCall("id-***", "f", '{"token":"***"}')


def test_a_repeated_id_is_one_id_and_a_blank_name_or_empty_id_is_no_name_or_id() -> None:
    # a break-it pass: an id sent with every piece read "call_1call_1", which names no call a tool
    # turn answers; a name of spaces was kept; an empty id was stored as ""
    deltas = ToolCallDeltas()
    deltas.feed([{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{"}}])
    deltas.feed([{"index": 0, "id": "call_1", "function": {"arguments": "}"}}])
    assert deltas.calls() == (ToolCall("call_1", "f", "{}"),)
    with pytest.raises(ToolCallError, match="function.name is blank"):
        parse_tool_calls({"tool_calls": [{"id": "c", "function": {"name": "  ", "arguments": "{}"}}]})
    (call,) = parse_tool_calls({"tool_calls": [{"id": "", "function": {"name": "f", "arguments": "{}"}}]})
    assert call.id is None and "id" not in call.as_message()
