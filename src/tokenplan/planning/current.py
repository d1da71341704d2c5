"""``plan --current … --measured-tok-s N``: the setup a team runs now, checked against what it
measured, and the walk from it to the plan's recommended setup on the same GPUs
(:mod:`tokenplan.planning.walk` does the walking). The setup arrives resolved
(:class:`Current`: :func:`parse_current` reads ``--current``, a comma-separated list of
``key=value`` as the engines' own flags would say it, ``engine=sglang,tp=4,spec=mtp:3,max-running=48``,
and ``tokenplan.api.plan`` looks its names up once).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.launch import MaxRunning
from tokenplan.errors import InputError
from tokenplan.hardware import Gpu
from tokenplan.job.evaluate import Config, Evaluation, Rejection, evaluate
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.perf.speculative import parse_spec
from tokenplan.planning.answer import PREDICT_FIGURES, BandsOf
from tokenplan.planning.results import CurrentSetup, PlanResult, WalkRow
from tokenplan.planning.search import Job, OptionResult
from tokenplan.planning.walk import (
    acceptance_length,
    implied_acceptance,
    implied_running_cap,
    per_position_acceptance,
    walk,
)
from tokenplan.units import count_text

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}

# A measured rate past these multiples of the prediction is past every rate band the planner
# states (catalog/error_bands.json: the widest reach e^0.45 = 1.6× above and e^−1.63 = 0.20×
# below a prediction): more likely a unit slip (per GPU for all GPUs, prompt + output tokens for
# output tokens) than a faster or slower engine.
UNIT_SLIP_ABOVE, UNIT_SLIP_BELOW = 3.0, 0.2


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE | _FALSE:
        return low in _TRUE
    raise ValueError(text)


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


# --current key → (the request field it sets, parser, what is allowed)
_KEYS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "engine": ("engine", str, "sglang, vllm or trtllm"),
    "tp": ("tp", _count, "an integer ≥ 1"),
    "pp": ("pp", _count, "an integer ≥ 1"),
    "ep": ("ep", _count, "an integer ≥ 1"),
    "attention-dp": ("attention_dp", _bool, "true or false (yes/no, on/off, 1/0)"),
    "weight-dtype": ("weight_dtype", str, "a weight format, e.g. bf16, fp8"),
    "kv-dtype": ("kv_dtype", str, "a KV-cache format, e.g. bf16, fp8, auto"),
    "spec": ("spec", str, "none or METHOD:K[:TAU], e.g. mtp:3"),
    "max-running": ("max_running", _count, "an integer ≥ 1 (running requests per replica)"),
    "memory-fraction": ("memory_fraction", _fraction, "a share of GPU memory in (0, 1]"),
    "disable-radix-cache": ("disable_radix_cache", _bool, "true or false (yes/no, on/off, 1/0)"),
}


def _entry_key(entry: str) -> str:
    """The key of a ``--current`` entry as :data:`_KEYS` spells it (``Max_Running=64`` → ``max-running``)."""
    return entry.partition("=")[0].strip().lower().replace("_", "-")


def current_entry(text: str, field: str) -> str | None:
    """The entry of ``--current`` (as typed, e.g. ``disable-radix-cache=true``) that sets the
    request field ``field`` (``disable_radix_cache``), or None where none does: an error the
    request's checks raise on it then names the entry the user wrote, not the field."""
    for entry in text.split(","):
        key = _entry_key(entry)
        if key in _KEYS and _KEYS[key][0] == field:
            return entry.strip()
    return None


def parse_current(text: str) -> dict[str, object]:
    """``--current`` (``engine=sglang,tp=4,…``, keys as the engines' own flags) → the fields of
    ``tokenplan.api.resolve.PredictRequest`` it sets, by keyword.

    Raises:
        InputError: an entry that is not ``key=value``, an unknown key (the allowed ones are
            listed), a key given twice or a value its key does not allow.
    """
    fields: dict[str, object] = {}
    for entry in (e for e in text.split(",") if e.strip()):
        _, sep, value = entry.partition("=")
        key = _entry_key(entry)
        if not sep or not value.strip():
            raise InputError("current", entry.strip(), "KEY=VALUE entries separated by commas, e.g. engine=sglang,tp=4")
        if key not in _KEYS:
            raise InputError("current", key, sorted(_KEYS))
        name, parse, allowed = _KEYS[key]
        if name in fields:  # tp=4,tp=8: which one runs now is not for tokenplan to guess
            raise InputError("current", key, "each key once (it is given twice)")
        try:
            fields[name] = parse(value.strip())
        except ValueError:
            # the entry as typed, under the option it came in (--current tp=0), and what its key takes
            raise InputError("current", entry.strip(), f"{key} {allowed}") from None
    if not fields:
        raise InputError("current", text, "KEY=VALUE entries separated by commas, e.g. engine=sglang,tp=4")
    return fields


