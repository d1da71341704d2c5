"""Issue 26: an answer that is not really finished is not a Completion. An empty answer (no
content, no reasoning) is a protocol failure, retried like any malformed answer; gpt-oss Harmony
channels returned raw in ``content`` (trtllm-serve, NVIDIA/TensorRT-LLM#9256) are split into
reasoning and answer, or refused when they hold no plain answer. An API key that no HTTP header
can carry is refused by the variable's name, never shown."""

from __future__ import annotations

import json

import pytest

from tokenplan.client.answers import RequestFailed, Timings, parse_whole
from tokenplan.client.auth import api_key_from_env
from tokenplan.client.harmony import HarmonyError, split_harmony
from tokenplan.client.reasoning import split_reasoning
from tokenplan.client.sse import SSELines
from tokenplan.client.stream import StreamAccumulator
from tokenplan.errors import InputError

T = Timings(0.0, 1.0)
# The cookbook's example answer (openai-cookbook articles/openai-harmony.md, "Handling reasoning
# output in subsequent sampling"), as it follows a prompt ending in <|start|>assistant.
COOKBOOK = (
    '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|>'
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>"
)
COOKBOOK_REASONING = 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.'


def _whole(message: dict, finish: str = "stop", completion_tokens: int | None = 500) -> bytes:
    body: dict = {
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
    }
    if completion_tokens is not None:
        body["usage"] = {"prompt_tokens": 10, "completion_tokens": completion_tokens}
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("message", "finish", "tokens", "detail"),
    [
        (
            {"content": None},
            "stop",
            500,
            "empty answer: content null, no reasoning, finish_reason 'stop', completion_tokens 500",
        ),
        ({"content": ""}, "stop", 500, "empty answer: content empty, no reasoning"),
        ({"content": None, "reasoning_content": ""}, "stop_sequence", 4096, "completion_tokens 4,096"),
        ({}, "eos_token", None, "completion_tokens not reported"),
    ],
)
def test_an_answer_with_no_text_is_a_protocol_failure(
    message: dict, finish: str, tokens: int | None, detail: str
) -> None:
    with pytest.raises(RequestFailed) as caught:
        parse_whole(_whole(message, finish, tokens), T)
    assert caught.value.kind == "protocol" and detail in caught.value.detail
    assert '"finish_reason": "' + finish + '"' in caught.value.received  # what came back is kept for errors.jsonl


def test_reasoning_alone_a_tool_call_or_a_cut_answer_is_still_an_answer() -> None:
    thought = parse_whole(_whole({"content": None, "reasoning_content": "thinking"}), T)
    assert (thought.content, thought.reasoning) == ("", "thinking")
    called = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    call = parse_whole(_whole({"content": None, "tool_calls": [called]}, "tool_calls"), T)
    assert call.content == "" and call.finish_reason == "tool_calls"
    assert [c.as_message() for c in call.tool_calls] == [called]
    # a length finish is flagged as cut and follows --on-length (keep, drop, retry), text or not
    cut = parse_whole(_whole({"content": None}, "length", 8), T)
    assert (cut.content, cut.reasoning, cut.finish_reason) == ("", None, "length")


def test_the_cookbook_harmony_answer_splits_into_reasoning_and_answer() -> None:
    completion = parse_whole(_whole({"content": COOKBOOK}), T)
    assert (completion.content, completion.reasoning) == ("2 + 2 = 4.", COOKBOOK_REASONING)


def test_harmony_without_its_stop_token_and_with_two_analysis_messages_splits() -> None:
    # The engines leave the stop token <|return|> out of the text; two analysis messages join with a line break.
    text = (
        "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Answer."
    )
    assert split_harmony(text, "stop") == ("Answer.", "one\ntwo")


def test_a_harmony_answer_cut_while_thinking_keeps_its_reasoning_with_an_empty_answer() -> None:
    completion = parse_whole(_whole({"content": "<|channel|>analysis<|message|>still thinking"}, "length"), T)
    assert (completion.content, completion.reasoning, completion.finish_reason) == ("", "still thinking", "length")


