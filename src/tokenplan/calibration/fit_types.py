"""The fit's settings and results: :class:`FitOptions` (every knob with the reason for its
value), :class:`FittedFactor` and :class:`FitResult` (see :mod:`tokenplan.calibration.fit`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenplan.perf.efficiency import EfficiencyTable


@dataclass(frozen=True, slots=True)
class FitOptions:
    """Fit settings, each with the reason for its value.

    Attributes:
        min_rows: rows that inform a factor at an engine, architecture or vendor level before it
            is fitted there (50, of at least two models: ``levels.MIN_MODELS``). At 25 the
            engine-level BF16 kernel factors of SGLang (28 rows) and TRT-LLM (47) and the B300
            silicon ratios (34 rows) were fitted, and took 5 of the 60 factors the issue allows
            while moving the medians by under 0.3 points; at 50 they take their parents'.
        prior_sigma: width (log) of the prior pulling a group's factor toward its parent (0.5:
            a group may differ from its parent by ~1.6× before the prior costs as much as one
            row at the 20 % inlier scale).
        default_prior_scale: weight of the prior that pulls the *default* level toward the
            documented physical defaults, relative to a group's prior (0.3: the default is fitted
            on every row, so the data should win; the prior only keeps factors no row touches
            near their documented value).
        trust_weight: residual weight per ``trust`` value of a row (``dev.csv`` README: high =
            vendor tables and MLPerf, medium, low = single third-party runs "weigh them less").
            1.0 / 0.7 / 0.4 give a low-trust row the pull of ~0.4² = 1/6 of a high-trust one in
            the squared loss. Rows are validated on read, so every trust here is known.
        prior_acceptance_weight: residual weight of a row run with speculative decoding whose
            acceptance length it does not state, so that τ comes from the prior
            (``perf/speculative.py``): 0, i.e. such a row is predicted and validated like any
            other but does not move the factors. Its decode rate is τ × (one verify step), and
            τ is unknown for it: the prior's own sources span p = 0.65 (Qwen3.8-27B MTP,
            teacher-forced, pooled over four domains: tenstorrent/vllm#442) to 0.87 (vLLM on
            Qwen3.6-27B) per draft position, τ at k = 3 from 2.3 to 3.3 (1 + p + p² + p³), and InferenceX drafts on
            random-token prompts with ``--ignore-eos``, where no acceptance is published. A
            τ-scaled row cannot tell a wrong τ from a wrong GEMM or bandwidth factor, so fitting
            on it lets the prior's error into factors every other row shares (with weight 1 the
            InferenceX SGLang DeepSeek-R1 MTP rows, still 30–36 % too fast, pinned SGLang's
            Blackwell ``gemm_kernel_factor`` at its 0.25 bound; weights 0.71 and 0.4 left it at
            0.26 and 0.30).
        ttft_weight: weight of a serving row's TTFT residual next to its TPOT residual (0.8):
            TTFT at a fixed concurrency carries queueing noise the model only approximates
            (arrival waves), so TPOT, the cleaner step-time measurement, leads.
        max_nfev: function-evaluation budget of the optimiser (60). Each evaluation also
            costs one finite-difference Jacobian, i.e. every fit row predicted once per
            parameter, so the budget bounds the run time. The dev-set fit meets ``ftol`` in
            well under 30 evaluations; 60 leaves room for other data without letting a fit
            that does not converge run for long, and :attr:`FitResult.converged`/``status``
            say which it was.
        loss, f_scale: robust loss and its inlier scale (log error 0.2: errors beyond ~20 %
            count linearly, so a few rows the model cannot describe do not drag every factor).
        ftol: relative change of the robust cost below which the optimiser stops (1e-4). On
            the dev set the cost falls from 17.8 to 13.48 in seven evaluations, then by under
            0.003 % per step while the factors move by < 0.2 % in all (step norm in log
            space), far inside their ±1σ of 5–15 %; scipy's default 1e-8 spends ~50 more
            evaluations (two more minutes) on those digits.
        diff_step: relative finite-difference step of the Jacobian in log space (1e-3: a
            0.1 % change of a factor moves predictions well above float noise while staying
            inside the model's piecewise regimes — batch caps and chunk sizes are steps).
        held: factors not fitted at any level but held at their documented default (the
            ``base`` of :func:`fit`), because the data do not identify them. ``comm_fraction``:
            fitted freely it ends on its physical bound (0.85, NCCL's ~80 % of NVLink line
            rate), yet holding it at its 0.70 prior moves the dev-set medians by under half a
            point — the few TP rows that push it up ask for a faster collective than NCCL's
            ring/tree (custom one-shot all-reduce, NVLS, overlap with compute), which a
            bandwidth fraction cannot stand for.
        memo: reuse a row's prediction where the factors its evaluation read are unchanged
            (:class:`~tokenplan.calibration.memo.PredictionMemo`: exact, the same residuals
            bit for bit; False evaluates every row at every point, the reference the tests
            compare it with).
    """

    min_rows: int = 50
    prior_sigma: float = 0.5
    default_prior_scale: float = 0.3
    trust_weight: tuple[tuple[str, float], ...] = (("high", 1.0), ("medium", 0.7), ("low", 0.4))
    prior_acceptance_weight: float = 0.0
    ttft_weight: float = 0.8
    max_nfev: int = 60
    loss: str = "soft_l1"
    f_scale: float = 0.2
    ftol: float = 1e-4
    diff_step: float = 1e-3
    held: tuple[str, ...] = ("comm_fraction",)
    memo: bool = True

    def weight_of_trust(self, trust: str) -> float:
        """The residual weight of a row of ``trust``.

        Raises:
            ValueError: ``trust`` has no weight (the measurement reader skips rows whose trust
                is not high, medium or low, so this is a programming error).
        """
        weights = dict(self.trust_weight)
        if trust not in weights:
            raise ValueError(f"trust {trust!r} is not one of {', '.join(weights)}")
        return weights[trust]


@dataclass(frozen=True, slots=True)
class FittedFactor:
    """One fitted factor: level (``default``, ``sglang``, ``sglang/hopper``), name, value, ±1σ
    (NaN where the value is on a bound: see ``at_bound``)."""

    level: str
    name: str
    value: float
    uncertainty: float
    at_bound: bool = False


@dataclass(frozen=True, slots=True)
class FitResult:
    """Fitted factors, the table they make, and the fit's residual statistics.

    Attributes:
        factors: every fitted factor with its uncertainty.
        table: the EfficiencyTable (``engine`` and ``engine/architecture`` groups, merged).
        n_rows: cases used. cost: final robust cost.
        converged: the optimiser met a tolerance (scipy ``status`` 1–4); False when it stopped
            on the evaluation budget (``status`` 0).
        status, message, nfev: scipy's ``least_squares`` status code, its message and the
            function evaluations used.
        at_bound: ``level.factor`` names of the factors that ended on a bound.
        held: factors held at their documented default, not fitted (``FitOptions.held``).
        x: (level, factor) → the optimiser's coordinate at the solution (log space), the exact
            warm start of a refit (``fit(start_x=...)``).
    """

    factors: tuple[FittedFactor, ...]
    table: EfficiencyTable
    n_rows: int
    cost: float
    converged: bool
    status: int = 0
    message: str = ""
    nfev: int = 0
    at_bound: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    x: dict[tuple[str, str], float] = field(default_factory=dict)