@dataclass(frozen=True)
class Current:
    """The setup run now on the plan's first option, resolved: ``--current`` as typed, the output
    tokens/s measured on it (all GPUs; None = not measured), its configuration, the model's spec
    and the GPU."""

    text: str
    measured_tok_s: float | None
    config: Config
    model: ModelSpec
    gpu: Gpu


def current_setup(cur: Current, table: EfficiencyTable, job: Job, result: OptionResult, bands: BandsOf) -> CurrentSetup:
    """Predict the current setup on the option of ``result`` (its GPUs), set it beside the
    measurement (tokens/s over all GPUs), say which assumption would close a gap beyond the
    80 % band (``bands``), and walk to the option's recommended configuration (``result.best``).

    Raises:
        InputError: the setup does not run on the option's GPUs.
    """
    key, count = result.option.gpu.key, result.option.count
    config, text, measured_tok_s = cur.config, cur.text, cur.measured_tok_s
    eff = table.resolve(config.engine.name, cur.gpu.architecture)

    def run(c: Config) -> Evaluation | Rejection:
        e = eff if c.engine.name == config.engine.name else table.resolve(c.engine.name, cur.gpu.architecture)
        return evaluate(cur.model, cur.gpu, c, e, job.isl, job.osl, None)

    now = run(config)
    if isinstance(now, Rejection):
        raise InputError("current", text, f"a setup that runs on {count}× {key} ({now.reason})")
    target = result.best.evaluation.config if result.best is not None else config
    tau = p = None
    cap = None
    start = config
    if measured_tok_s is not None:
        tau = implied_acceptance(config, measured_tok_s, run)
        if tau is not None and config.spec is not None:
            p = per_position_acceptance(config.spec.draft_tokens, tau)
            # walk from the setup at the acceptance its measurement implies, as the plan is searched
            # τ to 3 decimals, as a --spec mtp:3:1.773 would state it
            start = replace(config, spec=replace(config.spec, acceptance_length=round(tau, 3), from_prior=False))
        cap = implied_running_cap(config, measured_tok_s, run, max(1, math.ceil(now.steady.batch)))
        if start is config and cap is not None:
            # no acceptance explains it: walk from the setup at the running cap that reproduces it
            start = replace(config, max_running=MaxRunning(cap))
    steps = walk(start, target, run)
    rows = tuple(
        WalkRow(s.change, s.config.layout.describe(), s.output_tok_s_total, s.gain, s.batch_per_replica, s.limited_by)
        for s in steps
    )
    band = bands(_Rate(now.output_tok_s_total), now, {"output_tok_s_total": PREDICT_FIGURES["output_tok_s_total"]})
    interval = band.intervals.get("output_tok_s_total") if band else None
    inside = None if measured_tok_s is None or interval is None else interval.low <= measured_tok_s <= interval.high
    return CurrentSetup(
        description=text,
        option=f"{count}× {key}",
        configuration=_describe(now.config),  # τ at the job's context, as predict shows it
        predicted_tok_s=now.output_tok_s_total,
        predicted_low_tok_s=interval.low if interval else None,
        predicted_high_tok_s=interval.high if interval else None,
        measured_tok_s=measured_tok_s,
        measured_inside_band=inside,
        implied_tau=tau,
        implied_acceptance_per_position=p,
        implied_running_cap=cap,
        batch_per_replica=now.steady.batch,
        batch_limit_reason=now.steady.batch_reason,
        walk=rows,
    )


@dataclass(frozen=True)
class _Rate:
    output_tok_s_total: float


def _describe(c: Config) -> str:
    spec = c.spec.describe() if c.spec else "no speculation"
    if c.max_running.requests is not None:
        cap = f"max-running {c.max_running.requests}"
    else:
        cap = "cap raised" if c.max_running.lifted else "default cap"
    return (
        f"{c.engine.name} {c.layout.describe()}, {c.weight_dtype.value} weights, {c.kv_dtype.value} KV, {spec}, {cap}"
    )


