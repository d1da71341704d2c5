"""From the setup a team runs to the one the plan recommends, one change at a time.

A team that measured its own setup (say SGLang, TP4, BF16, MTP k=3, SGLang's default cap of 48
running requests on 4× RTX PRO 6000: ~1,600 tok/s) wants two answers before renting: does the
model reproduce what they measured, and what each change toward the recommended setup buys.

- :func:`walk` changes the current configuration into the recommended one field by field, in the
  order a team would try them on the GPUs it has (the running cap, the layout, the weight format,
  the KV-cache format, speculative decoding, the engine), and evaluates each intermediate
  configuration: a waterfall of steady-state tok/s.
- :func:`implied_acceptance` and :func:`implied_running_cap` find the value of one assumption
  that makes the prediction match a measurement, by bisection on a model that is monotone in it
  (more accepted tokens per step or a larger batch never lowers a memory-bound replica's rate;
  where the model is not monotone the bracket's end is reported as not closing the gap).
- :func:`per_position_acceptance` turns a measured τ at k draft tokens into the per-position
  acceptance p of the geometric model τ(k, p) = (1 − p^(k+1)) / (1 − p) (Leviathan et al. 2023,
  arXiv:2211.17192 §3.1), which carries to other k and other GPUs: acceptance is a property of
  the model and the data, not of the hardware.

Everything here takes values and an ``evaluate`` callable; nothing reads a catalog or a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tokenplan.engines.launch import MaxRunning
from tokenplan.job.evaluate import Config, Evaluation, Rejection
from tokenplan.perf.speculative import SpecDecode

Evaluate = Callable[[Config], "Evaluation | Rejection"]


@dataclass(frozen=True, slots=True)
class WalkStep:
    """One configuration on the way from the current setup to the recommended one.

    Attributes:
        change: what this step changed (``"start"`` for the current setup), e.g.
            ``"layout TP4 → TP1×DP4"``.
        config: the configuration after the change.
        output_tok_s_total: its steady-state output tokens/s over all replicas (None when it
            does not run).
        gain: ``output_tok_s_total`` ÷ the previous step's (None when either does not run).
        batch_per_replica: running requests per replica (None when it does not run).
        limited_by: what caps that batch, or why the configuration does not run.
    """

    change: str
    config: Config
    output_tok_s_total: float | None
    gain: float | None
    batch_per_replica: float | None
    limited_by: str


def _spec_text(c: Config) -> str:
    return c.spec.describe() if c.spec is not None else "no speculation"


# (what changes, how it is described, how the target's value is copied into a configuration)
_FIELDS: tuple[tuple[str, Callable[[Config], str], Callable[[Config, Config], Config]], ...] = (
    ("engine", lambda c: c.engine.name, lambda c, t: replace(c, engine=t.engine)),
    ("running cap", lambda c: c.max_running.describe(), lambda c, t: replace(c, max_running=t.max_running)),
    ("layout", lambda c: c.layout.describe(), lambda c, t: replace(c, layout=t.layout)),
    ("weights", lambda c: c.weight_dtype.value, lambda c, t: replace(c, weight_dtype=t.weight_dtype)),
    ("KV cache", lambda c: c.kv_dtype.value, lambda c, t: replace(c, kv_dtype=t.kv_dtype)),
    ("speculative decoding", _spec_text, lambda c, t: replace(c, spec=t.spec)),
    (
        "memory fraction",
        lambda c: "engine default" if c.memory_fraction is None else f"{c.memory_fraction:g}",
        lambda c, t: replace(c, memory_fraction=t.memory_fraction),
    ),
)


def _step(change: str, config: Config, result: Evaluation | Rejection, before: float | None) -> WalkStep:
    if isinstance(result, Rejection):
        return WalkStep(change, config, None, None, None, f"does not run: {result.reason}")
    rate = result.output_tok_s_total
    gain = rate / before if before else None
    return WalkStep(change, config, rate, gain, result.steady.batch, result.steady.batch_reason)


def walk(current: Config, target: Config, evaluate: Evaluate) -> list[WalkStep]:
    """The waterfall from ``current`` to ``target``: the start, then one step per field that
    differs, in the order of :data:`_FIELDS`.

    Args:
        current: the configuration the team runs.
        target: the recommended configuration (same GPUs).
        evaluate: a configuration → its evaluation (steady state) or rejection.

    Returns:
        list[WalkStep]: the start and each change; the last step's configuration equals
        ``target`` in every field of :data:`_FIELDS`. Raises nothing of its own.
    """
    first = evaluate(current)
    # walk on as evaluated: a τ from the prior is the one at the job's context (job.deploy), so a
    # step neither shows the prior's default τ nor counts the re-derived τ as a change
    config = _evaluated(current, first)
    steps = [_step("start", config, first, None)]
    for name, show, copy in _FIELDS:
        if show(config) == show(target) and copy(config, target) == config:
            continue
        moved = copy(config, target)
        result = evaluate(moved)
        moved = _evaluated(moved, result)
        before = next((s.output_tok_s_total for s in reversed(steps) if s.output_tok_s_total), None)
        steps.append(_step(f"{name} {show(config)} → {show(moved)}", moved, result, before))
        config = moved
    return steps


def _evaluated(config: Config, result: Evaluation | Rejection) -> Config:
    """The configuration as ``result`` evaluated it (its τ re-derived at the job's context where it
    comes from the prior), or ``config`` where it does not run."""
    return result.config if isinstance(result, Evaluation) else config


def _rate(evaluate: Evaluate, config: Config) -> float | None:
    result = evaluate(config)
    return None if isinstance(result, Rejection) else result.output_tok_s_total


def _bisect(
    rate_at: Callable[[float], float | None], lo: float, hi: float, measured: float, integer: bool, rounds: int = 40
) -> float | None:
    """The x in [lo, hi] where ``rate_at(x)`` crosses ``measured`` (rate increasing in x), or
    None when the bracket does not contain the crossing or an end does not run."""
    r_lo, r_hi = rate_at(lo), rate_at(hi)
    if r_lo is None or r_hi is None or not r_lo <= measured <= r_hi:
        return None
    for _ in range(rounds):
        if (hi - lo) <= (1 if integer else 1e-4):
            break
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        r = rate_at(mid)
        if r is None:
            return None
        if r < measured:
            lo = mid
        else:
            hi = mid
    return hi if integer else (lo + hi) / 2


def implied_acceptance(config: Config, measured_tok_s: float, evaluate: Evaluate) -> float | None:
    """The acceptance length τ (tokens per verification step, in [1, k + 1]) at which the
    configuration's predicted rate equals ``measured_tok_s`` (tokens/s, all replicas), or None
    when it speculates not, or no τ in that range reaches the measurement."""
    spec = config.spec
    if spec is None:
        return None

    def at(tau: float) -> float | None:
        return _rate(evaluate, replace(config, spec=replace(spec, acceptance_length=tau, from_prior=False)))

    return _bisect(at, 1.0, spec.draft_tokens + 1.0, measured_tok_s, integer=False)


def implied_running_cap(config: Config, measured_tok_s: float, evaluate: Evaluate, most: int) -> int | None:
    """The running-request cap per replica (1 … ``most``) at which the configuration's
    predicted rate first reaches ``measured_tok_s`` (tokens/s, all replicas), or None when no
    cap in that range does (the measurement is above what the configuration gives uncapped, or
    even one request a replica is faster)."""

    def at(cap: float) -> float | None:
        return _rate(evaluate, replace(config, max_running=MaxRunning(int(cap))))

    found = _bisect(at, 1, max(1, most), measured_tok_s, integer=True)
    return None if found is None else int(found)


def acceptance_length(draft_tokens: int, p: float) -> float:
    """τ(k, p) = 1 + p + … + p^k: expected tokens per verification step when each draft position
    is accepted with probability p given the one before (Leviathan et al. 2023, §3.1)."""
    return float(sum(p**i for i in range(draft_tokens + 1)))


def per_position_acceptance(draft_tokens: int, tau: float) -> float:
    """The p in [0, 1] with τ(k, p) = ``tau`` (bisection; τ is increasing in p).

    Raises:
        ValueError: ``tau`` outside [1, k + 1].
    """
    if not 1.0 <= tau <= draft_tokens + 1:
        raise ValueError(f"τ {tau} is outside [1, {draft_tokens + 1}]")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if acceptance_length(draft_tokens, mid) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def with_acceptance(spec: SpecDecode, p: float) -> SpecDecode:
    """``spec`` with τ from the per-position acceptance ``p`` at its own k (a measured value,
    not a prior)."""
    return replace(spec, acceptance_length=acceptance_length(spec.draft_tokens, p), from_prior=False)