def test_a_reasoning_field_wins_over_the_analysis_channel_and_the_markers_leave_the_content() -> None:
    message = {"content": COOKBOOK, "reasoning_content": "from the parser"}
    assert split_reasoning(message, "stop") == ("2 + 2 = 4.", "from the parser")


@pytest.mark.parametrize(
    ("content", "finish", "detail"),
    [
        # trtllm-serve's leaked tool-call payload (TensorRT-LLM#9256): commentary channel, no final answer
        ('<|channel|>commentary<|message|>{"path": "/"}<|end|>', "stop", "channel 'commentary'"),
        (
            "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"location":"SF"}<|call|>',
            "stop",
            "a tool call",
        ),
        ("<|channel|>analysis<|message|>thought<|end|>", "stop", "no final channel (finish_reason 'stop'"),
        ("<|start|>user<|message|>hi<|end|>", "stop", "role 'user'"),
        (
            "<|channel|>final<|message|>a<|end|>stray<|start|>assistant<|channel|>final<|message|>b",
            "stop",
            "text between two Harmony messages",
        ),
        ("<|channel|>final<|message|>a<|channel|>final", "stop", "<|channel|> inside a message body"),
    ],
)
def test_harmony_that_is_not_one_plain_answer_is_a_protocol_failure(content: str, finish: str, detail: str) -> None:
    with pytest.raises(RequestFailed) as caught:
        parse_whole(_whole({"content": content}, finish), T)
    assert caught.value.kind == "protocol" and "gpt-oss Harmony output in content" in caught.value.detail
    assert detail in caught.value.detail
    with pytest.raises(HarmonyError):
        split_harmony(content, finish)


def test_text_that_only_mentions_harmony_markers_is_plain_text() -> None:
    text = "The token <|channel|> opens a channel header."
    assert split_reasoning({"content": text}, "stop") == (text, None)


def test_a_streamed_harmony_answer_is_split_once_joined() -> None:
    acc, lines = StreamAccumulator(), SSELines()
    pieces = [
        "<|channel|>",
        "analysis",
        "<|message|>",
        "User asks",
        "…<|end|>",
        "<|start|>assistant",
        "<|channel|>final<|message|>",
        "Four.",
    ]
    stream = b"".join(
        b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}).encode() + b"\n\n" for p in pieces
    )
    stream += b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
    for data in lines.feed(stream):
        acc.feed(data, 0.5)
    completion = acc.completion(0.0, 1.0)
    assert (completion.content, completion.reasoning) == ("Four.", "User asks…")


def test_a_stream_that_carries_no_text_is_a_protocol_failure() -> None:
    acc = StreamAccumulator()
    acc.feed(b'{"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": "stop"}]}', 0.5)
    acc.feed(b'{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 500}}', 0.6)
    with pytest.raises(
        RequestFailed, match="empty answer: content null, no reasoning, finish_reason 'stop', completion_tokens 500"
    ):
        acc.completion(0.0, 1.0)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("sk-secret\r\n", "U+000D at character 10 of 11"),
        ("sk-se\ncret", "U+000A at character 6 of 10"),
        ("\tsk-secret", "U+0009 at character 1 of 10"),
        ("sk-secret\x7f", "U+007F at character 10 of 10"),
    ],
)
def test_an_api_key_no_header_can_carry_is_refused_by_name_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, value: str, where: str
) -> None:
    monkeypatch.setenv("MY_KEY", value)
    with pytest.raises(InputError) as caught:
        api_key_from_env("MY_KEY")
    message = str(caught.value)
    assert message.startswith("--api-key-env 'MY_KEY' is not allowed") and where in message
    assert "secret" not in message and "cret" not in message and "\n" not in message
    monkeypatch.setenv("OPENAI_API_KEY", value)  # the default variable, read without --api-key-env
    with pytest.raises(InputError, match=r"\$OPENAI_API_KEY has U\+"):
        api_key_from_env(None)


def test_an_ordinary_api_key_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-proj-AbC_123-xyz")
    assert api_key_from_env("MY_KEY") == "sk-proj-AbC_123-xyz"
