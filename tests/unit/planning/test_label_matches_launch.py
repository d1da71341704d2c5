"""A configuration's label says "prefix cache off" exactly where its SGLang command writes
``--disable-radix-cache`` (a break-it pass: Llama-3.1-8B with EAGLE-3, whose lifted cap takes no
such flag on a dense model, was labelled "running cap 202, prefix cache off" beside a command
without it)."""

from __future__ import annotations

import pytest

from tokenplan.api.plan import PlanRequest, plan


@pytest.mark.parametrize(
    "request_fields",
    [
        dict(model="llama-3.1-8b", gpus=("8xh100-sxm",), specs=("eagle3",)),  # dense: no flag, no words
        dict(model="qwen3.6-27b", gpus=("8xb200",), specs=("none",), max_running=300),  # hybrid: both
    ],
    ids=["dense-eagle3", "hybrid-fixed-cap"],
)
def test_prefix_cache_off_is_said_where_the_command_turns_it_off(request_fields):
    option = plan(PlanRequest(**request_fields)).to_json()["options"][0]
    command = option["launch"]["sglang"]
    assert ("prefix cache off" in option["best"]) == ("--disable-radix-cache" in command)
    assert ("--disable-radix-cache" in command) == request_fields["model"].startswith("qwen3.6")
