"""Rank the options and say why, in plain sentences: the fastest, the cheapest, what bounds
each, and how the all-TP layout compares with replicas."""

from __future__ import annotations

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.launch import MaxRunning
from tokenplan.job.graphs import graph_running_cap, uncaptured
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.planning.curves import label
from tokenplan.planning.search import Candidate, Job, OptionResult, best_with
from tokenplan.planning.space import Fixed, layouts, tp_is, widest_tp
from tokenplan.units import days_words, duration_words, usd_text


def describe(c: Candidate) -> str:
    """``TP2×DP4, fp8 weights, fp8 KV, mtp k=3 τ=2.95`` style label (``planning.curves.label``)."""
    return label(c.evaluation)


def widest_tp_leaders(
    model: ModelSpec, results: list[OptionResult], table: EfficiencyTable, job: Job, fixed: Fixed
) -> dict[str, Candidate | None]:
    """Per option label, its fastest configuration with every GPU of a replica in one TP group
    of the widest TP (:func:`planning.space.widest_tp`; None when none runs) — the ``all_tp`` of
    :func:`explain`. With TP fixed, or where the fixed layout parts (``fixed``) admit no widest-TP
    layout, an option is left out: its plan then says nothing of that TP."""
    out: dict[str, Candidate | None] = {}
    for r in results if fixed.tp is None else ():
        n = widest_tp(r.option)
        if any(fixed.admits(lay) and lay.tp == n for lay in layouts(model, r.option.gpu, r.option.count)):
            out[r.option.label] = best_with(r, table, job, tp_is(n))
    return out


def bottleneck_text(c: Candidate) -> str:
    """What bounds a configuration: the decode step's limit (or prefill, where it takes most of
    the cycle: ``SteadyState.bottleneck``) and what caps the batch."""
    s = c.evaluation.steady
    return f"{s.bottleneck}; batch {s.batch:,.0f}/replica capped by {s.batch_reason}"


def fastest(results: list[OptionResult]) -> OptionResult | None:
    """The option with the shortest best wall time."""
    ok = [(r.best.wall_s, i, r) for i, r in enumerate(results) if r.best]
    return min(ok)[2] if ok else None


LAYOUT_TIE = 0.005  # throughputs within this fraction of each other are a tie, not a better layout


def cheapest(results: list[OptionResult]) -> OptionResult | None:
    """The option with the lowest best cost (options without a price are left out)."""
    ok = [(r.best.cost.usd, i, r) for i, r in enumerate(results) if r.best and r.best.cost.usd is not None]
    return min(ok)[2] if ok else None


SHORT_JOB_RATIO = 0.8  # a job averaging below this share of the steady rate is said to


def _short_job_note(r: OptionResult) -> str | None:
    """A job too small to run at the steady rate for most of its time (the ramp and the tail of
    long answers finishing alone dominate): the table's tok/s is the steady rate, so the job's
    own average is said beside it (a new-user pass: 100 requests showed 48,713 tok/s beside a
    time that averages ~4,400)."""
    b = r.best
    if b is None or b.time.total_s <= 0:
        return None
    steady = b.evaluation.output_tok_s_total
    job = b.time.output_tok_s * b.evaluation.config.layout.dp  # every replica's job, the same time
    if not job < SHORT_JOB_RATIO * steady:
        return None
    why = "the longest answers finish alone"
    if b.time.startup_s:
        why += f", and the servers take {duration_words(b.time.startup_s)} to start"
    return (
        f"{r.option.label}: the job is too small to run at the steady rate for long: it averages "
        f"{job:,.0f} tok/s over its {duration_words(b.time.total_s)} ({why}), "
        f"against the {steady:,.0f} tok/s the table shows while the batch is full."
    )


def _top_reasons(r: OptionResult, n: int) -> list[str]:
    """The ``n`` reasons that rejected the most configurations (or, when nothing was generated,
    why: every format or split was left out)."""
    reasons = sorted(r.rejected, key=lambda k: -r.rejected[k])[:n]
    return reasons or r.not_searched[:n] or [f"no configuration of {r.option.label} was generated"]


