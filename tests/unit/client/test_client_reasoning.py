"""Reasoning text from each engine's field, or from <think> tags in the content."""

from tokenplan.client.reasoning import split_reasoning


def test_sglang_reasoning_content_field_is_used() -> None:
    assert split_reasoning({"content": "42", "reasoning_content": "think"}) == ("42", "think")


def test_vllm_reasoning_field_is_used() -> None:
    assert split_reasoning({"content": "42", "reasoning": "think"}) == ("42", "think")


def test_think_tags_inside_content_are_split_out() -> None:
    assert split_reasoning({"content": "<think>\nstep 1\n</think>\n\nThe answer"}) == ("The answer", "step 1")


def test_a_closing_tag_alone_means_the_template_opened_the_thinking() -> None:
    assert split_reasoning({"content": "step 1</think>answer"}) == ("answer", "step 1")


def test_thinking_cut_off_without_a_closing_tag_stays_in_content() -> None:
    # vLLM #35221: a length finish inside the thinking; the finish_reason flags it, not the split.
    assert split_reasoning({"content": "<think>half a thou"}) == ("<think>half a thou", None)


def test_no_reasoning_at_all_is_none() -> None:
    assert split_reasoning({"content": "plain", "reasoning_content": None}) == ("plain", None)
