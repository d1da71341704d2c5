"""``plan --draft-model``: the one drafter checkpoint named goes with the one speculative method it
drafts for, in the searched options and in the ``--current`` setup alike."""

from __future__ import annotations

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.errors import InputError


def test_one_drafter_is_refused_for_two_drafting_methods():
    # a DFlash checkpoint named for --spec eagle3 and --spec dflash: the eagle3 launch would load it
    # as an EAGLE-3 head ('{"method":"eagle3","model":"z-lab/Qwen3-8B-DFlash-b16",…}')
    req = PlanRequest(
        model="qwen3-8b",
        gpus=("8xh100-sxm",),
        engine="vllm",
        specs=("eagle3:3", "dflash:2"),
        draft_model="z-lab/Qwen3-8B-DFlash-b16",
    )
    with pytest.raises(InputError, match=r"draft_model.*dflash and eagle3"):
        plan(req)
