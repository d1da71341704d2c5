"""Issue 26, the parts without a server: the job-wide refusal rule, the bounds a huge max_tokens
cannot lift, the max_tokens default and what temperature 0 is warned about."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tokenplan.api.generate import GenerateRequest, check_request, model_context
from tokenplan.api.plan import PlanRequest
from tokenplan.client.answer_size import answer_bytes_cap
from tokenplan.client.retry import deadline_s
from tokenplan.errors import InputError
from tokenplan.runner.defaults import FALLBACK_MAX_TOKENS, choose_sampling, greedy_warnings
from tokenplan.runner.refusals import Held, RefusalStreak
from tokenplan.runner.requests import Sampling, request_body

CATALOG = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models"


def _held(
    row: int,
    detail: str = "This model's maximum context length is 4096 tokens. However, you requested 8203 tokens",
    status: int = 400,
) -> Held:
    return Held(f"r{row}", f"r{row}", {"file": "in.jsonl", "line": row + 1}, status, detail, 1)


def test_eight_rows_refused_alike_with_no_answer_between_are_job_wide() -> None:
    streak = RefusalStreak()
    for row in range(7):
        # each message carries the row's own token count: digits are masked, so they are one refusal
        assert streak.refused(_held(row, f"maximum context length is 4096 tokens; you requested {8190 + row}")) == []
    assert streak.job_wide is None
    assert streak.refused(_held(7, "maximum context length is 4096 tokens; you requested 8197")) == []
    assert streak.job_wide is not None and len(streak.held) == 8
    assert streak.answered() == []  # a late answer does not undo the verdict: all 8 stay held (not final)
    message = streak.message("m")
    assert "refused 8 rows in a row with 400" in message and "\n" not in message


def test_an_answer_or_another_refusal_between_makes_them_the_rows_own() -> None:
    streak = RefusalStreak()
    for row in range(5):
        streak.refused(_held(row))
    assert [h.unit_id for h in streak.answered()] == [f"r{k}" for k in range(5)]  # released: skipped
    # once the endpoint answered, each refusal is its row's own at once: 12 too-long rows at the
    # end of a file sorted by length no longer make a job-wide verdict
    for row in range(5, 17):
        assert [h.unit_id for h in streak.refused(_held(row))] == [f"r{row}"]
    assert streak.job_wide is None and streak.held == []
    fresh = RefusalStreak()
    for row in range(7):
        fresh.refused(_held(row))
    released = fresh.refused(_held(12, "prompt contains invalid UTF-8"))  # another message: a new streak
    assert [h.unit_id for h in released] == [f"r{k}" for k in range(7)] and fresh.job_wide is None
    # samples of one row (--n 4) are one row: four refusals of r20 do not make four rows
    for sample in range(4):
        fresh.refused(Held(f"r20#{sample}", "r20", {}, 400, "too long", 1))
    assert len(fresh.rows) == 1 and fresh.job_wide is None


def test_at_the_end_a_small_job_refused_throughout_is_job_wide_and_a_large_one_is_not() -> None:
    small = RefusalStreak()
    for row in range(5):
        small.refused(_held(row))
    assert small.settle(rows=5) == [] and small.job_wide is not None  # min(8, 5) = 5 rows, all refused
    large = RefusalStreak()
    for row in range(5):
        large.refused(_held(row))
    # 100 rows in the job (95 answered, by this run or an earlier one): 5 < min(8, 100) = 8
    assert [h.unit_id for h in large.settle(rows=100)] == [f"r{k}" for k in range(5)] and large.job_wide is None
    single = RefusalStreak()
    single.refused(_held(0))
    # a one-row job cannot tell its row's refusal from the job's: the row is skipped
    assert [h.unit_id for h in single.settle(rows=1)] == ["r0"] and single.job_wide is None


def test_a_control_request_decides_a_streak_before_any_answer() -> None:
    from tokenplan.runner.refusals import HELD_ROWS_LIMIT

    # With control requests (the local backend), 8 rows refused before any answer ask for one
    # control on that endpoint (once), instead of a verdict.
    streak = RefusalStreak(control=True)
    for row in range(10):
        assert streak.refused(_held(row)) == []
    assert streak.job_wide is None and streak.take_controls() == [""] and streak.take_controls() == []
    # The control refused too: the settings are refused, job-wide, and the message says so.
    streak.control_answered("", answered=False)
    assert streak.job_wide is not None and "and a short prompt with the same settings too" in streak.message("m")
    # The control answered: the refusals stay held until a row is answered (then the rows' own) …
    held = RefusalStreak(control=True)
    for row in range(8):
        held.refused(_held(row))
    held.take_controls()
    held.control_answered("", answered=True)
    assert held.job_wide is None and len(held.held) == 8
    held.refused(_held(8))
    assert held.job_wide is None and [h.unit_id for h in held.answered()] == [f"r{k}" for k in range(9)]
    # … or until HELD_ROWS_LIMIT rows are held with no answer: job-wide, the rows themselves refused
    bound = RefusalStreak(threshold=3, control=True)
    for row in range(3):
        bound.refused(_held(row))
    bound.control_answered(*bound.take_controls(), answered=True)
    for row in range(3, HELD_ROWS_LIMIT):
        bound.refused(_held(row))
    assert bound.job_wide is not None and "answers a short prompt with the job's settings" in bound.message("m")


def test_a_huge_max_tokens_cannot_lift_the_answer_cap_or_the_deadline() -> None:
    # Below the ceiling nothing changes: 1 MiB + 32,768 KiB = 34,603,008 bytes; 120 + 32,768/10 = 3,396.8 s.
    assert answer_bytes_cap(32_768) == 34_603_008 and deadline_s(32_768) == pytest.approx(3_396.8)
    # A Batch line's max_tokens 10^9: tokens count up to 2^18 = 262,144 →
    # 1,048,576 + 1,024 × 262,144 = 269,484,032 bytes (257 MiB), 120 + 26,214.4 = 26,334.4 s (7.3 h).
    assert answer_bytes_cap(10**9) == 269_484_032
    assert deadline_s(10**9) == pytest.approx(26_334.4)


def test_a_plan_with_an_absurd_output_cap_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match=r"--plan p.json job.osl_cap_tokens 1000000000000 is not allowed"):
        choose_sampling({}, 10**12, Path("p.json"), None, None)


def test_without_max_tokens_or_plan_the_default_is_the_default_plans_cap() -> None:
    assert FALLBACK_MAX_TOKENS == PlanRequest().osl_cap == 32_768


def test_the_models_context_less_each_prompt_is_what_a_request_asks_for(tmp_path: Path) -> None:
    model_dir = tmp_path / "qwen3-8b"
    model_dir.mkdir()
    shutil.copy(CATALOG / "qwen3-8b.json", model_dir / "config.json")  # max_position_embeddings 40,960
    assert model_context(str(model_dir)) == (40_960, f"max_position_embeddings of {model_dir / 'config.json'}")
    assert model_context("qwen3-8b") == (40_960, "max_position_embeddings of catalog model qwen3-8b")
    assert model_context("some-served-alias") is None
    data = tmp_path / "in.jsonl"
    data.write_text('{"prompt": "hi"}\n')
    request = GenerateRequest.build(
        inputs=[str(data)], out_dir=tmp_path / "run", endpoints=["http://127.0.0.1:1/v1"], model=str(model_dir)
    )
    checked = check_request(request)
    sampling, notes = checked.sampling, checked.notes
    assert (sampling.max_tokens, sampling.context_tokens) == (40_960, 40_960)
    assert any(note.startswith("max_tokens: the model's context 40,960") for note in notes)
    messages = [{"role": "user", "content": "hi"}]
    # '{"role":"user","content":"hi"}' is 30 bytes: 64 + 32 + 30 = 126 → 40,960 − 126 = 40,834
    assert len(json.dumps(messages[0], separators=(",", ":"))) == 30
    assert request_body(str(model_dir), messages, sampling, 1)["max_tokens"] == 40_834
    # an explicit --max-tokens is sent as given
    given = GenerateRequest.build(
        inputs=[str(data)],
        out_dir=tmp_path / "run",
        endpoints=["http://127.0.0.1:1/v1"],
        model=str(model_dir),
        max_tokens=1000,
    )
    assert check_request(given).sampling.context_tokens is None


def test_temperature_0_is_warned_about_with_n_samples_and_with_thinking() -> None:
    greedy = Sampling(max_tokens=64, temperature=0.0, thinking=True)
    said = greedy_warnings(greedy, 4)
    assert len(said) == 2
    assert said[0].startswith("--n 4 at temperature 0 (greedy decoding): the 4 samples of each row will be identical")
    # the advice does not send the user back to generation_config.json, which may be what gave the 0
    assert "generation_config" not in said[0] and "set --temperature above 0" in said[0]
    assert said[1].startswith("thinking on at temperature 0") and "Qwen3" in said[1]
    in_body = Sampling(max_tokens=64, temperature=0.0, extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert len(greedy_warnings(in_body, 1)) == 1
    assert greedy_warnings(Sampling(max_tokens=64, temperature=0.6, thinking=True), 4) == []
    assert greedy_warnings(Sampling(max_tokens=64, temperature=0.0, thinking=False), 1) == []
    # thinking not stated, the model's whole context as the cap (262,144 for Qwen3.6): a model that
    # thinks by default can loop to it; at the fallback cap of 32,768 or with thinking off, no word
    long = greedy_warnings(Sampling(max_tokens=262_144, temperature=0.0), 1)
    assert len(long) == 1 and "max_tokens 262,144" in long[0]
    assert greedy_warnings(Sampling(max_tokens=FALLBACK_MAX_TOKENS, temperature=0.0), 1) == []
    assert greedy_warnings(Sampling(max_tokens=262_144, temperature=0.0, thinking=False), 1) == []


def test_a_request_id_in_each_refusal_does_not_hide_that_they_are_one():
    # A gateway puts a request id in every message (req_<16 hex>, a UUID): words with a digit
    # are masked, so eight such refusals are one refusal on eight rows: job-wide.
    streak = RefusalStreak()
    ids = ["req_dd24f0a91c3b7e55", "3f2b9c1e-7a44-4d0b-9e21-0c5d8e6f1a2b"] * 4
    for row, rid in enumerate(ids):
        streak.refused(_held(row, f"Invalid parameter: seed is not supported (request id: {rid})"))
    assert streak.job_wide is not None and len(streak.held) == 8


def test_one_endpoints_answers_do_not_release_another_endpoints_refusals():
    # Two endpoints: A answers every row, B refuses every row (it rejects seed). A's answers say
    # nothing about B: B's eight refusals make the job-wide verdict, none is released as skipped.
    streak = RefusalStreak()
    for row in range(8):
        held = Held(f"r{row}", f"r{row}", {}, 400, "Unrecognized request argument supplied: seed", 1, "http://b/v1")
        assert streak.refused(held) == []
        assert streak.answered("http://a/v1") == []  # A answered the row after
    assert streak.job_wide is not None and streak.job_wide.endpoint == "http://b/v1"
    assert "the server at http://b/v1 refused 8 rows" in streak.message("m", endpoints=2)
    # and B's own answer releases B's refusals (its rows' own), as with one endpoint
    mixed = RefusalStreak()
    mixed.refused(Held("r0", "r0", {}, 400, "too long", 1, "http://b/v1"))
    assert [h.unit_id for h in mixed.answered("http://b/v1")] == ["r0"]


def test_an_endpoint_that_never_answered_and_refused_two_rows_is_job_wide_at_the_end():
    # A 5-row job over A (answers) and B (refuses seed): B got rows 1 and 3 only, below the
    # streak of 8. At the end B never answered and refused both alike: job-wide, nothing skipped.
    streak = RefusalStreak()
    for row in (0, 2, 4):
        streak.answered("http://a/v1")
    for row in (1, 3):
        streak.refused(
            Held(f"r{row}", f"r{row}", {}, 400, "Unrecognized request argument supplied: seed", 1, "http://b/v1")
        )
    assert streak.settle(rows=5) == [] and streak.job_wide is not None and streak.job_wide.endpoint == "http://b/v1"
    # an endpoint that answered before its last refusals keeps them as its rows' own
    mixed = RefusalStreak()
    mixed.answered("http://b/v1")
    for row in (1, 3):
        refused = Held(f"r{row}", f"r{row}", {}, 400, "too long", 1, "http://b/v1")
        assert mixed.refused(refused) == [refused]  # released at once: skipped
    assert mixed.settle(rows=100) == [] and mixed.job_wide is None


def test_a_refusal_that_states_the_context_and_the_prompt_gives_the_room_left() -> None:
    from tokenplan.client.openai import RequestFailed
    from tokenplan.runner.control import context_room

    def refused(detail: str, status: int = 400) -> RequestFailed:
        return RequestFailed("status", detail, status=status)

    # vLLM: 4,096 − 2,000 in the messages − 1 = 2,095 tokens of room for a max_tokens of 3,500 (one
    # under the sum: SGLang refuses a prompt + max_new_tokens equal to its context, `>= _max_req_len`)
    old_vllm = (
        "This model's maximum context length is 4096 tokens. However, you requested 5500 tokens "
        "(2000 in the messages, 3500 in the completion). Please reduce the length of the messages or completion."
    )
    assert context_room(refused(old_vllm), 3500) == 2095
    new_vllm = (
        "'max_tokens' or 'max_completion_tokens' is too large: 3500. This model's maximum context length "
        "is 4096 tokens and your request has 2000 input tokens (3500 > 4096 - 2000)."
    )
    assert context_room(refused(new_vllm), 3500) == 2095
    sglang = (
        "Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a "
        "total of 5500 tokens: 2000 tokens from the input messages and 3500 tokens for the completion."
    )
    assert context_room(refused(sglang), 3500) == 2095
    trtllm = (
        "The sum of prompt length (2000) and query length (0) max_tokens (3500) should not exceed max_seq_len (4096)"
    )
    assert context_room(refused(trtllm), 3500) == 2095
    # Hugging Face TGI answers it 422 (a row's refusal since 422 is one): 4,096 − 2,000 as above;
    # its rows were skipped where vLLM's were sent again with the room left (a break-it pass)
    tgi = (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
        "Given: 2000 `inputs` tokens and 3500 `max_new_tokens`"
    )
    assert context_room(refused(tgi, status=422), 3500) == 2095
    # a max_tokens past the context by itself is a setting every request carries: no refit
    assert context_room(refused(old_vllm.replace("3500 in the completion", "8192 in the completion")), 8192) is None
    # a prompt that fills the context leaves no room (4,096 − 4,100 − 1 < 1); another status or message: none
    assert context_room(refused(old_vllm.replace("2000 in the messages", "4100 in the messages")), 3500) is None
    assert context_room(refused(old_vllm, status=500), 3500) is None
    assert context_room(refused("prompt contains invalid UTF-8"), 3500) is None
