"""Input- and output-length distributions (tokens).

A length is either fixed (benchmarks: ``ignore_eos`` with exact lengths) or lognormal with a
given mean and shape ``sigma``, capped at ``cap`` (``max_tokens`` for outputs: a thinking answer
that hits the cap ends with ``finish_reason = length``). Thinking outputs are heavy-tailed; a
lognormal with σ ≈ 1 matches the spread reported for reasoning traces (a few hundred to tens of
thousands of tokens, docs/generation-jobs.md).

Moments are in closed form: for ``X ~ LN(μ, σ)`` and ``Y = min(X, c)``,
``E[X^k; X < c] = exp(kμ + k²σ²/2) · Φ((ln c − μ − kσ²)/σ)`` (the partial moments of the
lognormal, e.g. Johnson, Kotz & Balakrishnan, *Continuous Univariate Distributions* vol. 1,
ch. 14), so ``E[Y^k] = E[X^k; X < c] + c^k · P(X ≥ c)``, with Φ(x) = erfc(−x/√2)/2 and the
tail 1 − Φ(x) = erfc(x/√2)/2 from ``math.erfc`` (exact in both tails; importing
``scipy.stats`` for them would add ~0.7 s to every ``tokenplan plan``). A
256-point quantile grid, used before, gave a running mean 1–8 % low (its bins miss the tail
that E[L²] weighs most). The grid remains only for the largest length (:attr:`LengthDist.max`,
a high quantile where there is no cap) and the even part of the survival curves, whose tail
goes on to the cap (or the 1 − 10⁻⁶ quantile) so that a burst's longest request is not cut.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import cached_property
from statistics import NormalDist
from typing import NamedTuple

from tokenplan.errors import InputError, shown
from tokenplan.units import MAX_REQUEST_TOKENS

_GRID = 256
_SQRT2 = math.sqrt(2.0)


def _normal_cdf(x: float) -> float:
    """Φ(x), the standard normal CDF."""
    return 0.5 * math.erfc(-x / _SQRT2)


def _normal_sf(x: float) -> float:
    """1 − Φ(x), computed directly (no cancellation in the upper tail)."""
    return 0.5 * math.erfc(x / _SQRT2)


# σ = 5 puts the 99th percentile at exp(5 × 2.326) ≈ 1.1e5 × the median: wider than any real
# length distribution (thinking-answer lengths fit σ ≈ 0.5–1.5), so a larger σ is a typo.
MAX_SIGMA = 5.0
_SURVIVAL_POINTS = 32
# The even grid ends at :attr:`LengthDist.max`, the 1 − 1/512 quantile (z ≈ 2.89); the longest of
# n requests sits near the 1 − 1/n quantile, so a burst of 1,000 (z ≈ 3.1) would lose its
# slowest tail: with n = 1,000 the chance that one of them runs past the grid's top is
# 1 − (1 − 1/512)^1000 ≈ 0.86. Survival curves go on through these exceedance probabilities
# (z = 3.09, 3.72, 4.26, 4.75) and end at the cap, where P(L > cap) = 0.
_TAIL_PROBABILITIES = (1e-3, 1e-4, 1e-5, 1e-6)


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution.

    Attributes:
        mean_tokens: the mean of the uncapped distribution (tokens).
        sigma: lognormal shape (0 = every length equals the mean).
        cap_tokens: the largest length (tokens); None = no cap.
        cap_is_max_tokens: every request carries the cap as its ``max_tokens`` (a job's output
            cap, as ``tokenplan generate`` sends it), not just a bound of the data's lengths
            (a prompt set's longest answer, a benchmark's per-request lengths): an engine that
            reserves ``max_tokens`` at admission reserves the cap for each request
            (``Engine.running_context_tokens``).
    """

    mean_tokens: float
    sigma: float = 0.0
    cap_tokens: float | None = None
    cap_is_max_tokens: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.mean_tokens < math.inf:
            raise InputError("mean length", self.mean_tokens, "a finite number of tokens > 0")
        if not 0 <= self.sigma <= MAX_SIGMA:  # also refuses nan
            raise InputError("length sigma", self.sigma, f"a number from 0 to {MAX_SIGMA:g}")
        if self.cap_tokens is not None and not self.cap_tokens > 0:
            raise InputError("length cap", self.cap_tokens, "a number of tokens > 0")

    @property
    def max_tokens(self) -> float | None:
        """The ``max_tokens`` every request carries (tokens), or None (see ``cap_is_max_tokens``)."""
        return self.cap_tokens if self.cap_is_max_tokens else None

    @cached_property
    def quantiles(self) -> tuple[float, ...]:
        """Lengths at the mid-points of ``_GRID`` equal-probability bins (tokens)."""
        cap = self.cap_tokens or math.inf
        if self.sigma == 0:
            return (min(self.mean_tokens, cap),) * _GRID
        mu = math.log(self.mean_tokens) - self.sigma**2 / 2  # E[X] = exp(mu + σ²/2)
        z = NormalDist()
        return tuple(min(math.exp(mu + self.sigma * z.inv_cdf((i + 0.5) / _GRID)), cap) for i in range(_GRID))

    @property
    def _mu(self) -> float:
        """μ of the uncapped lognormal: E[X] = exp(μ + σ²/2) = ``mean_tokens``."""
        return math.log(self.mean_tokens) - self.sigma**2 / 2

    def capped_moment(self, k: int, cap: float | None = None) -> float:
        """E[min(L, cap)^k] in closed form (tokens^k; see the module docstring).

        Args:
            k: the moment's order (1 = mean, 2 = second moment).
            cap: an extra cap below the distribution's own (tokens); None = the own cap only.

        Returns:
            The moment (tokens^k). Raises nothing.
        """
        c = min(cap if cap is not None else math.inf, self.cap_tokens or math.inf)
        if self.sigma == 0:
            return min(self.mean_tokens, c) ** k
        if c <= 0:
            return 0.0
        mu, s = self._mu, self.sigma
        whole = math.exp(k * mu + k * k * s * s / 2)
        if math.isinf(c):
            return whole
        z = (math.log(c) - mu) / s
        return whole * _normal_cdf(z - k * s) + c**k * _normal_sf(z)

    @cached_property
    def mean(self) -> float:
        """Mean of the capped distribution (tokens), E[min(X, cap)]."""
        return self.capped_moment(1)

    @cached_property
    def running_mean(self) -> float:
        """Mean length of the requests running at a random instant: E[L²] / E[L] (length-biased:
        long requests are in the batch for longer)."""
        return self.capped_moment(2) / self.mean

    def _exceeds(self, length: float) -> float:
        """P(L > length)."""
        if self.cap_tokens is not None and length >= self.cap_tokens:
            return 0.0
        if self.sigma == 0:
            return 1.0 if self.mean_tokens > length else 0.0
        if length <= 0:
            return 1.0
        return _normal_sf((math.log(length) - self._mu) / self.sigma)

    @cached_property
    def _grid(self) -> tuple[float, ...]:
        """Lengths the survival curves are evaluated at (tokens): ``_SURVIVAL_POINTS + 1`` even
        points from 0 to :attr:`max`, then the tail quantiles ``1 − p`` for p in
        ``_TAIL_PROBABILITIES`` that lie below the cap, then the cap itself."""
        top = self.max
        grid = [top * i / _SURVIVAL_POINTS for i in range(_SURVIVAL_POINTS + 1)]
        if self.sigma > 0:
            cap = self.cap_tokens or math.inf
            z = NormalDist()
            tail = (math.exp(self._mu + self.sigma * z.inv_cdf(1.0 - p)) for p in _TAIL_PROBABILITIES)
            grid += [x for x in tail if top < x < cap]
            if cap > top and not math.isinf(cap):
                grid.append(cap)
        return tuple(grid)

    @cached_property
    def survival(self) -> tuple[tuple[float, float], ...]:
        """(s, P(L > s)) on the grid of :attr:`_grid`: even points up to the max, then the tail
        out to the cap (P = 0 there) or, uncapped, to the 1 − 10⁻⁶ quantile."""
        return tuple((g, self._exceeds(g)) for g in self._grid)

    @cached_property
    def residual_survival(self) -> tuple[tuple[float, float], ...]:
        """(s, E[max(L − s, 0)] / E[L]) on the same grid: the survival of the residual length
        of a request running at a random instant (Cox, Renewal Theory, 1962, §5.2);
        E[max(L − s, 0)] = E[L] − E[min(L, s)]."""
        return tuple((g, max(self.mean - self.capped_moment(1, g), 0.0) / self.mean) for g, _ in self.survival)

    @cached_property
    def max(self) -> float:
        """Largest length on the grid (tokens)."""
        return max(self.quantiles)

    def describe(self) -> str:
        """``lognormal mean 2500 σ 1.0 cap 32768`` or ``fixed 1024``."""
        if self.sigma == 0:
            return f"fixed {self.mean_tokens:,.0f}"
        cap = f", cap {self.cap_tokens:,.0f}" if self.cap_tokens else ""
        return f"lognormal mean {self.mean:,.0f}, σ {self.sigma:g}{cap}"