def current_sentences(cur: CurrentSetup, specs: tuple[str, ...] | None = None) -> list[str]:
    """The plan's answer lines for ``--current``: the prediction beside the measurement, the
    assumption that would reproduce it, the walk's total gain, and — where the measurement
    implies an acceptance — the speculative settings the plan was searched with at it
    (``specs``)."""
    lines = []
    band = (
        f" (80 %: {cur.predicted_low_tok_s:,.0f}–{cur.predicted_high_tok_s:,.0f})"
        if cur.predicted_low_tok_s is not None
        else ""
    )
    head = f"Your setup on {cur.option} ({cur.configuration}): predicted {cur.predicted_tok_s:,.0f} tok/s{band}"
    if cur.measured_tok_s is None:
        lines.append(head + ".")
    else:
        ratio = cur.measured_tok_s / cur.predicted_tok_s
        where = "inside" if cur.measured_inside_band else ("outside" if cur.measured_inside_band is False else "beside")
        slip = (
            " So far from it, check the figure's unit: --measured-tok-s is output tokens per second"
            " over all the setup's GPUs (not per GPU, not prompt + output)."
            if not UNIT_SLIP_BELOW < ratio < UNIT_SLIP_ABOVE
            else ""
        )
        lines.append(
            f"{head}; measured {cur.measured_tok_s:,.0f} tok/s ({ratio:.2f}× the prediction, {where} the band).{slip}"
        )
        if cur.measured_tok_s is not None:
            closes = []
            if cur.implied_tau is not None:
                closes.append(
                    f"an acceptance length τ = {cur.implied_tau:.2f} (per draft position p = "
                    f"{cur.implied_acceptance_per_position:.2f})"
                )
            if cur.implied_running_cap is not None:
                closes.append(
                    f"a running cap of {cur.implied_running_cap} per replica (the plan assumed "
                    f"{cur.batch_per_replica:.0f}, {cur.batch_limit_reason})"
                )
            lines.append(
                "What reproduces the measurement: "
                + (
                    "; or ".join(closes)
                    if closes
                    else "no single τ or running cap does; check the GPU variant, the engine version and the lengths"
                )
                + "."
            )
    rates = [r.output_tok_s_total for r in cur.walk if r.output_tok_s_total]
    last = cur.walk[-1].output_tok_s_total
    if len(cur.walk) > 1 and rates and rates[0] and last:
        # a walk from the setup that reproduces the measurement starts from the measurement itself
        reproduced = cur.measured_tok_s is not None and (
            cur.implied_tau is not None or cur.implied_running_cap is not None
        )
        first = cur.measured_tok_s if reproduced and cur.measured_tok_s else rates[0]
        lines.append(
            f"From your setup to the recommended one on {cur.option}: {count_text(len(cur.walk) - 1, 'change')}, "
            f"{first:,.0f} → {last:,.0f} tok/s ({last / first:.2f}×; steady state)."
        )
    stated = [s for s in specs or () if s != "none"]
    if stated:
        lines.append(
            f"Every option is planned at the acceptance your measurement implies (p = "
            f"{cur.implied_acceptance_per_position:.2f} per draft position, carried to each k: "
            f"{', '.join(stated)}) instead of the published prior; acceptance is the model's and the "
            f"data's, not the GPU's."
        )
    return lines


def measured_specs(specs: tuple[str, ...], cur: CurrentSetup) -> tuple[str, ...] | None:
    """The plan's speculative settings with τ from the measurement (the per-position acceptance
    the current setup implies, at each setting's own k), or None when the measurement implies no
    acceptance. ``none`` stays."""
    p = cur.implied_acceptance_per_position
    if p is None:
        return None
    out = []
    for text in specs:
        spec = parse_spec(text)
        if spec is None:
            out.append("none")
            continue
        tau = acceptance_length(spec.draft_tokens, p)
        out.append(f"{spec.method}:{spec.draft_tokens}:{tau:.3f}")
    return tuple(dict.fromkeys(out))


def with_current(
    current: Current,
    specs: tuple[str, ...],
    result: PlanResult,
    table: EfficiencyTable,
    job: Job,
    results: list[OptionResult],
    replan: Callable[[tuple[str, ...]], tuple[PlanResult, list[OptionResult]]],
    bands: BandsOf,
) -> PlanResult:
    """``result`` with ``--current`` answered: the setup on the first option (``results[0]``)
    beside its measurement, the walk to that option's recommendation, and — where the measurement
    implies an acceptance — the plan searched again at it (``replan(specs)``: the same plan with
    those speculative settings, and its option searches), which replaces ``result``, the walk then
    leading to the first option's recommendation at that acceptance.

    Raises:
        InputError: the setup does not run on the first option's GPUs.
    """
    cur = current_setup(current, table, job, results[0], bands)
    measured = measured_specs(specs, cur)
    if measured:  # the whole plan at the measured acceptance, and the walk to its recommendation
        result, again_results = replan(measured)
        cur = current_setup(current, table, job, again_results[0], bands)
    return replace(result, current=cur, answer=result.answer + tuple(current_sentences(cur, measured)))
