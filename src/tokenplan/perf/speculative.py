"""Speculative decoding (MTP / EAGLE / DFlash): draft k tokens, verify k+1 in one target step.

Each verification step emits τ tokens per sequence on average (τ = acceptance length, the
bonus token included, 1 ≤ τ ≤ k+1) and costs one target step over ``k+1`` query tokens per
sequence plus the draft: ``k`` passes of the draft (an MTP head is one decoder layer plus
the lm_head). When decode is memory-bound the k+1 tokens ride on one weight read and the
speed-up approaches τ; once it is compute-bound the target step grows with k+1 and the ratio
falls to τ/(k+1) < 1 — speculative decoding then costs throughput (Leviathan et al. 2023,
arXiv:2211.17192 §3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenplan.arch.draft import DrafterShape
from tokenplan.errors import InputError
from tokenplan.records import quick_init


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """A speculative-decoding setting.

    Attributes:
        method: ``mtp``, ``eagle`` or ``dflash``.
        draft_tokens: k, tokens drafted per step.
        acceptance_length: τ, mean tokens accepted per verification step (bonus included).
        draft_layers: decoder layers of the draft model (MTP: 1; EAGLE-3: 1; DFlash:
            :data:`DFLASH_DRAFT_LAYERS`), each run once per drafted token.
        from_prior: τ came from :data:`ACCEPTANCE_PRIOR_PER_TOKEN` (not given), so it is
            re-derived at the job's context (:meth:`at_context`).
        draft_model: the drafter's checkpoint as the launch commands name it (``--draft-model``;
            None: a placeholder), EAGLE/DFlash only.
        drafter: its shape read from its ``config.json`` (None: taken from the target's,
            :mod:`tokenplan.arch.draft`).
    """

    method: str
    draft_tokens: int
    acceptance_length: float
    draft_layers: int = 1
    from_prior: bool = False
    draft_model: str | None = None
    drafter: DrafterShape | None = None

    def __post_init__(self) -> None:
        if self.draft_tokens < 1:
            raise InputError("spec draft tokens", self.draft_tokens, "an integer ≥ 1")
        if not 1.0 <= self.acceptance_length <= self.draft_tokens + 1:
            raise InputError(
                "spec acceptance length",
                self.acceptance_length,
                f"a number from 1 to draft tokens + 1 = {self.draft_tokens + 1}",
            )

    def describe(self) -> str:
        """``mtp k=3 τ=3.3`` style label."""
        return f"{self.method} k={self.draft_tokens} τ={self.acceptance_length:.3g}"

    def at_context(self, context_tokens: float) -> SpecDecode:
        """This setting with τ from the prior at ``context_tokens`` of context
        (:func:`prior_acceptance_length`); a τ the user gave is kept."""
        if not self.from_prior:
            return self
        tau = round(prior_acceptance_length(self.method, self.draft_tokens, context_tokens), 2)
        return replace(self, acceptance_length=tau)


quick_init(SpecDecode)  # a quicker __init__, same signature (tokenplan.records)


METHODS = ("mtp", "eagle", "eagle3", "dflash")
# Longest draft the engines' defaults and published recipes use: SGLang EAGLE for Llama drafts 8
# tokens, DFlash blocks are 16 (z-lab DFlash README); beyond that acceptance is negligible.
MAX_DRAFT_TOKENS = 16

# Decoder layers of a DFlash drafter: ``num_hidden_layers: 5`` in z-lab's drafter config
# (github.com/z-lab/dflash tests/fixtures/dflash2-config.json) and in the third-party ports of
# z-lab's ``dflash/model.py`` ("5-layer qwen3-class" drafter). Not confirmed from the DFlash paper
# (arXiv:2602.06036) or z-lab's README, which state no depth.
DFLASH_DRAFT_LAYERS = 5

# Per-position acceptance priors p, used where no measurement gives τ. A chain of k drafts accepts
# τ = 1 + p + … + p^k tokens per step (bonus included), so p is solved from a published τ at its k:
#
# - mtp 0.80: Qwen3.6-27B MTP with k = 3 accepts τ ≈ 3.3 under vLLM (its SpecDecoding metrics log
#   line) → p = 0.87, and 2.7–2.8 under llama.cpp → p = 0.75; DeepSeek-V3 MTP accepts the second
#   token 85–90 % of the time (DeepSeek-V3 report, arXiv:2412.19437 §5.4.3) → p = 0.85–0.90 at
#   k = 1. 0.80 (τ = 2.95 at k = 3) sits inside that range.
# - eagle3 0.78: the EAGLE-3 paper (arXiv:2503.01840, Table 1) reports τ up to ≈6.5 (GSM8K) at
#   temperature 0 with a draft *tree*; read as a chain of depth 8 that is p ≈ 0.91, an upper
#   bound for chain drafting (tree depth and per-model τ were not re-read from the table); the
#   same checkpoint (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B) drafting a chain of k = 7 under vLLM at
#   temperature 1 accepts τ = 2.77–3.49 (MT-bench, GSM8K, HumanEval; nebius/EAGLE3-Llama-3.3-70B-
#   Instruct model card) → p = 0.65–0.74. 0.78 lies between chain-at-T1 and tree-at-T0.
# - eagle 0.75: EAGLE-1/2 heads, below EAGLE-3 (the EAGLE-3 paper's ≈1.4× speed-up over EAGLE-2
#   comes mostly from longer acceptance); an engineering estimate 0.03 under the EAGLE-3 prior.
# - dflash 0.82: SGLang with z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat logs "accept len: 6.10"
#   at a 16-token block (k = 15; NVIDIA developer forum, "DFlash … Blackwell 6000 Pro") → p = 0.85;
#   a 5-layer community drafter for Qwen3.5-0.8B serves τ = 5.34 at k = 15 → p = 0.82. The DFlash
#   paper's own τ table (arXiv:2602.06036) was not checked.
ACCEPTANCE_PRIOR_PER_TOKEN = {"mtp": 0.80, "eagle": 0.75, "eagle3": 0.78, "dflash": 0.82}
# The low end of the same published figures, per position: mtp 0.75 (llama.cpp's τ 2.7–2.8 at
# k = 3 on Qwen3.6-27B), eagle3 0.65 (the chain at temperature 1, nebius model card), dflash 0.82
# (the community drafter's τ 5.34 at k = 15), eagle 0.62 (0.03 under eagle3's, as its prior).
# The planner ranks a configuration whose τ is a prior at this end (planning/search.py), so that
# speculative decoding is recommended only where it pays at the lower measured acceptance.
ACCEPTANCE_LOW_PER_TOKEN = {"mtp": 0.75, "eagle": 0.62, "eagle3": 0.65, "dflash": 0.82}

# Acceptance falls with the context the draft head attends over (a one-layer head extrapolates
# worse than the target). The priors above are short-context figures (chat and benchmark prompts
# of a few hundred to ~1,000 tokens): ACCEPTANCE_REFERENCE_CONTEXT_TOKENS. Beyond it the
# per-position acceptance is scaled by 1 − β·ln(context / reference), β fitted by hand to the one
# published ladder on the target model family: llama.cpp MTP on Qwen3.8-27B (same qwen35 dense
# architecture and MTP head) accepts 80–91 % of drafts at ~100 tokens of context, ~53 % at ~34K
# and 40–55 % at ~86K (comment by dondetir on vllm-project/vllm#47602, 2026-08-15):
# (0.855 − 0.53) / 0.855 / ln(34,000 / 100) = 0.380 / 5.83 = 0.065 per e-fold, which also gives
# 0.855·(1 − 0.065·ln 860) = 0.48 at 86K, inside 40–55 %. The same decline is reported by
# vLLM on Qwen3.6-27B (#47602: position-1 acceptance 93.5 % → 72.1 % as context grows), by
# SGLang on Qwen3.5 (sgl-project/sglang#30763: accept length 1.57 at 32K+ on GPQA) and for
# DSpark drafts on MI355X (lightseekorg/tokenspeed#1132: τ 3.76 at 32K, 2.91 at 98K). It is
# applied to every method. Not modelled: the content effect (thinking text accepts less than
# instruct text at the same context, Blaizzy/mlx-vlm#2046: 37 % vs 49 % at block 4).
ACCEPTANCE_REFERENCE_CONTEXT_TOKENS = 1_000
ACCEPTANCE_DECAY_PER_E_FOLD = 0.065


def acceptance_per_token(method: str, context_tokens: float | None = None) -> float:
    """Per-position acceptance p at ``context_tokens`` of context (None = the short-context
    prior): ``p_prior × (1 − β·ln(context / 1,000))`` above 1,000 tokens (see the constants).

    Raises:
        KeyError: ``method`` is not one of :data:`METHODS`.
    """
    p = ACCEPTANCE_PRIOR_PER_TOKEN[method]
    if context_tokens is None or context_tokens <= ACCEPTANCE_REFERENCE_CONTEXT_TOKENS:
        return p
    decay = ACCEPTANCE_DECAY_PER_E_FOLD * math.log(context_tokens / ACCEPTANCE_REFERENCE_CONTEXT_TOKENS)
    return p * max(1.0 - decay, 0.0)


def low_acceptance_ratio(spec: SpecDecode, context_tokens: float) -> float:
    """τ at the low end of the published acceptance (:data:`ACCEPTANCE_LOW_PER_TOKEN`, with the
    same context decay) over τ at the prior, both at ``context_tokens``; 1 for a τ the user gave
    (``from_prior`` False). E.g. MTP k = 1 at 3,000 tokens: p = 0.80·(1 − 0.065·ln 3) = 0.743
    and 0.75·(1 − 0.065·ln 3) = 0.696 → (1 + 0.696)/(1 + 0.743) = 0.973. Raises nothing for a
    method of :data:`METHODS`."""
    if not spec.from_prior:
        return 1.0
    scale = acceptance_per_token(spec.method, context_tokens) / ACCEPTANCE_PRIOR_PER_TOKEN[spec.method]
    p, low = ACCEPTANCE_PRIOR_PER_TOKEN[spec.method] * scale, ACCEPTANCE_LOW_PER_TOKEN[spec.method] * scale
    k = spec.draft_tokens
    return sum(low**i for i in range(k + 1)) / sum(p**i for i in range(k + 1))


def prior_acceptance_length(method: str, draft_tokens: int, context_tokens: float | None = None) -> float:
    """τ from a per-position acceptance prior p: τ = 1 + p + p² + … + p^k (bonus included).

    With p = 0.80 and k = 3: 1 + 0.8 + 0.64 + 0.512 = 2.952, between the 2.7–2.8 (llama.cpp)
    and 3.3 (vLLM) measured on Qwen3.6-27B at short context. At 2,300 tokens of context p is
    0.80·(1 − 0.065·ln 2.3) = 0.7567 and τ = 1 + 0.7567 + 0.5726 + 0.4333 = 2.76.

    Args:
        method: one of :data:`METHODS`.
        draft_tokens: k.
        context_tokens: mean context of the decoding sequences (tokens); None = short context.

    Returns:
        τ (tokens per verification step, 1 ≤ τ ≤ k + 1).

    Raises:
        KeyError: ``method`` is not one of :data:`METHODS` (``parse_spec`` refuses those first).
    """
    p = acceptance_per_token(method, context_tokens)  # parse_spec admits only METHODS, all keyed here
    return sum(p**i for i in range(draft_tokens + 1))


def parse_spec(text: str) -> SpecDecode | None:
    """Parse ``METHOD:K:TAU`` (``mtp:3:3.3``), ``METHOD:K`` (τ from the prior), ``METHOD``
    (k = 3, τ from the prior) or ``none`` (also ``off`` or empty).

    Raises:
        InputError: unknown method or malformed numbers.
    """
    text = text.strip().lower()
    if text in ("", "none", "off"):
        return None
    parts = text.split(":")
    if parts[0] not in METHODS or len(parts) > 3:
        raise InputError("spec", text, "none, or METHOD:K[:TAU] with METHOD in " + ", ".join(METHODS))
    try:
        k = int(parts[1]) if len(parts) > 1 else 3
        tau = float(parts[2]) if len(parts) > 2 else prior_acceptance_length(parts[0], k)
    except ValueError:
        raise InputError("spec", text, "METHOD:K[:TAU] with K an integer and TAU a number") from None
    # named as the option the value came in (--spec mtp:0), the part that is wrong in the allowed text
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        raise InputError("spec", text, f"METHOD:K with K, the draft tokens, an integer from 1 to {MAX_DRAFT_TOKENS}")
    if not 1.0 <= tau <= k + 1:
        raise InputError(
            "spec", text, f"METHOD:K:TAU with TAU, the acceptance length, a number from 1 to K + 1 = {k + 1}"
        )
    layers = DFLASH_DRAFT_LAYERS if parts[0] == "dflash" else 1
    return SpecDecode(parts[0], k, tau, layers, from_prior=len(parts) < 3)