def _speculation_note(r: OptionResult) -> str | None:
    """Why a speculative configuration that is faster on its prior τ does not lead (the planner
    ranks a prior τ at the low end of published acceptance: ``Candidate.ranking_wall_s``), or
    None when none is (one set aside as unmeasured is ``planning.aside``'s). Gives both τ and the throughput gap (tokens/s)."""
    b = r.best
    if b is None:
        return None
    c = next(
        (
            c
            for c in r.ranked[1:]
            if c.wall_s < b.wall_s
            and c.evaluation.config.spec is not None
            and c.evaluation.config.spec.from_prior
            and not r.unmeasured(c.evaluation)  # set aside as unmeasured: planning.aside
        ),
        None,
    )
    spec = c.evaluation.config.spec if c is not None else None
    if c is None or spec is None:
        return None
    tau_low = spec.acceptance_length * c.acceptance_low_ratio
    # ranked by the job's time (c.wall_s < b.wall_s), which a short job's start and drain move as well as
    # the rate: say how much sooner, with both rates (one may be lower, as for a one-minute deadline)
    sooner = 1 - c.wall_s / b.wall_s
    than = "plain decoding" if b.evaluation.config.spec is None else "the leading configuration"
    return (
        f"{r.option.label}: {describe(c)} finishes the job {sooner:.1%} sooner than {than} "
        f"({c.evaluation.output_tok_s_total:,.0f} against {b.evaluation.output_tok_s_total:,.0f} tok/s), "
        f"at τ={spec.acceptance_length:.3g}, the acceptance prior at this context; counted at the "
        f"low end of published {spec.method} acceptance (τ≈{tau_low:.2f}) it does not come out ahead, so it "
        f"does not lead. "
        f"Measure τ on your own traces (tokenplan bench) and compare with --spec none "
        f"--spec {spec.method}:{spec.draft_tokens}:TAU."
    )


def _speculation_behind_note(r: OptionResult) -> str | None:
    """Why speculative decoding, searched, does not lead where plain decoding does and the
    fastest speculative configuration (the shortest job at its τ) is slower outright (a new-user
    pass: the default plan said nothing of MTP, while its HTML chart showed MTP ahead at every
    level up to its own memory limit). Said as what sets a rate by Little's law — requests held
    per replica (and what caps them), replicas, and TPOT — so the figures multiply out to the
    rates (a break-it pass: a decode step alone left out the prefill a cycle also spends). None
    where the leader speculates, nothing speculative runs, or it is set aside as unmeasured
    (``planning.aside``) or faster at its prior τ (:func:`_speculation_note`)."""
    b = r.best
    if b is None or b.evaluation.config.spec is not None:
        return None
    runs = [c for c in r.ranked if c.evaluation.config.spec is not None and not r.unmeasured(c.evaluation)]
    c = min(runs, key=lambda c: c.wall_s, default=None)
    spec = c.evaluation.config.spec if c is not None else None
    if c is None or spec is None or c.wall_s < b.wall_s:
        return None
    cs, bs = c.evaluation.steady, b.evaluation.steady
    cr, br = c.evaluation.config.layout.dp, b.evaluation.config.layout.dp
    replicas = f", on {cr} replica{'s' if cr != 1 else ''} against {br}" if cr != br else ""
    return (
        f"{r.option.label}: speculative decoding does not pay here: the fastest, {describe(c)}, gives "
        f"{c.evaluation.output_tok_s_total:,.0f} tok/s ({c.evaluation.output_tok_s_total / b.evaluation.output_tok_s_total - 1:+.0%}); "
        f"it holds {cs.batch:,.0f} requests per replica (capped by {cs.batch_reason}) against {bs.batch:,.0f}{replicas}, "
        f"at a TPOT of {cs.tpot_s * 1e3:.1f} ms against {bs.tpot_s * 1e3:.1f} ms (each decode step carries "
        f"τ={spec.acceptance_length:.3g} tokens per request)."
    )


