"""The job-wide stop on rows no try answered (runner.unanswered): statuses and malformed answers
stop at once at the eighth row; unfinished answers ask the endpoint first."""

from __future__ import annotations

from tokenplan.client.answers import RequestFailed
from tokenplan.runner.refusals import JOB_WIDE_ROWS
from tokenplan.runner.unanswered import NoAnswerStreak, unfinished

FILTERED = RequestFailed("protocol", "finish_reason 'content_filter' does not end a complete answer")
HTML = RequestFailed("protocol", "answer is not JSON")
ERROR_500 = RequestFailed("status", "boom", status=500)


def test_eight_rows_of_a_status_stop_at_the_eighth_and_an_answer_starts_again() -> None:
    assert JOB_WIDE_ROWS == 8
    streak = NoAnswerStreak("m")
    assert [streak.failed(f"r{i}", ERROR_500) for i in range(7)] == [None] * 7
    streak.answered()  # an answer between: the seven were transient
    assert [streak.failed(f"s{i}", ERROR_500) for i in range(7)] == [None] * 7
    assert streak.failed("s6", ERROR_500) is None  # the same row twice counts once
    assert streak.failed("s7", HTML) == "stop"  # 8 distinct rows, a malformed answer among them
    assert "with an unusable answer (answer is not JSON) to every try of 8 rows" in streak.message


def test_unfinished_answers_ask_the_endpoint_once_and_stop_only_when_it_does_not_answer() -> None:
    assert unfinished(FILTERED) and not unfinished(HTML) and not unfinished(ERROR_500)
    streak = NoAnswerStreak("m")
    assert [streak.failed(f"r{i}", FILTERED) for i in range(7)] == [None] * 7
    assert streak.failed("r7", FILTERED) == "control"
    assert streak.failed("r8", FILTERED) is None  # one control out at a time
    assert streak.control_answered(True, "") is None  # answered: the rows' own; the count starts again
    assert [streak.failed(f"t{i}", FILTERED) for i in range(7)] == [None] * 7
    assert streak.failed("t7", FILTERED) == "control"
    assert streak.control_answered(None, "protocol: finish_reason 'content_filter'") == "stop"
    assert streak.message.startswith("the server gave no finished answer (finish_reason 'content_filter'")
    assert "to every try of 8 rows with no answer between, nor to a short prompt" in streak.message
