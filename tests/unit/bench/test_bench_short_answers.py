"""bench says when answers come back shorter than --osl although ignore_eos was sent (a new user
measured 16-token answers for --osl 64 with no word: tok/s for a workload 4× shorter than asked)."""

from __future__ import annotations

from tokenplan.bench.result import short_answer_notes


def _level(c: int, mean_out: float) -> dict:
    return {"concurrency": c, "requests": 16, "mean_output_tokens": mean_out}


def test_levels_with_answers_under_95_percent_of_osl_are_named():
    # --osl 64: 0.95 × 64 = 60.8 tokens; 16.0 and 60.0 are short, 61.0 and 64.0 are not.
    levels = [_level(1, 16.0), _level(4, 60.0), _level(16, 61.0), _level(64, 64.0)]
    (note,) = short_answer_notes(levels, 64, ignore_eos=True)
    assert "(16.0 at concurrency 1; 60.0 at concurrency 4)" in note and "--osl 64" in note


def test_nothing_is_said_without_ignore_eos_for_a_dataset_or_when_lengths_hold():
    assert short_answer_notes([_level(1, 16.0)], 64, ignore_eos=False) == []  # the model's own lengths
    assert short_answer_notes([_level(1, 16.0)], None, ignore_eos=True) == []  # a dataset's lengths
    assert short_answer_notes([_level(1, 64.0)], 64, ignore_eos=True) == []