def explain(
    results: list[OptionResult], all_tp: dict[str, Candidate | None], eligible: list[OptionResult] | None = None
) -> list[str]:
    """A few sentences that answer the hardware question.

    Args:
        all_tp: per option label, the best configuration using every GPU in one TP group (an
            option left out, e.g. where the user fixed another TP, gets no TP sentence).
        eligible: the options that meet the plan's deadline and budget, when it has them (the
            fastest and cheapest are named among these; None = no target, every option).
    """
    lines: list[str] = []
    for r in results:
        b = r.best
        if b is None:
            lines.append(f"{r.option.label}: nothing runs — " + "; ".join(_top_reasons(r, 2)) + ".")
            continue
        money = f", {usd_text(b.cost.usd)}" if b.cost.usd is not None else " (no public price: pass --price)"
        lines.append(
            f"{r.option.label}: best is {describe(b)} at {b.evaluation.output_tok_s_total:,.0f} tok/s "
            f"→ {days_words(b.wall_s)}{money}; bound by {bottleneck_text(b)}."
        )
    lines.extend(note for r in results if (note := _short_job_note(r)))
    lines.extend(note for r in results if (note := _speculation_note(r) or _speculation_behind_note(r)))
    pool = results if eligible is None else eligible
    f, ch = fastest(pool), cheapest(pool)
    among = "" if eligible is None else " of the options that meet the target"
    if eligible is not None and not eligible:
        lines.append("No option meets the target; the launch below is for the fastest option as given.")
    elif f and ch and f is not ch and f.best and ch.best and ch.best.cost.usd is not None:  # cheapest: priced
        lines.append(
            f"Fastest{among}: {f.option.label} ({days_words(f.best.wall_s)}); cheapest: "
            f"{ch.option.label} ({usd_text(ch.best.cost.usd)})."
        )
    elif f and sum(r.best is not None for r in results) > 1:  # with one option there is nothing to compare
        lines.append(f"{f.option.label} is both the fastest and the cheapest{among or ' option'}.")
    for r in results:
        tp_all, b = all_tp.get(r.option.label), r.best
        if b is None or r.option.count < 2 or r.option.label not in all_tp:  # not in: a fixed layout excludes it
            continue
        n = widest_tp(r.option)
        if n == 1:
            continue
        if tp_all is None:
            why = next(
                (
                    k
                    for k in sorted(r.rejected, key=lambda k: -r.rejected[k])
                    if k.startswith((f"TP{n}×", f"TP{n}:", f"TP{n},"))
                ),
                None,
            )
            why = why and why.removeprefix(f"TP{n}: ")  # the sentence names TP{n} (it said "TP8: TP8 does not…")
            lines.append(f"TP{n} on {r.option.gpu.key} cannot run this model" + (f": {why}." if why else "."))
        elif tp_all.evaluation.config.layout == b.evaluation.config.layout:
            shown = b.evaluation.config.layout.describe()  # TP8×EP8 DP-attn is TP8 with MoE ranks
            lines.append(
                f"TP{n} is the right layout on {r.option.gpu.key}" + ("." if shown == f"TP{n}" else f" (as {shown}).")
            )
        elif (ratio := b.evaluation.output_tok_s_total / tp_all.evaluation.output_tok_s_total) <= 1 - LAYOUT_TIE:
            # more tok/s in the steady state, but the job ends later (its drain or ramp is longer)
            lines.append(
                f"TP{n} on {r.option.gpu.key} gives more tok/s than {b.evaluation.config.layout.describe()} "
                f"({tp_all.evaluation.output_tok_s_total:,.0f} against {b.evaluation.output_tok_s_total:,.0f}) "
                f"but finishes later ({days_words(tp_all.wall_s)} against {days_words(b.wall_s)})."
            )
        elif ratio < 1 + LAYOUT_TIE:
            # within half a percent ("1.00× its throughput" said nothing): a tie, both figures given
            lines.append(
                f"TP{n} on {r.option.gpu.key} runs as fast as {b.evaluation.config.layout.describe()} "
                f"({tp_all.evaluation.output_tok_s_total:,.0f} against {b.evaluation.output_tok_s_total:,.0f} tok/s): "
                "either layout will do."
            )
        else:
            why = "; ".join(w for w in tp_all.evaluation.warnings if "replicated" in w)
            comm = tp_all.evaluation.steady.decode_step.comm_s / tp_all.evaluation.steady.decode_step.total_s
            lines.append(
                f"TP{n} is not the best layout on {r.option.gpu.key}: "
                f"{b.evaluation.config.layout.describe()} gives {ratio:.2f}× its throughput "
                f"({tp_all.evaluation.config.layout.describe()}: "
                f"{tp_all.evaluation.output_tok_s_total:,.0f} tok/s, "
                f"{comm:.0%} of each decode step in all-reduce" + (f", {why}" if why else "") + ")."
            )
    return lines


