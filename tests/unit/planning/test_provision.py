"""Provisioning: the fewest GPUs (whole rental units) that meet a deadline and a budget.

The search is driven by a job whose throughput is exactly linear in the GPU count, so every
expected figure is derived by hand below.
"""

from __future__ import annotations

import math

import pytest

from tokenplan.planning.provision import Outcome, Target, fewest_gpus, provision, soonest_within_budget

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
    # Same job: 11 GPUs meet the day (search as above) but cost $217.27 (> $200). Cost is the same
    # $217.27 at any count (GPU-hours are constant: 2.285e9 / 2,600 s = 244.1 GPU-hours × $0.89),
    # so no larger count meets both; the answer is the deadline's count and its cost.
    calls: list[int] = []
    target = Target(deadline_s=DAY_S, budget_usd=200)
    p = fewest_gpus(linear_job(2_600, 0.89, target, calls), unit_gpus=1, max_gpus=64, target=target)
    assert p.chosen is None and p.closest is not None and p.closest.gpus == 11
    assert p.why == (
        "the fewest GPUs that meet the deadline, 11, take 0.92 days at $217, over the $200 budget, "
        "and more GPUs cost at least as much"
    )
    assert calls == [1, 2, 4, 8, 16, 12, 10, 11]


def test_deadline_and_budget_met_between_two_doublings():
    # A one-hour drain tail makes the cost rise with the count: (244.124 + n) × $0.89. A 1-day
    # deadline needs 878,846.2 / n + 3,600 ≤ 86,400 → n ≥ 10.61 → 11 GPUs ($227.06); $230 allows
    # n ≤ 14. Doubling alone would jump from 8 (too slow) to 16 ($231.51, over) and miss 11.
    target = Target(deadline_s=DAY_S, budget_usd=230)
    p = fewest_gpus(tailed_job(2_600, 0.89, 3_600, target, []), unit_gpus=1, max_gpus=64, target=target)
    assert p.chosen is not None and p.chosen.gpus == 11
    assert p.chosen.usd == pytest.approx(227.06, rel=1e-4)


def test_fewest_gpus_with_a_budget_alone_takes_the_fewest_units_that_run():
    # $250 ≥ $217.27 at every count: the fewest is one 8-GPU node (what fewest_gpus answers; the
    # plan asks soonest_within_budget for a budget alone, below).
    p = fewest_gpus(linear_job(2_600, 0.89, Target(budget_usd=250), []), unit_gpus=8, max_gpus=64)
    assert p.chosen is not None and p.chosen.gpus == 8


def tailed_job(tok_s_per_gpu: float, usd_per_gpu_hour: float, tail_s: float, target: Target, calls: list[int]):
    """The job at n GPUs with a drain tail: OUTPUT_TOKENS / (n × tok_s_per_gpu) + tail_s seconds,
    n × hours × price dollars (each GPU pays for the tail, so the cost rises with n)."""

    def at(n: int) -> Outcome:
        calls.append(n)
        wall_s = OUTPUT_TOKENS / (n * tok_s_per_gpu) + tail_s
        usd = n * wall_s / 3600 * usd_per_gpu_hour
        return Outcome(n, wall_s, usd, target.met_by(wall_s, usd))

    return at


def test_budget_alone_takes_the_count_that_finishes_soonest_within_it():
    # 2,600 tok/s per GPU at $0.89/GPU-h and a one-hour tail: cost(n) = (2.285e9 / 2,600 / 3,600
    # + n) GPU-h × $0.89 = (244.124 + n) × 0.89. Within $230: n ≤ 230 / 0.89 − 244.124 =
    # 258.427 − 244.124 = 14.30 → 14 GPUs. At 14: 878,846.2 s / 14 + 3,600 s = 66,374.7 s =
    # 0.76823 days; $ = 258.124 × 0.89 = $229.73. At 15: 259.124 × 0.89 = $230.62 > $230.
    # Search: doubling 1, 2, 4, 8 (within), 16 (over: $231.51); bisection 12 (within), 14 (within), 15 (over).
    calls: list[int] = []
    target = Target(budget_usd=230)
    p = soonest_within_budget(tailed_job(2_600, 0.89, 3_600, target, calls), unit_gpus=1, max_gpus=64, target=target)
    assert p.chosen is not None and p.chosen.gpus == 14
    assert p.chosen.wall_s / DAY_S == pytest.approx(0.76823, rel=1e-4)
    assert p.chosen.usd == pytest.approx(229.73, rel=1e-4)
    assert calls == [1, 2, 4, 8, 16, 12, 14, 15]