class LengthDefaults(NamedTuple):
    """A default length distribution as a user states it: the capped mean, the lognormal σ and
    the cap (tokens)."""

    mean: float
    sigma: float
    cap: float


# The default job of ``plan`` and ``predict`` (tokens; stated in plan's output):
# - inputs: chat prompts of ShareGPT/UltraChat-style data sets with the chat template and a
#   system prompt: mean 1,024 tokens, lognormal σ = 0.8, cap 16,384;
# - outputs: SpecForge's Qwen3.6 recipe caps thinking answers at max_tokens 32,768
#   (docs/generation-jobs.md); thinking lengths are heavy-tailed: lognormal σ = 1.0, mean 2,500.
DEFAULT_ISL = LengthDefaults(1024, 0.8, 16384)
DEFAULT_OSL = LengthDefaults(2500, 1.0, 32768)


def fixed(tokens: float) -> LengthDist:
    """A distribution where every length is ``tokens``."""
    return LengthDist(tokens, 0.0, None)


def lognormal_with_mean(mean_tokens: float, sigma: float, cap_tokens: float | None) -> LengthDist:
    """A capped lognormal whose *capped* mean is ``mean_tokens`` — what a user means by "mean
    output 2,500 tokens" when answers are cut at ``max_tokens``.

    The capped mean grows monotonically with the uncapped mean and is in closed form, so bisection
    finds the uncapped mean to 1e-9 of ``mean_tokens`` in about 35 halvings (a few microseconds
    each; ``scipy.optimize`` would add ~0.6 s of import to every ``tokenplan plan``).

    Raises:
        InputError: the mean is not below the cap.
    """
    if cap_tokens is None or sigma == 0:
        return LengthDist(mean_tokens, sigma, cap_tokens)
    if not mean_tokens < cap_tokens:
        raise InputError("mean length", mean_tokens, f"a number of tokens below the cap {cap_tokens:g}")

    def capped_mean(uncapped: float) -> float:
        return LengthDist(uncapped, sigma, cap_tokens).mean

    lo, hi = mean_tokens, 2 * mean_tokens
    while capped_mean(hi) < mean_tokens:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-9 * mean_tokens:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if capped_mean(mid) < mean_tokens else (lo, mid)
    return LengthDist(hi, sigma, cap_tokens)


