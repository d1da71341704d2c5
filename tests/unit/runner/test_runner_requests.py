"""Which requests a row needs, their seeds and bodies, and the length policy."""

from __future__ import annotations

import asyncio

from tokenplan.client.openai import Completion, Timings, Usage
from tokenplan.runner.input.shapes import Message, Row
from tokenplan.runner.requests import (
    Dropped,
    Sampling,
    Sent,
    prompt_prefixes,
    request_body,
    run_unit,
    seed_for,
    work_units,
)

S, U1, A1, U2, A2 = (
    Message("system", "s"),
    Message("user", "u1"),
    Message("assistant", "a1"),
    Message("user", "u2"),
    Message("assistant", "a2"),
)


def test_regenerate_sends_one_request_per_user_turn_without_old_answers() -> None:
    assert prompt_prefixes((S, U1, A1, U2, A2), "regenerate") == [[S, U1], [U2]]


def test_consecutive_user_turns_make_one_request() -> None:
    assert prompt_prefixes((U1, U2, A1), "regenerate") == [[U1, U2]]


def test_complete_sends_everything_up_to_the_last_user_turn() -> None:
    assert prompt_prefixes((S, U1, A1, U2, A2), "complete") == [[S, U1, A1, U2]]


def test_n_samples_get_their_own_ids_and_seeds() -> None:
    row = Row("r", (U1,), "prompt", "f", 1)
    assert [u.id for u in work_units(row, 1)] == ["r"]
    units = list(work_units(row, 3))
    assert [u.id for u in units] == ["r#0", "r#1", "r#2"]
    seeds = {seed_for(0, u.id, 0) for u in units}
    assert len(seeds) == 3 and all(0 <= s < 2**31 for s in seeds)
    assert seed_for(0, "r#1", 0) == seed_for(0, "r#1", 0) != seed_for(1, "r#1", 0)


def test_the_body_sends_only_what_is_set_and_extra_json_last() -> None:
    sampling = Sampling(max_tokens=64, temperature=0.6, top_k=20, thinking=False, extra_body={"ignore_eos": True})
    body = request_body("m", [{"role": "user", "content": "q"}], sampling, seed=5)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "q"}],
        "max_tokens": 64,
        "temperature": 0.6,
        "seed": 5,
        "top_k": 20,
        "chat_template_kwargs": {"enable_thinking": False},
        "ignore_eos": True,
    }


def _completion(content: str, finish: str) -> Completion:
    return Completion(content, "why", finish, Usage(3, 2, None), Timings(0.0, 1.0), "m")


def test_each_turn_is_asked_over_the_regenerated_history() -> None:
    prompts: list[list[dict]] = []

    async def send(messages, turn, retry):
        prompts.append(messages)
        return Sent(_completion(f"new{turn}", "stop"), "http://e/v1", 1, 7)

    record = asyncio.run(
        run_unit(next(work_units(Row("r", (S, U1, A1, U2, A2), "c", "f", 1), 1)), "regenerate", "keep", 2, send)
    )
    assert prompts[1] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "new0"},
        {"role": "user", "content": "u2"},
    ]
    assert record.conversations[-1] == {"role": "assistant", "content": "new1", "reasoning_content": "why"}
    assert [t.seed for t in record.turns] == [7, 7]


def test_length_policy_keep_flags_drop_skips_retry_asks_again_with_a_new_seed() -> None:
    unit = next(work_units(Row("r", (U1,), "prompt", "f", 1), 1))
    retries: list[int] = []

    async def always_length(messages, turn, retry):
        retries.append(retry)
        return Sent(_completion("cut", "length"), "e", 1, retry)

    kept = asyncio.run(run_unit(unit, "complete", "keep", 2, always_length))
    assert kept.turns[0].length_flag is True and retries == [0]
    assert asyncio.run(run_unit(unit, "complete", "drop", 2, always_length)) == Dropped("length", 0)
    retries.clear()
    retried = asyncio.run(run_unit(unit, "complete", "retry", 2, always_length))
    # 1 first try + 2 length retries, then kept and flagged.
    assert retries == [0, 1, 2] and retried.turns[0].length_retries == 2


def test_regenerate_keeps_a_system_turn_after_the_last_user_turn_in_the_record() -> None:
    closing = Message("system", "closing note")

    async def send(messages, turn, retry):
        return Sent(_completion(f"new{turn}", "stop"), "http://e/v1", 1, 7)

    unit = next(work_units(Row("r", (S, U1, A1, closing), "c", "f", 1), 1))
    record = asyncio.run(run_unit(unit, "regenerate", "keep", 2, send))
    assert [m["role"] for m in record.conversations] == ["system", "user", "assistant", "system"]
    assert record.conversations[-1] == {"role": "system", "content": "closing note"}
