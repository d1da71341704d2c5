"""One measured inference point — the record that ``dev.csv`` rows, ``tokenplan bench`` and
``tokenplan generate`` runs produce and that ``validate`` / ``calibrate`` consume.

Layer 0: plain values, no I/O, no performance logic. Lengths are tokens, times seconds,
throughput tokens/s. ``None`` means "not stated".
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Measurement:
    """A measured configuration and what was measured.

    Attributes:
        line: line of the CSV file the row came from (1 = header), for messages.
        row_id: the row's id in its file.
        engine, model, gpu: short keys (engine name, catalog model and GPU keys).
        num_gpus: every GPU of the measured system.
        tp, pp, ep: parallel degrees of one replica.
        attention_dp: attention runs data-parallel across the TP ranks.
        weight_dtype, kv_dtype: number formats (``auto`` = the engine's default).
        isl_tokens, osl_tokens: input and output length (mean; None = unknown).
        concurrency: requests in flight over the whole system (None = offline ``max``).
        num_requests: requests in the whole run, where stated; equal to ``concurrency`` for a
            burst of N requests sent at once.
        spec: speculative decoding as ``none`` or ``METHOD:K`` (acceptance from the prior).
        output_tok_s_per_gpu: measured output tokens/s per GPU (throughput files).
        ttft_s, tpot_s: measured time to first token and per output token.
        latency_statistic: what ``ttft_s``/``tpot_s`` summarise over the run's requests:
            ``mean`` (serving files, ``tokenplan bench``) or ``median`` (the throughput files'
            ``ttft_ms_median``/``tpot_ms_median``).
        closed_loop: the client kept ``concurrency`` requests in flight from the start, so its
            first ``concurrency`` went out at once (request rate inf: the files' rows, ``bench``
            levels without ``--request-rate``); False: open-loop arrivals at a finite rate.
        trust: ``high``, ``medium`` or ``low``.
        length_low_fraction: lengths drawn uniformly from ``[f·L, L]`` (InferenceX: 0.8), where
            ``isl_tokens``/``osl_tokens`` hold the mean; None = fixed lengths at the mean.
        max_running: the launch's running-request cap per replica where the row states it
            (SGLang ``--max-running-requests`` in InferenceX's launch scripts); None = the
            engine's default.
        length_set: the prompt set the benchmark drew its requests from, where the row names it
            (``sharegpt`` for ``vllm bench serve --dataset-name sharegpt``): its lengths spread
            around ``isl_tokens``/``osl_tokens`` as that set's do; None = not stated.
        throughput_set_aside: why the row's measured output tok/s is not used (then
            ``output_tok_s_per_gpu`` is None and its TTFT/TPOT still are): see
            :func:`closed_loop_ratio`; None = used.
        memory_fraction: the launch's memory setting where the row states one (SGLang
            ``--mem-fraction-static``, vLLM ``--gpu-memory-utilization``); None = the engine's rule.
        scheduler_recv_interval: SGLang's ``--scheduler-recv-interval`` where the row states it
            (InferenceX's DeepSeek-R1 B200 scripts: 30 at concurrency ≥ 16, else 10); None = the
            engine's default (1: new requests are received every iteration).
        chunked_prefill_size: SGLang's ``--chunked-prefill-size`` (tokens) where the row states
            it; None = the engine's default for the GPU.
        disable_radix_cache: True where the launch passed SGLang's ``--disable-radix-cache``,
            False where the row states it did not; None = not stated (the default: on).
        ssm_dtype: SGLang's ``--mamba-ssm-dtype`` (hybrid models' recurrent state) where the row
            states it; None = the model config's ``mamba_ssm_dtype``.
        engine_version: the engine version or image the row ran, where stated (for reading;
            the planner models the current defaults).
        gpu_variant_stated: False where the source names only the GPU family (a page that says
            "H100" without SXM, PCIe or NVL): ``gpu`` is then a guess, and ``validate`` flags the
            row and widens its interval to the family's variants.
        layout_note: why the row's replica is not its layout columns as written (serving rows
            whose export squared ``--tp N --ep N``: :mod:`tokenplan.files.aic_layout`); None =
            read as written.
    """

    line: int
    row_id: str
    engine: str
    model: str
    gpu: str
    num_gpus: int
    tp: int
    pp: int
    ep: int
    attention_dp: bool
    weight_dtype: str
    kv_dtype: str
    isl_tokens: float | None
    osl_tokens: float | None
    concurrency: float | None
    num_requests: float | None = None
    spec: str = "none"
    output_tok_s_per_gpu: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    latency_statistic: str = "mean"
    closed_loop: bool = True
    trust: str = "high"
    length_low_fraction: float | None = None
    max_running: int | None = None
    length_set: str | None = None
    throughput_set_aside: str | None = None
    memory_fraction: float | None = None
    scheduler_recv_interval: int | None = None
    chunked_prefill_size: int | None = None
    disable_radix_cache: bool | None = None
    ssm_dtype: str | None = None
    engine_version: str | None = None
    gpu_variant_stated: bool = True
    layout_note: str | None = None

    @property
    def is_finite_job(self) -> bool:
        """True when the row states how many requests the run served: its throughput is that of
        a job of N requests (ramp-up, steady state and the drain tail), not of a steady state.
        This covers bursts of N requests sent at once, closed-loop clients that keep C < N in
        flight, and offline (``max``) runs over an N-request dataset."""
        return self.num_requests is not None


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A row that was not used, and why (one line)."""

    line: int
    row_id: str
    reason: str


# A closed-loop client keeps C requests in flight, so by Little's law it completes C requests per
# request latency; with that latency ≈ TTFT + OSL × TPOT its output rate is
# C × OSL / (TTFT + OSL × TPOT) over the run's GPUs. Medians stand in for means here, and the
# queueing share of TTFT makes its mean exceed its median, so consistent runs sit a little below
# 1: 0.83–1.04 in inferencex-dev.csv. A run at 0.8 or below lost a fifth of its time to something
# its own latencies do not contain (in that file: ~7.5 s per request, the same at 1K and 8K
# outputs, in 32 SGLang B200 runs of 2025-11 to 2026-01 — a per-request gap in the harness, not
# engine time); above 1.25 it produced more than its latencies allow. Both bounds are kept.
CLOSED_LOOP_RATIO_BOUNDS = (0.8, 1.25)


def closed_loop_ratio(
    output_tok_s_per_gpu: float, num_gpus: int, concurrency: float, osl_tokens: float, ttft_s: float, tpot_s: float
) -> float:
    """Measured output rate over what the run's own latencies allow a closed-loop client:
    ``output_tok_s_per_gpu × num_gpus / (concurrency × osl / (ttft + osl × tpot))`` (Little's law;
    rates in tokens/s, times in seconds, lengths in tokens). E.g. 183.1 tok/s/GPU on 8 GPUs at
    concurrency 32, OSL 922, TTFT 0.337 s, TPOT 13.18 ms: 32 × 922 / (0.337 + 12.152) = 2,362
    tok/s against 1,464.8 measured → 0.62. Inputs are > 0; where float arithmetic takes the
    allowed rate to 0 (latencies beyond float range) the ratio is ``inf``. Raises nothing."""
    allowed = concurrency * osl_tokens / (ttft_s + osl_tokens * tpot_s)
    return math.inf if allowed == 0 else output_tok_s_per_gpu * num_gpus / allowed