def set_lengths(mean_tokens: float, sigma: float, cap_tokens: float | None) -> LengthDist:
    """The lengths of a named prompt set (``catalog/length_sets.yaml``: its ``sigma`` and
    ``cap_tokens``) around a row's stated mean: a lognormal of the set's σ, capped at the set's cap, whose *capped* mean is the row's
    mean (the run's own mean stays the mean; the set gives only the spread). A mean at or above
    the cap cannot spread below it and stays fixed."""
    if sigma == 0 or (cap_tokens is not None and mean_tokens >= cap_tokens):
        return LengthDist(mean_tokens)
    return lognormal_with_mean(mean_tokens, sigma, cap_tokens)


def stated_lengths(mean_tokens: float, low_fraction: float | None) -> LengthDist:
    """The length distribution a row states: fixed at its mean, or uniform on ``[f·L, L]`` with
    mean ``(1 + f)·L/2`` (InferenceX, ``f`` = 0.8) as a lognormal of the same mean and
    coefficient of variation ``(1 − f) / ((1 + f)·√3)`` (the uniform's sd ``(1 − f)·L/√12``
    over its mean; σ = √ln(1 + CV²)), capped at ``L``. For f = 0.8: CV 0.064, σ 0.064, and
    the running mean E[L²]/E[L] is 1.004 × the mean, as for the uniform itself."""
    if low_fraction is None or not 0 < low_fraction < 1:
        return LengthDist(mean_tokens)
    cv = (1 - low_fraction) / ((1 + low_fraction) * math.sqrt(3))
    top = 2 * mean_tokens / (1 + low_fraction)
    return LengthDist(mean_tokens, math.sqrt(math.log1p(cv * cv)), top)