def formats_note(r: OptionResult, bf16: Candidate | None, fp8: Candidate | None = None) -> str | None:
    """Which weight and KV formats the option's leader runs and what BF16 for both would give:
    ``8× b200: fp8 weights and fp8 KV chosen, the fastest of the formats searched; with BF16
    weights and KV (TP1×DP8, …) 33,410 tok/s → 0.79 days, $795``. ``bf16``: the option's fastest
    configuration with BF16 weights and KV (None when none runs or none was searched); ``fp8``:
    its fastest with FP8 weights, said too where the leader's weights are BF16 (a new-user pass:
    at a fixed TP8, BF16 weights led with only the BF16-KV figure beside them). None when nothing
    runs or the leader already runs BF16 for both."""
    b = r.best
    if b is None:
        return None
    cfg = b.evaluation.config
    if cfg.weight_dtype.value == "bf16" and cfg.kv_dtype.value == "bf16":
        return None
    chosen = f"{r.option.label}: {cfg.weight_dtype.value} weights and {cfg.kv_dtype.value} KV chosen"
    if bf16 is None:
        return f"{chosen}; BF16 weights and KV do not run here (or were not searched)."
    money = f", {usd_text(bf16.cost.usd)}" if bf16.cost.usd is not None else ""
    # ranked by the wall time at the low end of published acceptance (Candidate.ranking_wall_s), so
    # at the prior τ a BF16 speculative setup can print sooner than the leader: say which is which
    fastest = (
        "the fastest of the formats searched"
        if bf16.wall_s >= b.wall_s
        else "the fastest of the formats searched at the low end of published acceptance"
    )
    also = ""
    if fp8 is not None and cfg.weight_dtype.value == "bf16":
        fp8_money = f", {usd_text(fp8.cost.usd)}" if fp8.cost.usd is not None else ""
        also = (
            f"; with FP8 weights ({describe(fp8)}) {fp8.evaluation.output_tok_s_total:,.0f} tok/s → "
            f"{days_words(fp8.wall_s)}{fp8_money}"
        )
    return (
        f"{chosen}, {fastest}; with BF16 weights and KV ({describe(bf16)}) "
        f"{bf16.evaluation.output_tok_s_total:,.0f} tok/s → {days_words(bf16.wall_s)}{money}{also}."
    )


def radix_note(top: OptionResult, on: Candidate | None) -> str | None:
    """Why the recommended option's launch turns SGLang's radix (prefix) cache off, and what a
    multi-turn job gives up: with the cache on, a hybrid model's request holds 4–5 state slots
    (3 + ping-pong buffers, engine-facts §3), so the state pool caps the batch; with it off, one
    slot per request. A ``generate --mode regenerate`` job that resends each conversation's history
    would reuse that prefix from the cache and prefill only the new turn.

    Args:
        top: the recommended option, whose leader runs with the cache off (cap lifted).
        on: its fastest configuration with the cache on and the same speculative setting (None:
            none runs, and there is nothing to compare).
    """
    if top.best is None or on is None:
        return None
    lifted, s = top.best.evaluation, on.evaluation.steady
    # the options are ranked by when the job ends: both times are said, as a small job's steady
    # rates can rank the other way (a new-user pass read "against 41,527 tok/s" as the faster one);
    # the cache-on configuration is named, as its layout can differ from the leader's (TP2×DP4
    # beside TP1×DP8: a new-user pass compared 162/replica with 406/replica of another layout)
    return (
        f"--disable-radix-cache on {top.option.label}: {lifted.output_tok_s_total:,.0f} tok/s at "
        f"{lifted.steady.batch:,.0f} running per replica → {days_words(top.best.wall_s)}, against "
        f"{on.evaluation.output_tok_s_total:,.0f} tok/s → {days_words(on.wall_s)} "
        f"with the prefix cache on ({describe(on)}: batch {s.batch:,.0f}/replica capped by {s.batch_reason}; "
        f"with the cache on "
        f"each request holds 4–5 state slots). A multi-turn job (generate --mode regenerate) resends its history; "
        f"the cache would skip that prefill, so plan such a job with --isl set to the new tokens per turn and keep "
        f"the cache on only if that option then finishes sooner."
    )


