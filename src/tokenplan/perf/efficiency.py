"""The few named, physical efficiency factors of the performance model — the only knobs that
calibration may move. Each default says where it comes from; ``tokenplan calibrate`` fits them
per engine and GPU architecture and the fitted set ships in ``catalog/efficiency.json``.

A factor multiplies a datasheet peak (bandwidth, FLOP/s, link bandwidth) or adds a time; none
is keyed on a model or a measurement row.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Efficiency factors (dimensionless fractions of peak, or seconds).

    Attributes:
        hbm_fraction: achieved / datasheet memory bandwidth for weight and state streaming.
            Default 0.80: decode GEMV kernels reach 70–85 % of datasheet bandwidth
            (shared/reference README; e.g. NVIDIA's H100 guidance and nvbandwidth runs).
        attention_fraction: achieved / datasheet bandwidth of decode attention reading the KV
            cache (paged, many short rows). Default 0.60: FlashInfer/FlashAttention decode
            kernels report 50–75 % of peak bandwidth (FlashInfer paper, arXiv:2501.01005 §5).
        gemm_fraction: achieved / dense peak FLOP/s of large GEMMs. Default 0.70: cuBLAS/CUTLASS
            reach 65–80 % of dense peak on H100/B200 at large shapes (NVIDIA cuBLAS benchmarks).
        gemm_half_tokens: tokens per step at which a GEMM reaches half of ``gemm_fraction``
            (tile and wave quantization at small M). Default 64 tokens (one 64-row tile).
        lowprec_fraction: extra factor on FP8/FP4 GEMM FLOP/s for kernel maturity (1 = as
            mature as BF16). Default 1.0; fitted per architecture.
        dequant_fraction: factor on the BF16 GEMM FLOP/s where the weights are in a format the
            tensor cores do not run (MXFP4/NVFP4 on Hopper, W4A16): mixed-input kernels
            (Marlin, CUTLASS mixed-input, Triton MoE) dequantize every weight tile in the main
            loop, which costs issue slots when the GEMM is compute-bound (Marlin paper,
            arXiv:2408.11743 §5: near-peak at small batch, falling at large batch). Default 0.7;
            fitted per architecture. Memory-bound (small-batch) steps are unaffected.
        comm_fraction: achieved / datasheet link bandwidth for collectives. Default 0.70
            (nccl-tests bus bandwidth on NVLink and PCIe: 65–80 % of link rate).
        step_overhead_s: fixed time per engine step (scheduling, sampling, launch gaps).
            Default 2 ms (SGLang/vLLM profiles of small-batch decode with CUDA graphs).
        per_sequence_overhead_s: CPU time per running sequence per step (batch bookkeeping,
            detokenization, sampling). Default 10 µs.
        ttft_overhead_s: time a request spends outside the GPU before its first token reaches
            the client (HTTP, tokenization, scheduler admission, streaming the first token).
            Default 50 ms: serving benchmarks at concurrency 1 measure TTFT 80–100 ms where the
            prefill alone takes 5–30 ms (aiconfigurator silicon samples in serving-dev.csv).
        prefill_wave_fraction: share of arrivals that come in synchronised waves rather than at
            random. A client that keeps C requests of fixed lengths in flight sends the next
            request when one ends, and requests that started together end together, so arrivals
            cluster: a request then waits behind the prefills of the others of its wave (mean
            ``(C − 1)/2`` prompts). 1 = fully synchronised (an engine that never mixes prefill
            with decode keeps the waves intact), 0 = Poisson arrivals (M/D/1 queue). Default
            0.5; fitted per engine on serving-dev.csv, whose measured TTFT grows about linearly
            with concurrency.
    """

    hbm_fraction: float = 0.80
    attention_fraction: float = 0.60
    gemm_fraction: float = 0.70
    gemm_half_tokens: float = 64.0
    lowprec_fraction: float = 1.0
    dequant_fraction: float = 0.7
    comm_fraction: float = 0.70
    step_overhead_s: float = 2.0e-3
    per_sequence_overhead_s: float = 10.0e-6
    ttft_overhead_s: float = 50.0e-3
    prefill_wave_fraction: float = 0.5

    def with_values(self, **values: float) -> "Efficiency":
        """A copy with some factors replaced."""
        return replace(self, **values)

    def as_dict(self) -> dict[str, float]:
        """Field name → value."""
        return asdict(self)


EFFICIENCY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Efficiency))

# Physical bounds a fit may not leave (fractions of peak stay in (0, 1]; overheads stay small).
EFFICIENCY_BOUNDS: dict[str, tuple[float, float]] = {
    "hbm_fraction": (0.3, 0.95),
    "attention_fraction": (0.1, 0.95),
    "gemm_fraction": (0.1, 0.95),
    "gemm_half_tokens": (1.0, 4096.0),
    "lowprec_fraction": (0.2, 1.0),
    "dequant_fraction": (0.1, 1.0),
    "comm_fraction": (0.05, 0.95),
    "step_overhead_s": (1.0e-4, 0.05),
    "per_sequence_overhead_s": (0.0, 2.0e-4),
    "ttft_overhead_s": (1.0e-3, 0.5),
    "prefill_wave_fraction": (0.02, 1.0),
}


@dataclass(frozen=True, slots=True)
class EfficiencyTable:
    """Efficiency per (engine, GPU architecture), falling back to per-engine, then the default.

    Attributes:
        default: factors used where nothing more specific is known.
        by_group: ``"sglang"`` or ``"sglang/blackwell"`` → factors.
        provenance: how the table was made (the fit's data set and command).
    """

    default: Efficiency
    by_group: dict[str, Efficiency]
    provenance: str = "built-in defaults (see Efficiency docstring for sources)"

    def resolve(self, engine: str, architecture: str) -> Efficiency:
        """The most specific factors for ``engine`` on ``architecture``."""
        return self.by_group.get(f"{engine}/{architecture}") or self.by_group.get(engine) or self.default


DEFAULT_TABLE = EfficiencyTable(default=Efficiency(), by_group={})
