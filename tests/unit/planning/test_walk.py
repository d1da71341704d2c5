"""The walk from a current setup to the recommended one, and the assumptions that reproduce a
measurement (tokenplan.planning.walk), on evaluations whose rates are set by hand."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from tokenplan.catalog import load_engine
from tokenplan.engines.launch import MaxRunning
from tokenplan.job.evaluate import Config, Evaluation, Rejection
from tokenplan.perf.layout import Layout
from tokenplan.perf.speculative import SpecDecode
from tokenplan.planning.walk import (
    acceptance_length,
    implied_acceptance,
    implied_running_cap,
    per_position_acceptance,
    walk,
)
from tokenplan.units import Dtype

SGLANG = load_engine("sglang")
MTP3 = SpecDecode("mtp", 3, 2.95)
CURRENT = Config(Layout(tp=4), Dtype.BF16, Dtype.BF16, SGLANG, MTP3, max_running=MaxRunning(48))
TARGET = Config(Layout(tp=1, dp=4), Dtype.FP8, Dtype.FP8, SGLANG, None, max_running=MaxRunning(lifted=True))


def _ev(rate: float, batch: float = 10.0) -> SimpleNamespace:
    return SimpleNamespace(output_tok_s_total=rate, steady=SimpleNamespace(batch=batch, batch_reason="kv cache"))


def test_acceptance_length_is_the_geometric_sum_and_inverts():
    # τ(3, 0.5) = 1 + 0.5 + 0.25 + 0.125 = 1.875; τ(1, p) = 1 + p.
    assert acceptance_length(3, 0.5) == pytest.approx(1.875)
    assert per_position_acceptance(3, 1.875) == pytest.approx(0.5, abs=1e-9)
    assert per_position_acceptance(1, 1.65) == pytest.approx(0.65, abs=1e-9)
    with pytest.raises(ValueError):
        per_position_acceptance(3, 4.5)  # above k + 1 = 4


def test_walk_changes_one_field_at_a_time_in_order_and_gains_multiply():
    # Rates by configuration: start 1,000; each change multiplies by the factor below, so the
    # gains are those factors and the end is 1,000 × 1.5 × 2 × 1.25 × 1.1 × 0.8 = 3,300.
    factors = {"running": 1.5, "layout": 2.0, "weights": 1.25, "kv": 1.1, "spec": 0.8}

    def rate(c: Config) -> float:
        r = 1000.0
        r *= factors["running"] if c.max_running.requests is None else 1
        r *= factors["layout"] if c.layout.dp == 4 else 1
        r *= factors["weights"] if c.weight_dtype is Dtype.FP8 else 1
        r *= factors["kv"] if c.kv_dtype is Dtype.FP8 else 1
        r *= factors["spec"] if c.spec is None else 1
        return r

    steps = walk(CURRENT, TARGET, lambda c: _ev(rate(c)))
    assert [s.change.split(" ")[0] for s in steps] == ["start", "running", "layout", "weights", "KV", "speculative"]
    assert steps[1].change == "running cap 48 → raised"
    assert [s.gain for s in steps[1:]] == pytest.approx([1.5, 2.0, 1.25, 1.1, 0.8])
    assert steps[-1].output_tok_s_total == pytest.approx(3300.0)
    assert steps[-1].config == TARGET


def test_a_step_that_does_not_run_is_shown_and_the_next_gain_is_over_the_last_that_ran():
    # BF16 weights on TP1 do not fit (a rejection); the FP8 step after it gains over the TP4 start.
    def run(c: Config):
        if c.layout.dp == 4 and c.weight_dtype is Dtype.BF16:
            return Rejection(c, "weights do not fit", "memory")
        return _ev(2000.0 if c.layout.dp == 4 else 1000.0)

    steps = walk(replace(CURRENT, max_running=MaxRunning(lifted=True), spec=None), TARGET, run)
    assert [s.output_tok_s_total for s in steps] == [1000.0, None, 2000.0, 2000.0]
    assert steps[1].limited_by == "does not run: weights do not fit"
    assert steps[2].gain == pytest.approx(2.0)  # 2,000 over the start's 1,000


def test_walk_shows_the_prior_tau_at_the_jobs_context_and_does_not_count_it_as_a_change():
    # A τ from the prior is re-derived at the job's context by evaluate (job.deploy): the prior's
    # default 1.8 for MTP k=1 becomes 1.73 here. The current setup and the target both run MTP
    # k=1 from the prior and differ only in the running cap, so the walk is the start and one step
    # (1,000 → 1,500 tok/s, ×1.5), and no "mtp k=1 τ=1.8 → mtp k=1 τ=1.73" step with gain ×1.00.
    prior = SpecDecode("mtp", 1, 1.8, from_prior=True)
    current = replace(TARGET, spec=prior, max_running=MaxRunning())

    def run(c: Config) -> Evaluation:
        at_context = replace(c, spec=replace(c.spec, acceptance_length=1.73)) if c.spec else c
        rate = 1500.0 if c.max_running.lifted else 1000.0
        steady = SimpleNamespace(batch=10.0, batch_reason="kv cache")
        return Evaluation(at_context, None, None, steady, rate, rate / 4)  # type: ignore[arg-type]

    target = run(replace(TARGET, spec=prior)).config  # the plan's best, as evaluated
    steps = walk(current, target, run)
    assert [s.change for s in steps] == ["start", "running cap engine default → raised"]
    assert steps[0].config.spec is not None and steps[0].config.spec.acceptance_length == 1.73
    assert steps[1].gain == pytest.approx(1.5)


def test_implied_acceptance_and_running_cap_reproduce_the_measurement():
    # A memory-bound replica: rate = 1,000 tok/s per accepted token per step (τ) → 1,650 tok/s at τ = 1.65.
    tau = implied_acceptance(CURRENT, 1650.0, lambda c: _ev(1000.0 * c.spec.acceptance_length))
    assert tau == pytest.approx(1.65, abs=1e-3)
    # rate = 50 tok/s per running request: 1,000 tok/s needs a cap of 20.
    cap = implied_running_cap(CURRENT, 1000.0, lambda c: _ev(50.0 * c.max_running.requests), most=48)
    assert cap == 20
    # Above what the largest cap gives (48 × 50 = 2,400): nothing in range reproduces it.
    assert implied_running_cap(CURRENT, 3000.0, lambda c: _ev(50.0 * c.max_running.requests), most=48) is None
    assert implied_acceptance(replace(CURRENT, spec=None), 1650.0, lambda c: _ev(1.0)) is None