def test_budget_alone_that_every_count_meets_takes_the_most_gpus():
    # Without a tail the cost is $217.27 at every count (test above), within $250: the soonest is
    # the most GPUs searched, 64 (2.285e9 / (64 × 2,600) = 13,732 s).
    target = Target(budget_usd=250)
    p = soonest_within_budget(linear_job(2_600, 0.89, target, []), unit_gpus=1, max_gpus=64, target=target)
    assert p.chosen is not None and p.chosen.gpus == 64
    assert p.chosen.wall_s == pytest.approx(2.285e9 / (64 * 2_600))


def test_budget_alone_that_one_unit_exceeds_says_more_gpus_cannot_help():
    # One 8-GPU node with the one-hour tail: (244.124 + 8) × 0.89 = $224.39 > $220.
    target = Target(budget_usd=220)
    p = soonest_within_budget(tailed_job(2_600, 0.89, 3_600, target, []), unit_gpus=8, max_gpus=64, target=target)
    assert p.chosen is None and p.closest is not None and p.closest.gpus == 8
    assert "more GPUs cost at least as much" in p.why


def test_provision_takes_the_soonest_count_for_a_budget_alone_and_the_fewest_with_a_deadline():
    # The tailed job above as a search result per count (one candidate, as the planner's
    # OptionResult holds it). With $230 alone: 14 GPUs (above). With a 1-day deadline as well,
    # the fewest that meet both: 878,846.2 / n + 3,600 ≤ 86,400 → n ≥ 878,846.2 / 82,800 = 10.61
    # → 11 GPUs, costing (244.124 + 11) × 0.89 = $227.06 ≤ $230.
    from types import SimpleNamespace

    def search_at(n: int) -> object:
        wall_s = OUTPUT_TOKENS / (n * 2_600) + 3_600
        usd = n * wall_s / 3600 * 0.89
        c = SimpleNamespace(wall_s=wall_s, ranking_wall_s=wall_s, ranking_usd=usd, cost=SimpleNamespace(usd=usd))
        return SimpleNamespace(ranked=[c], best=c)

    alone = provision(search_at, Target(budget_usd=230), unit_gpus=1, max_gpus=64)
    both = provision(search_at, Target(deadline_s=DAY_S, budget_usd=230), unit_gpus=1, max_gpus=64)
    assert alone.chosen is not None and alone.chosen.gpus == 14
    assert both.chosen is not None and both.chosen.gpus == 11
    assert both.chosen.usd == pytest.approx(227.06, rel=1e-4)


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


def test_an_odd_count_that_is_slower_does_not_hide_a_smaller_even_one():
    # Layouts take TP and PP in powers of two, so an odd count runs TP1 only: here an even n takes
    # 3,400 / n s and an odd n twice that, 6,800 / n s. A 100 s deadline: 32 → 106.25 s (miss),
    # 33 → 206.1 s (miss), 34 → 100 s (met), 45 → 151.1 s (miss). With at most 45 GPUs the search
    # went 1 … 32, then 45 (miss) and said no count up to 45 meets it; it now goes 32, then the
    # roundest counts up to 45: 40 (85 s, met), then bisects 36 (94.4 s, met), 34 (met), 33 (miss).
    calls: list[int] = []
    target = Target(deadline_s=100.0)

    def at(n: int) -> Outcome:
        calls.append(n)
        wall_s = (3_400.0 if n % 2 == 0 else 6_800.0) / n
        return Outcome(n, wall_s, None, target.met_by(wall_s, None))

    p = fewest_gpus(at, unit_gpus=1, max_gpus=45, target=target)
    assert p.chosen is not None and p.chosen.gpus == 34 and p.chosen.wall_s == pytest.approx(100.0)
    assert calls == [1, 2, 4, 8, 16, 32, 40, 36, 34, 33]


def test_a_budget_on_a_gpu_without_a_price_says_to_pass_one():
    # 8-GPU units, 7,000 tok/s per GPU, no price: 8 GPUs take 2.285e9 / 56,000 = 40,803.6 s =
    # 0.47226 days → "0.47 days". With a budget alone the first unit cannot be priced; with a
    # 1-day deadline as well, 8 GPUs meet the deadline and the budget cannot be checked. Neither
    # says "no count up to 512 GPUs meets" or "at no public price …, and more GPUs cost at least as much".
    def at(n: int) -> Outcome:
        wall_s = OUTPUT_TOKENS / (n * 7_000)
        return Outcome(n, wall_s, None, target.met_by(wall_s, None))

    target = Target(budget_usd=100.0)
    alone = soonest_within_budget(at, unit_gpus=8, max_gpus=512, target=target)
    assert alone.chosen is None
    assert alone.why == "8 GPUs take 0.47 days; no public price to check the budget against: pass --price GPU=USD"
    target = Target(deadline_s=DAY_S, budget_usd=100.0)
    both = fewest_gpus(at, unit_gpus=8, max_gpus=512, target=target)
    assert both.chosen is None and both.why == (
        "the fewest GPUs that meet the deadline, 8, take 0.47 days; "
        "no public price to check the budget against: pass --price GPU=USD"
    )
