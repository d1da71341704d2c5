"""What the search set aside as unmeasured, and what it would have given (``planning.measured``).

Each note names the configuration the model ranks ahead, its figures, why no measurement backs
them and how to plan it anyway, so a plan never leaves out a faster layout without a word.
"""

from __future__ import annotations

from tokenplan.job.evaluate import VLLM_HYBRID_SPEC_CAVEAT
from tokenplan.planning.rank import describe
from tokenplan.planning.search import OptionResult
from tokenplan.units import days_words


def aside_notes(results: list[OptionResult]) -> list[str]:
    """Each option's configurations set aside as unmeasured (:func:`unmeasured_spec_note`,
    :func:`unmeasured_pp_note`): on every option, not only the recommended one (a break-it pass:
    the cheapest of two options set MTP aside without a word)."""
    notes = [unmeasured_spec_note(r) for r in results] + [unmeasured_pp_note(r) for r in results]
    return [n for n in notes if n]


def unmeasured_spec_note(top: OptionResult) -> str | None:
    """Where the search set aside a faster speculative configuration whose regime no measurement
    backs (vLLM on a hybrid model: ``job.evaluate.VLLM_HYBRID_SPEC_CAVEAT``, its one public run at
    0.75× the prediction; ``planning.measured.measured_first`` puts plain decoding first), what it
    would give and why it is not the recommendation: a new-user pass saw the MTP launch printed
    beside a line advising plain decoding."""
    best = top.best
    if best is None or best.evaluation.config.spec is not None:
        return None
    # set aside only where the rule does (not where the user's run measured the regime: spec_measured)
    spec = next(
        (c for c in top.ranked if VLLM_HYBRID_SPEC_CAVEAT in c.evaluation.warnings and top.unmeasured(c.evaluation)),
        None,
    )
    method = spec.evaluation.config.spec if spec is not None else None
    if spec is None or method is None:
        return None
    ev = spec.evaluation
    if ev.output_tok_s_total <= best.evaluation.output_tok_s_total:
        return None
    return (
        f"{top.option.label} with {method.describe()}: {ev.output_tok_s_total:,.0f} tok/s → "
        f"{days_words(spec.wall_s)} ({describe(spec)}) by the model, an upper bound: vLLM speculating on a "
        f"hybrid model ran at 0.75× its prediction in the one public run, so plain decoding, the measured "
        f"regime, is recommended and launched; run it on your server and give what it measured "
        f"(plan --current engine=vllm,spec={method.method}:{method.draft_tokens},… --measured-tok-s N) to plan "
        f"at what it ran."
    )


def unmeasured_pp_note(top: OptionResult) -> str | None:
    """Where the search ranked a pipeline-parallel layout after a measured one because no fit row
    runs the engine with PP > 1 (``planning.measured``), what it would give against the
    recommendation and how to plan it anyway; None where none would have led. A new-user pass:
    ``plan --engine vllm --model llama-3.1-8b --gpu 8xh200`` recommended TP1×PP2×DP4, 0.17 % ahead
    of TP1×DP8, on a schedule no measurement backs."""
    best = top.best
    if best is None or top.pipeline_measured:
        return None
    pp = next((c for c in top.ranked if c.evaluation.config.layout.pp > 1), None)
    if pp is None or pp.ranking_wall_s >= best.ranking_wall_s:
        return None
    ev, engine = pp.evaluation, pp.evaluation.config.engine.name
    gain = ev.output_tok_s_total / best.evaluation.output_tok_s_total - 1
    vllm = " (vLLM puts every request not in flight into the next step, unbalanced: vllm#41682)"
    return (
        f"{top.option.label} with {describe(pp)}: {ev.output_tok_s_total:,.0f} tok/s ({gain:+.1%}) → "
        f"{days_words(pp.wall_s)} by the model, but no fit row runs {engine} with pipeline parallelism, so "
        f"its micro-batch schedule is not measured{vllm if engine == 'vllm' else ''}; the measured layout, "
        f"{describe(best)}, is recommended and launched (--pp {ev.config.layout.pp} plans the PP one anyway)."
    )