def check_stated_lengths(
    name: str, mean: float, sigma: float, cap: float | None, default: LengthDefaults, *, cap_stated: bool = False
) -> None:
    """Name the option of a bad length before the distribution is built: ``name`` is ``isl`` or
    ``osl``, as the options of ``tokenplan plan`` and the keys of a job file call them (with
    ``-sigma``, and the cap ``--isl-cap`` / ``--max-tokens``); ``default``: their defaults;
    ``cap_stated``: the cap was written out (a job file's ``osl.cap``), so a cap equal to the
    default is not called the default. Raises InputError."""
    cap_option = "isl-cap" if name == "isl" else "max-tokens"
    if not 1 <= mean <= MAX_REQUEST_TOKENS:
        raise InputError(name, shown(mean), f"a number of tokens from 1 to {MAX_REQUEST_TOKENS:,}")
    if not 0 <= sigma <= MAX_SIGMA:  # the range LengthDist takes, named as the option
        raise InputError(f"{name}-sigma", shown(sigma), f"a lognormal σ from 0 to {MAX_SIGMA:g}")
    if cap is not None and not cap > mean:
        if cap == default.cap and not cap_stated:  # the user raised the mean, not the cap
            raise InputError(
                name,
                shown(mean),
                f"a mean below --{cap_option} {cap:g} (its default; raise "
                f"--{cap_option} for longer {'prompts' if name == 'isl' else 'outputs'})",
            )
        raise InputError(cap_option, shown(cap), f"a number of tokens above the mean {mean:g}")
    if cap is not None and not cap <= MAX_REQUEST_TOKENS:  # 1e30, inf: no request holds that many
        raise InputError(
            cap_option,
            shown(cap),
            f"a number of tokens above the mean {mean:g} and at most "
            f"{MAX_REQUEST_TOKENS:,} (2^24, above any model's context)",
        )


@functools.lru_cache(maxsize=64)  # the same for every configuration of a plan: 0.4 ms each
def past_context(isl: LengthDist, osl: LengthDist, context_tokens: float) -> tuple[float, float]:
    """(share of requests whose prompt and answer together pass ``context_tokens``, share of the
    output tokens those cannot get): an engine refuses a prompt longer than its context and stops
    an answer at the context (``generate`` asks each request for at most the context less its
    prompt), so such a job yields fewer tokens than ``osl`` counts.

    ``P(I + O > c) = E_I[P(O > c − I)]`` and the tokens cut ``E_I[E[max(O − (c − I), 0)]]``
    (all of ``O`` where ``I ≥ c``), over the ISL's equal-probability quantiles
    (:attr:`LengthDist.quantiles`); ``O``'s terms in closed form (:meth:`LengthDist.capped_moment`).
    Returns (0, 0) where nothing passes. Raises nothing.
    """
    share = lost = 0.0
    for prompt in isl.quantiles:
        room = context_tokens - prompt
        if room <= 0:
            share, lost = share + 1.0, lost + osl.mean
            continue
        share += osl._exceeds(room)
        lost += osl.mean - osl.capped_moment(1, room)
    n = len(isl.quantiles)
    return share / n, lost / n / osl.mean
