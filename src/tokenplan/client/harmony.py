"""gpt-oss answers whose Harmony channels came back raw in ``content``.

gpt-oss writes its answer as Harmony messages (OpenAI's format guide,
https://github.com/openai/openai-cookbook/blob/main/articles/openai-harmony.md, "Handling
reasoning output in subsequent sampling"): after a prompt that ends with ``<|start|>assistant``
the model writes ::

    <|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>

and a tool call as ``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>``
(the recipient ``to=…`` may also sit after the role). Engines with a Harmony parser turn this into
``reasoning`` and ``content``; ``trtllm-serve`` has returned the raw text in ``content`` instead
(NVIDIA/TensorRT-LLM issue #9256, ``finish_reason: "stop"``). The stop tokens ``<|return|>`` and
``<|call|>`` are usually left out of the text, so the last message may be unterminated.

:func:`split_harmony` splits such text: ``analysis`` messages are the reasoning, ``final`` messages
the answer. Anything else cannot be stored as a plain answer and raises :class:`HarmonyError`: a
tool call (a ``to=`` recipient), another channel (``commentary`` preambles go with tool calls,
which tokenplan does not keep), a role other than ``assistant``, text outside a message, or no
``final`` message although the answer was not cut by ``max_tokens`` (``finish_reason`` other than
``length``; a cut answer keeps its reasoning and an empty answer, and is flagged by its finish).
"""

from __future__ import annotations

import re

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
ENDS = ("<|end|>", "<|return|>", "<|call|>")
_MARKER = re.compile(r"(<\|(?:start|channel|message|constrain|end|return|call)\|>)")


class HarmonyError(ValueError):
    """Harmony text that is not one plain answer; the message says what was found."""


def is_harmony(text: str) -> bool:
    """Whether ``text`` is raw Harmony output: it begins with ``<|channel|>`` (the prompt ended
    with ``<|start|>assistant``) or with ``<|start|>`` (a whole message). Text that only mentions
    a marker later on is plain text."""
    return text.lstrip().startswith((CHANNEL, START))


def split_harmony(text: str, finish_reason: str | None) -> tuple[str, str | None]:
    """``(answer, reasoning)`` from raw Harmony text (see the module docstring).

    ``answer`` joins the ``final`` messages, ``reasoning`` the ``analysis`` messages (one line
    break between two), ``None`` when there is none.

    Raises:
        HarmonyError: the text holds anything but ``analysis`` and ``final`` messages of the
            assistant, or no ``final`` message while ``finish_reason`` is not ``length``.
    """
    parts = _MARKER.split(text)
    if parts[0].strip():
        raise HarmonyError(f"text before the first Harmony marker: {parts[0][:40]!r}")
    analysis: list[str] = []
    final: list[str] = []
    header = ""
    in_body = False
    for marker, chunk in zip(parts[1::2], parts[2::2]):
        if in_body:
            if marker not in ENDS:
                raise HarmonyError(f"{marker} inside a message body (expected {' or '.join(ENDS)})")
            if chunk.strip():
                raise HarmonyError(f"text between two Harmony messages: {chunk[:40]!r}")
            in_body = False
        elif marker == MESSAGE:
            channel = _channel(header)
            (analysis if channel == "analysis" else final).append(chunk)
            in_body, header = True, ""
        elif marker in ENDS:
            raise HarmonyError(f"{marker} outside a message")
        else:
            header += marker + chunk
    if header:
        raise HarmonyError(f"a Harmony header without a message: {header[:60]!r}")
    if not final and finish_reason != "length":
        raise HarmonyError(
            f"no final channel (finish_reason {finish_reason!r}, {len(analysis)} analysis messages): "
            "the model did not answer"
        )
    return "".join(final), ("\n".join(analysis) if analysis else None)


def _channel(header: str) -> str:
    """The channel of one message header (``<|start|>assistant<|channel|>final``), ``analysis``
    or ``final`` only."""
    if " to=" in f" {header}".replace(START, " ").replace(CHANNEL, " "):
        raise HarmonyError(f"a tool call in the answer ({header[:60]!r}): tokenplan keeps plain answers only")
    role = header.split(CHANNEL, 1)[0]
    if role and role.removeprefix(START).strip() not in ("", "assistant"):
        raise HarmonyError(f"a message of role {role.removeprefix(START)[:30]!r}, not assistant")
    if CHANNEL not in header:
        raise HarmonyError("a Harmony message without a channel")
    channel = header.split(CHANNEL, 1)[1].split(CONSTRAIN, 1)[0].strip()
    if channel not in ("analysis", "final"):
        raise HarmonyError(
            f"channel {channel[:30]!r} in the answer (tokenplan keeps analysis as reasoning and final as the answer)"
        )
    return channel
