"""A synchronised wave's prefill steps (``job.prefill_wait.wave_steps_mean``), counted without numpy
since issue 30."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplan.job.prefill_wait import wave_steps_mean


@settings(max_examples=300, deadline=None)
@given(
    batch=st.floats(0.0, 5000.0),
    isl=st.floats(1.0, 50_000.0),
    step=st.sampled_from([256, 512, 1000, 2048, 8192, 16384, 32768]),
)
def test_wave_steps_mean_counts_every_prompt(batch: float, isl: float, step: int) -> None:
    """Issue 30 counts a wave's prefill steps by runs of equal steps (no numpy); the result is the
    per-prompt definition summed prompt by prompt: prompt i ends in step k_i = ⌈i·ISL/step − 10⁻⁹⌉."""
    n = max(1, round(batch))
    ends = [math.ceil(i * (isl / step) - 1e-9) for i in range(1, n + 1)]
    expected = (sum(ends) / n - 1.0, ends.count(ends[-1]) / n, n * isl - (ends[-1] - 1.0) * step)
    assert wave_steps_mean(batch, isl, step) == expected


def test_wave_steps_mean_by_hand() -> None:
    """Ten 1,000-token prompts in 4,096-token steps: prompts 1–4 end in step 1 (4,000 tokens),
    5–8 in step 2 (8,000 ≤ 8,192), 9–10 in step 3; mean (4·1 + 4·2 + 2·3)/10 − 1 = 0.8 full steps
    before, 2 of 10 end in the last step, which holds 10,000 − 2·4,096 = 1,808 tokens."""
    assert wave_steps_mean(10, 1000.0, 4096) == (0.8, 0.2, 1808.0)
