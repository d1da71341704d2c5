"""Provisioning: the fewest GPUs (whole rental units) that meet a deadline and a budget.

The search is driven by a job whose throughput is exactly linear in the GPU count, so every
expected figure is derived by hand below.
"""

from __future__ import annotations

import math

import pytest

from tokenplan.planning.provision import Outcome, Target, fewest_gpus

OUTPUT_TOKENS = 2.285e9  # 914,000 answers × 2,500 tokens
DAY_S = 86_400.0


def linear_job(tok_s_per_gpu: float, usd_per_gpu_hour: float, target: Target, calls: list[int]):
    """The job at n GPUs: OUTPUT_TOKENS / (n × tok_s_per_gpu) seconds, n × hours × price dollars."""

    def at(n: int) -> Outcome:
        calls.append(n)
        wall_s = OUTPUT_TOKENS / (n * tok_s_per_gpu)
        usd = n * wall_s / 3600 * usd_per_gpu_hour
        return Outcome(n, wall_s, usd, target.met_by(wall_s, usd))

    return at


def test_hgx_board_rounds_up_to_a_whole_node():
    # 7,000 tok/s per GPU: one day needs n ≥ 2.285e9 / (7,000 × 86,400) = 3.778 GPUs → one
    # 8-GPU node. At 8 GPUs: 2.285e9 / 56,000 = 40,803.6 s = 0.47226 days;
    # $ = 8 × 40,803.6 s / 3,600 × $5.25 = 8 × 11.3343 h × 5.25 = $476.04.
    calls: list[int] = []
    target = Target(deadline_s=DAY_S)
    p = fewest_gpus(linear_job(7_000, 5.25, target, calls), unit_gpus=8, max_gpus=512)
    assert p.chosen is not None and p.chosen.gpus == 8
    assert p.chosen.wall_s / DAY_S == pytest.approx(0.47226, rel=1e-4)
    assert p.chosen.usd == pytest.approx(476.04, rel=1e-4)
    assert calls == [8]


def test_pcie_cards_count_one_by_one():
    # 2,600 tok/s per GPU: n ≥ 2.285e9 / (2,600 × 86,400) = 2.285e9 / 2.2464e8 = 10.172 → 11 GPUs.
    # Search: doubling 1, 2, 4, 8 (miss), 16 (meets); bisection 12 (meets), 10 (miss), 11 (meets).
    # At 11: 2.285e9 / 28,600 = 79,895.1 s = 0.92471 days; $ = 11 × 22.1931 h × $0.89 = $217.27.
    calls: list[int] = []
    target = Target(deadline_s=DAY_S)
    p = fewest_gpus(linear_job(2_600, 0.89, target, calls), unit_gpus=1, max_gpus=64)
    assert p.chosen is not None and p.chosen.gpus == 11
    assert p.chosen.wall_s / DAY_S == pytest.approx(0.92471, rel=1e-4)
    assert p.chosen.usd == pytest.approx(217.27, rel=1e-4)
    assert calls == [1, 2, 4, 8, 16, 12, 10, 11]
    assert [o.gpus for o in p.tried] == sorted(calls)


def test_budget_that_the_deadline_count_exceeds_is_refused_with_the_closest_count():
    # Same job: 11 GPUs meet the day but cost $217.27 (> $200). Cost is the same $217.27 at any
    # count (GPU-hours are constant: 2.285e9 / 2,600 s = 244.1 GPU-hours × $0.89), so no count
    # meets both; the answer names the largest count tried (64 GPUs: 2.285e9 / 166,400 s =
    # 0.15894 days) and its cost.
    calls: list[int] = []
    target = Target(deadline_s=DAY_S, budget_usd=200)
    p = fewest_gpus(linear_job(2_600, 0.89, target, calls), unit_gpus=1, max_gpus=64)
    assert p.chosen is None and p.closest is not None and p.closest.gpus == 64
    assert p.closest.wall_s / DAY_S == pytest.approx(0.15894, rel=1e-4)
    assert "no count up to 64 GPUs meets the target" in p.why and "$217" in p.why
    assert calls == [1, 2, 4, 8, 16, 32, 64]


def test_budget_alone_takes_the_fewest_units_that_run():
    # $250 ≥ $217.27 at every count: the fewest is one 8-GPU node.
    p = fewest_gpus(linear_job(2_600, 0.89, Target(budget_usd=250), []), unit_gpus=8, max_gpus=64)
    assert p.chosen is not None and p.chosen.gpus == 8


def test_unknown_price_never_meets_a_budget_and_a_model_that_never_runs_says_so():
    assert not Target(budget_usd=1e9).met_by(1.0, None)
    assert Target(deadline_s=10).met_by(10.0, None)
    p = fewest_gpus(lambda n: Outcome(n, None, None, False), unit_gpus=4, max_gpus=16)
    assert p.chosen is None and p.closest is None
    assert p.why == "no configuration runs on up to 16 GPUs"
    assert [o.gpus for o in p.tried] == [4, 8, 16]


@pytest.mark.parametrize("tok_s", [900.0, 2_600.0, 7_000.0, 31_000.0])
def test_fewest_count_is_the_ceiling_of_the_hand_formula(tok_s):
    # n* = ceil(OUTPUT_TOKENS / (tok_s × deadline)) rounded up to whole units of 4.
    target = Target(deadline_s=2 * DAY_S)
    p = fewest_gpus(linear_job(tok_s, 1.0, target, []), unit_gpus=4, max_gpus=4096)
    expected = 4 * math.ceil(math.ceil(OUTPUT_TOKENS / (tok_s * 2 * DAY_S)) / 4)
    assert p.chosen is not None and p.chosen.gpus == expected
