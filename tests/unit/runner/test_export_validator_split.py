"""The training export keeps in ``x.jsonl`` only rows SpecForge's validator accepts: a row with a
blank or non-text turn (an empty prompt, a list of no parts) goes to ``x.unvalidated.jsonl``, as
tool turns do. Checked against the project's transcription of the validator's rules
(tests/support/specforge_rules.py, from ``scripts/conversation_validation.py``)."""

from __future__ import annotations

import pytest
from tests.support.specforge_rules import validator_problem

from tokenplan.runner.store.export import validator_unsupported


def _line(*turns: dict) -> dict:
    return {"id": "r1", "status": "success", "conversations": list(turns)}


ANSWER = {"role": "assistant", "content": "4", "reasoning_content": "2 + 2"}


@pytest.mark.parametrize(
    "first",
    [
        {"role": "user", "content": ""},
        {"role": "user", "content": "   \n "},
        {"role": "user", "content": []},
        {"role": "system", "content": ""},
    ],
)
def test_a_blank_turn_is_routed_apart_and_is_what_the_validator_refuses(first):
    line = (
        _line(first, {"role": "user", "content": "2+2?"}, ANSWER) if first["role"] == "system" else _line(first, ANSWER)
    )
    assert validator_unsupported(line) == "blank_turn"
    assert validator_problem(line) is not None and "content must be a non-empty string" in validator_problem(line)


def test_a_well_formed_row_stays_in_the_training_file():
    line = _line({"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}, ANSWER)
    assert validator_unsupported(line) is None and validator_problem(line, expect_reasoning=True) is None


@pytest.mark.parametrize(("content", "routed"), [("", "tool_turns"), ("Let me check.", None)])
def test_an_answer_that_only_calls_a_tool_is_routed_apart(content, routed):
    # blank text is refused ("message 1 content must be a non-empty string"); text beside the calls
    # passes the validator, which reads role and content, and the trainer's parser keeps tool_calls
    call = {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    line = _line(
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": content, "tool_calls": [call]},
    )
    assert validator_unsupported(line) == routed
    assert (validator_problem(line) is None) is (routed is None)
    # an empty list is no call: a text answer stays in the training file
    plain = _line({"role": "user", "content": "2+2?"}, {**ANSWER, "tool_calls": []})
    assert validator_unsupported(plain) is None


def test_a_blank_id_from_a_run_started_before_blank_ids_counted_as_none_goes_to_the_companion():
    # SpecForge's validator: "id must be a non-empty string" (stripped); such a record can only come
    # from a run begun before runner.input.shapes.declared_id read blank ids as none
    line = {**_line({"role": "user", "content": "2+2?"}, ANSWER), "id": "  "}
    assert validator_unsupported(line) == "blank_id"
    assert validator_problem(line) == "id must be a non-empty string"