def graph_cap_note(top: OptionResult | None, table: EfficiencyTable, job: Job) -> str | None:
    """Why the recommended option runs a running cap at vLLM's CUDA-graph capture size
    (:func:`tokenplan.job.graphs.graph_running_cap`: every decode step stays inside the graphs,
    where a step past them on a GDN hybrid adds its host time), against the same configuration at
    vLLM's default cap; None where its leader runs no such cap."""
    if top is None or top.best is None:
        return None
    ev = top.best.evaluation
    cfg = ev.config
    defaults = cfg.engine.settings(ev.deployment.gpu, cfg.layout, speculative=cfg.spec is not None)
    cap = graph_running_cap(ev.deployment.spec, defaults, cfg.spec)
    if cap is None or cfg.max_running.requests != cap:
        return None
    default = best_with(
        top,
        table,
        job,
        lambda c: (
            c.max_running == MaxRunning()
            and (c.layout, c.weight_dtype, c.kv_dtype, c.spec) == (cfg.layout, cfg.weight_dtype, cfg.kv_dtype, cfg.spec)
        ),
    )
    eager = uncaptured(ev.deployment, ev.settings, cfg.spec)
    per_request = 1 + (cfg.spec.draft_tokens if cfg.spec else 0)
    if default is not None and (
        default.evaluation.steady.batch / eager.microbatches * per_request <= eager.captured_tokens
    ):
        # the default cap's batch (held lower by memory) already decodes inside the graphs: what
        # the cap gains is memory, the profiling run's sampler pass over max_num_seqs rows
        return (
            f"running cap {cap} on {top.option.label}: at vLLM's default cap of {defaults.max_running:,} the batch "
            f"({default.evaluation.steady.batch:,.0f}/replica, {default.evaluation.steady.batch_reason}) already "
            f"decodes inside its CUDA graphs (up to {eager.captured_tokens:,.0f} tokens a step); the lower "
            f"--max-num-seqs shrinks the sampler pass of vLLM's memory-profiling run (one row of logits per "
            f"sequence), which leaves the KV pool room for {ev.steady.batch:,.0f}/replica: "
            f"{ev.output_tok_s_total:,.0f} tok/s → {days_words(top.best.wall_s)}, against "
            f"{default.evaluation.output_tok_s_total:,.0f} tok/s → {days_words(default.wall_s)} at the default cap."
        )
    against = (
        f", against {default.evaluation.output_tok_s_total:,.0f} tok/s → {days_words(default.wall_s)} at vLLM's "
        f"default cap (batch {default.evaluation.steady.batch:,.0f}/replica)"
        if default is not None
        else ""
    )
    return (
        f"running cap {cap} on {top.option.label}: vLLM replays a step of up to {eager.captured_tokens:,.0f} tokens "
        f"from its CUDA graphs, and past them each step of this Gated DeltaNet hybrid adds ~{eager.step_s * 1e3:.0f} ms "
        f"of host time (vllm#27222); {cap} running × {per_request} token{'s' if per_request > 1 else ''} per step keeps "
        f"every decode step inside them: {ev.output_tok_s_total:,.0f} tok/s → {days_words(top.best.wall_s)}{against}."
    )
