"""Which configurations a plan may recommend on the model's figures alone, and which it sets aside.

A configuration is *unmeasured* where no fit row backs the regime it runs in, so its figures
are the model's reading of mechanisms no measurement checked:

- vLLM speculating on a hybrid (linear-attention) model (``job.evaluate.VLLM_HYBRID_SPEC_CAVEAT``:
  the one public run went at 0.75× the prediction), unless the user measured that regime on
  their own server (``plan --current … --measured-tok-s``);
- pipeline parallelism on an engine no fit row runs with PP > 1 (``pipeline_engines`` of the
  shipped error bands, ``calibration.bands.outside_reason``): vLLM's scheduler puts every request
  not in flight into the next step instead of balanced micro-batches (vllm#41682, #57433), which
  the model does not take, and no measurement says what that costs.

:func:`measured_first` puts the fastest measured configuration first where the leader is
unmeasured; the unmeasured ones stay in the ranking after it and ``planning.aside`` says what
they would give. Where nothing measured runs (``--pp 2`` fixed, ``--spec mtp:1`` alone), the
ranking stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenplan.job.evaluate import VLLM_HYBRID_SPEC_CAVEAT, Evaluation

if TYPE_CHECKING:
    from tokenplan.planning.search import Candidate


def unmeasured(ev: Evaluation, spec_measured: bool, pipeline_measured: bool) -> bool:
    """Whether ``ev`` runs in a regime no measurement backs (module docstring): vLLM speculating
    on a hybrid model unless ``spec_measured`` (the user's run measured it), or PP > 1 unless
    ``pipeline_measured`` (some fit row runs the engine with pipeline parallelism)."""
    spec = not spec_measured and VLLM_HYBRID_SPEC_CAVEAT in ev.warnings
    return spec or (not pipeline_measured and ev.config.layout.pp > 1)


def measured_first(
    ranked: list[Candidate],
    runs: list[Evaluation],
    simulated: Callable[[Evaluation], Candidate],
    is_unmeasured: Callable[[Evaluation], bool],
) -> list[Candidate]:
    """``ranked`` (simulated leaders, in ranking order) with the first measured candidate first
    where the leader is unmeasured (``is_unmeasured``, :func:`unmeasured` bound to the search's
    flags); when no ranked leader is measured, the fastest measured configuration of ``runs``
    (fastest first in the steady state) simulated by ``simulated``. Unchanged where the leader is
    measured or nothing measured runs. Raises nothing.

    A new-user pass: ``plan --engine vllm`` printed the MTP launch beside a line advising plain
    decoding; another: ``plan --engine vllm --model llama-3.1-8b --gpu 8xh200`` recommended
    TP1×PP2×DP4, 0.17 % ahead of TP1×DP8 on a schedule no measurement backs."""
    if not ranked or not is_unmeasured(ranked[0].evaluation):
        return ranked
    lead = next((c for c in ranked if not is_unmeasured(c.evaluation)), None)
    if lead is None:
        ev = next((e for e in runs if not is_unmeasured(e)), None)
        if ev is None:
            return ranked
        lead = simulated(ev)
    return [lead, *(c for c in ranked if c is not lead)]
