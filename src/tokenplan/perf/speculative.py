"""Speculative decoding (MTP / EAGLE / DFlash): draft k tokens, verify k+1 in one target step.

Each verification step emits τ tokens per sequence on average (τ = acceptance length, the
bonus token included, 1 ≤ τ ≤ k+1) and costs one target step over ``k+1`` query tokens per
sequence plus the draft: ``k`` passes of the draft (an MTP head is one decoder layer plus
the lm_head). When decode is memory-bound the k+1 tokens ride on one weight read and the
speed-up approaches τ; once it is compute-bound the target step grows with k+1 and the ratio
falls to τ/(k+1) < 1 — speculative decoding then costs throughput (Leviathan et al. 2023,
arXiv:2211.17192 §3; DFlash measurements in shared notes).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.errors import InputError


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """A speculative-decoding setting.

    Attributes:
        method: ``mtp``, ``eagle`` or ``dflash``.
        draft_tokens: k, tokens drafted per step.
        acceptance_length: τ, mean tokens accepted per verification step (bonus included).
        draft_layers: decoder layers of the draft model (MTP: 1; EAGLE-3: 1; DFlash: 5 in
            z-lab's released drafters), each run once per drafted token.
    """

    method: str
    draft_tokens: int
    acceptance_length: float
    draft_layers: int = 1

    def __post_init__(self) -> None:
        if self.draft_tokens < 1:
            raise InputError("spec draft tokens", self.draft_tokens, "an integer ≥ 1")
        if not 1.0 <= self.acceptance_length <= self.draft_tokens + 1:
            raise InputError("spec acceptance length", self.acceptance_length,
                             f"a number from 1 to draft tokens + 1 = {self.draft_tokens + 1}")

    def describe(self) -> str:
        """``mtp k=3 τ=3.3`` style label."""
        return f"{self.method} k={self.draft_tokens} τ={self.acceptance_length:g}"


METHODS = ("mtp", "eagle", "eagle3", "dflash")
# Longest draft the engines' defaults and published recipes use: SGLang EAGLE for Llama drafts 8
# tokens, DFlash blocks are 16 (z-lab DFlash README); beyond that acceptance is negligible.
MAX_DRAFT_TOKENS = 16

# Acceptance priors per method and model family, where a measurement gives none
# (shared notes generation-jobs.md "Speculative decoding at scale"): Qwen3.6-27B MTP with 3
# drafts accepts ≈3.3 of 4 tokens (vLLM) and 2.7–2.8 (llama.cpp); DFlash drafters 3.2–3.4.
# DeepSeek-V3 MTP: second-token acceptance 85–90 % (DeepSeek-V3 report §5.4.3) → with k=1,
# τ ≈ 1.85; chains of k drafts are taken at 0.8 acceptance per extra position.
ACCEPTANCE_PRIOR_PER_TOKEN = {"mtp": 0.80, "eagle": 0.75, "eagle3": 0.78, "dflash": 0.82}


def prior_acceptance_length(method: str, draft_tokens: int) -> float:
    """τ from a per-position acceptance prior p: τ = 1 + p + p² + … + p^k (bonus included).

    With p = 0.80 and k = 3: 1 + 0.8 + 0.64 + 0.512 = 2.952, between the 2.7–2.8 (llama.cpp)
    and 3.3 (vLLM) measured on Qwen3.6-27B.
    """
    p = ACCEPTANCE_PRIOR_PER_TOKEN.get(method, 0.75)
    return sum(p**i for i in range(draft_tokens + 1))


def parse_spec(text: str) -> SpecDecode | None:
    """Parse ``METHOD:K:TAU`` (``mtp:3:3.3``), ``METHOD:K`` (τ from the prior) or ``none``.

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
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        raise InputError("spec draft tokens", k, f"an integer from 1 to {MAX_DRAFT_TOKENS}")
    layers = 5 if parts[0] == "dflash" else 1
    return SpecDecode(parts[0], k, tau, layers)
