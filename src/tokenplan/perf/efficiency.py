"""The few named, physical efficiency factors of the performance model — the only knobs that
calibration may move. Each default says where it comes from; ``tokenplan calibrate`` fits them
per engine and GPU architecture and the fitted set ships in ``catalog/efficiency.json``.

A factor multiplies a datasheet peak (bandwidth, FLOP/s, link bandwidth) or adds a time; none
is keyed on a model or a measurement row.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Efficiency factors (dimensionless fractions of peak, or seconds).

    Attributes:
        hbm_fraction: achieved / datasheet memory bandwidth for weight and state streaming.
            Default 0.80: decode GEMV kernels reach 70–85 % of datasheet bandwidth (a public
            Nsight Compute profile of 70B BF16 decode on H100 SXM measures weight loads at
            2.6–2.8 TB/s = 78–84 % of 3.35 TB/s: mikamirai.com/blog/gpu-memory-bandwidth, 2026;
            a plain device-to-device copy, the ceiling for any kernel, reaches ~92 %).
        attention_fraction: achieved / datasheet bandwidth of decode attention reading the KV
            cache (paged, many short rows). Default 0.60: FlashInfer/FlashAttention decode
            kernels report 50–75 % of peak bandwidth (FlashInfer paper, arXiv:2501.01005 §5).
        gemm_fraction: achieved / dense peak FLOP/s of large GEMMs where the GPU has no measured
            GEMM curve (see ``perf/gemm.py``), and of attention and linear-attention math
            everywhere. Default 0.70: cuBLAS/CUTLASS reach 65–80 % of dense peak on H100/B200 at
            large shapes (aiconfigurator's BF16 tables, ``catalog/gemm_curves.json``: 0.69–0.82).
        gemm_half_tokens: tokens per step at which a GEMM reaches half of ``gemm_fraction``
            (tile and wave quantization at small M), on GPUs without a measured curve. Default
            64 tokens (one 64-row tile).
        gemm_kernel_factor: the engine's BF16 GEMM speed relative to the measured BF16 curve of
            ``catalog/gemm_curves.json`` (the median over aiconfigurator's SGLang, TRT-LLM and
            vLLM tables, read at each GEMM's rows and weight size): kernel choice and launch
            overheads the tables do not see. Weight-only formats (W4A16, MXFP4 on Hopper) run the
            BF16 curve and take this factor too. Default 1.0 (the tables' kernels); fitted per
            engine. Unused on GPUs without a curve. Bounded to 0.7–1.3 (see EFFICIENCY_BOUNDS):
            it multiplies a measured kernel speed, so a fit that wants it lower is absorbing a
            batch, overhead or scheduling error that must show as such.
        fp8_kernel_factor: the same for the FP8 (128×128 block-scaled) GEMMs against the
            measured ``fp8_block`` curve: the engine's FP8 kernel (DeepGEMM, CUTLASS block-scale,
            Triton) and the per-token activation quantization it launches before each GEMM.
            Default 1.0, fitted per engine, bounded as ``gemm_kernel_factor``.
        fp4_kernel_factor: the same for NVFP4/MXFP4 GEMMs on FP4 tensor cores against the
            measured ``fp4`` curve: the FP4 kernel (CUTLASS, FlashInfer's CuTe-DSL, TRT-LLM's
            own) and the FP4 activation quantization with its swizzled block scales. Default 1.0,
            fitted per engine where at least two models' rows run FP4; bounded as
            ``gemm_kernel_factor``. A format no fit row ran on an engine takes its parent's
            value and its plan is flagged outside the measured regime (``calibration.bands``).
        moe_kernel_factor: the engine's routed-expert (grouped) GEMM speed relative to a dense GEMM
            of the same rows per expert and the same weight size (one expert's) on the same
            curve: the MoE kernel each engine picks per architecture and format (SGLang's
            Triton ``fused_moe`` or FlashInfer/CUTLASS on Blackwell, DeepGEMM's grouped FP8
            kernels, vLLM's Marlin/Triton on Hopper, TRT-LLM's CUTLASS) and the permute fused
            into it. Default 1.0; fitted per engine and engine ×
            architecture, so a slow MoE kernel no longer drags the dense ``gemm_kernel_factor``
            (and every dense model on that engine) with it. Used in compute-bound expert
            steps only; a memory-bound expert read runs at ``hbm_fraction``.
        lowprec_fraction: extra factor on FP8/FP4 GEMM FLOP/s for kernel maturity (1 = as
            mature as BF16), on GPUs without a measured curve (a measured curve holds its
            format's maturity). Default 1.0; fitted per architecture. A fit that ends at the 1.0
            bound says the data sees no maturity penalty there; ``tokenplan calibrate`` reports
            it "at bound" with no ±σ (a bound is not an estimate).
        dequant_fraction: factor on the BF16 GEMM FLOP/s where the weights are in a format the
            tensor cores do not run (MXFP4/NVFP4 on Hopper, W4A16): mixed-input kernels
            (Marlin, CUTLASS mixed-input, Triton MoE) dequantize every weight tile in the main
            loop, which costs issue slots when the GEMM is compute-bound (Marlin paper,
            arXiv:2408.11743 §5: near-peak at small batch, falling at large batch). Default 0.7;
            fitted per architecture. Memory-bound (small-batch) steps are unaffected.
        comm_fraction: achieved / datasheet link bandwidth for collectives (nccl-tests "bus
            bandwidth", which is what ``perf/comm.py``'s ring and tree formulas divide by).
            Default 0.70. NCCL's maintainers put the protocol overhead at ~20 %: on H100 NVLink
            (450 GB/s per direction) NCCL reaches ~370 GB/s bus bandwidth = 82 % (NVIDIA/nccl-tests
            issue #212), and 360 GB/s = 80 % is "exactly what we'd expect on H100" (issue #326);
            PCIe and multi-node runs reach less. nccl-tests doc/PERFORMANCE.md defines bus
            bandwidth as the figure to compare with the hardware peak.
        step_overhead_s: fixed time per engine step (scheduling, sampling, launch gaps).
            Default 2 ms (SGLang/vLLM profiles of small-batch decode with CUDA graphs).
        per_sequence_overhead_s: CPU time per running sequence per step (batch bookkeeping,
            detokenization, sampling). Default 10 µs: an engineering estimate, not a cited
            profile. Basis: per sequence and step the engine's Python scheduler updates a block
            table, gathers input ids and positions, checks stop conditions and detokenizes one
            token incrementally — a handful of interpreter-level operations of 1–3 µs each; at
            256 sequences that is ~2.6 ms, the same order as the fixed step overhead, which is
            why the engines moved this work off the GPU's critical path (vLLM V1, SGLang's
            overlap scheduler). The dev-set fit moves it to ~17 µs per engine.
        layer_latency_s: time per transformer layer per step that no roofline term holds:
            a layer runs ~10 kernels besides its GEMMs and attention (two RMSNorms, rotary,
            residual adds, activation, activation quantization, router) whose launch and tail
            cost 1–3 µs each even under CUDA graphs (a kernel's minimum duration on H100 is
            ~2 µs: NVIDIA CUDA C++ Best Practices, "kernel launch overhead"; Nsight traces of
            batch-1 decode show ~15–25 µs of such kernels per layer). Default 10 µs; fitted
            per engine. It is why a 61-layer model decodes slower at batch 1 than its weights
            alone say. It is one GQA layer's (11 kernels in SGLang's decode path); an MLA layer
            launches 15 and counts 15/11 (:mod:`tokenplan.perf.layer_kernels`).
        moe_layer_latency_s: time per MoE layer per step, on top of ``layer_latency_s``, that
            no roofline term holds: an MoE block runs ~6–8 kernels a dense FFN does not (router
            GEMM, top-k softmax, the per-expert token count and alignment, permute into expert
            order, the grouped GEMMs' activation quantization, un-permute and weighted combine;
            e.g. SGLang's ``fused_moe`` path: ``moe_align_block_size``, two ``fused_moe_kernel``
            launches, ``moe_sum``; vLLM's and TRT-LLM's CUTLASS MoE the same families), each with
            the 1–3 µs minimum duration of a kernel under CUDA graphs (NVIDIA CUDA C++ Best
            Practices, "kernel launch overhead"). Default 10 µs; fitted per engine. Before it had
            a term, the NCCL tree latency of the TP all-reduce (6 latencies at TP8) stood in for
            it: with the engines' one-shot all-reduce the held-out DeepSeek-R1 ran 25 % fast.
        per_token_moe_layer_s: GPU time per token per MoE layer for routing work that scales
            with the step's tokens (router top-k, sort by expert, permute into expert order,
            un-permute and weighted combine; with FP8, the per-token activation quantization).
            Default 0.2 µs: a permute of 8 × 7,168 BF16 values is ~115 KB per token in and out,
            ~0.05 µs at 4.8 TB/s, and the sort and scatter kernels add a few times that at
            their low occupancy. Fitted at the default level.
        ttft_overhead_s: time a request spends outside the GPU before its first token reaches
            the client (HTTP, tokenization, scheduler admission, streaming the first token).
            Default 50 ms: serving benchmarks at concurrency 1 measure TTFT 80–100 ms where the
            prefill alone takes 5–30 ms (aiconfigurator silicon samples in
            ``data/ground-truth/serving-dev.csv``). Bounded at 0.2 s (see EFFICIENCY_BOUNDS):
            what the factor stands for costs tens of milliseconds, and a fit that wants more
            is absorbing queueing the model does not describe, which must show as TTFT error
            rather than hide in a constant.
        prefill_wave_fraction: share of arrivals that come in synchronised waves rather than at
            random. A client that keeps C requests of fixed lengths in flight sends the next
            request when one ends, and requests that started together end together, so arrivals
            cluster: a request then waits behind the prefills of the others of its wave (mean
            ``(C − 1)/2`` prompts). 1 = fully synchronised (an engine that never mixes prefill
            with decode keeps the waves intact), 0 = Poisson arrivals (M/D/1 queue). Default
            0.5; fitted per engine on serving-dev.csv, whose measured TTFT grows about linearly
            with concurrency. It moves a mean TTFT; a median one only once it reaches one half
            (the median arrival is then in a wave: ``job.steady.SteadyState.median_ttft_s``).
    """

    hbm_fraction: float = 0.80
    attention_fraction: float = 0.60
    gemm_fraction: float = 0.70
    gemm_half_tokens: float = 64.0
    gemm_kernel_factor: float = 1.0
    fp8_kernel_factor: float = 1.0
    fp4_kernel_factor: float = 1.0
    moe_kernel_factor: float = 1.0
    lowprec_fraction: float = 1.0
    dequant_fraction: float = 0.7
    comm_fraction: float = 0.70
    step_overhead_s: float = 2.0e-3
    per_sequence_overhead_s: float = 10.0e-6
    layer_latency_s: float = 10.0e-6
    moe_layer_latency_s: float = 10.0e-6
    per_token_moe_layer_s: float = 0.2e-6
    ttft_overhead_s: float = 50.0e-3
    prefill_wave_fraction: float = 0.5

    def with_values(self, **values: float) -> "Efficiency":
        """A copy with some factors replaced."""
        return replace(self, **values)

    def as_dict(self) -> dict[str, float]:
        """Field name → value."""
        return asdict(self)


EFFICIENCY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Efficiency))

# The factor that scales each measured GEMM curve (``GemmCurve.fmt``): one kernel factor per
# number format, so an engine's slow FP4 path does not drag its FP8 and BF16 GEMMs with it.
KERNEL_FACTOR_OF_CURVE: dict[str, str] = {
    "bf16": "gemm_kernel_factor",
    "fp8_block": "fp8_kernel_factor",
    "fp8_tensor": "fp8_kernel_factor",
    "fp4": "fp4_kernel_factor",
}
GEMM_KERNEL_FACTORS: tuple[str, ...] = ("gemm_kernel_factor", "fp8_kernel_factor", "fp4_kernel_factor")


def kernel_factor(eff: Efficiency, curve_format: str) -> float:
    """The kernel factor of ``eff`` that scales the measured curve of ``curve_format``
    (``bf16``, ``fp8_block``, ``fp8_tensor``, ``fp4``; :data:`KERNEL_FACTOR_OF_CURVE`); dimensionless.
    Raises KeyError for another format."""
    return float(getattr(eff, KERNEL_FACTOR_OF_CURVE[curve_format]))


# Physical bounds a fit may not leave, each with the reason it is physical. A fitted factor
# that ends on one of these is listed "at bound" by ``tokenplan calibrate`` (the data asks for
# more than the hardware allows, or cannot identify the factor); its ±σ is then meaningless.
EFFICIENCY_BOUNDS: dict[str, tuple[float, float]] = {
    # ≥ 0.3: even untuned GEMV kernels stream weights at a third of peak; ≤ 0.95: a plain
    # device-to-device copy, the best any kernel can do, reaches ~92 % of datasheet HBM (ECC,
    # refresh and DRAM row switches take the rest).
    "hbm_fraction": (0.3, 0.95),
    # ≥ 0.1: paged KV gathers of 16-token pages from scattered blocks; ≤ 0.95: the HBM ceiling.
    "attention_fraction": (0.1, 0.95),
    # ≥ 0.1: skinny, badly tiled GEMMs; ≤ 0.95: cuBLAS/CUTLASS at large shapes stay below
    # ~85 % of dense peak once clocks drop under the power limit.
    "gemm_fraction": (0.1, 0.95),
    # 1 token: a GEMM at half rate from one row is the ideal; 4,096: one full prefill chunk,
    # beyond which every GEMM shape is large (tile and wave quantization are gone).
    "gemm_half_tokens": (1.0, 4096.0),
    # 0.7–1.3: a kernel factor multiplies a measured per-op kernel speed. At 512–4,096 rows the
    # fastest of the three engines' tables beats their median by at most ~20 % (H100/H200 FP8
    # block, vLLM at 2,048 rows: 0.68 against 0.57–0.58) and the slowest sits at 0.6–1.0 of it
    # (SGLang's B200 NVFP4 at 1,024 rows: 0.63), so ±30 % around the median holds every kernel
    # the tables measured plus a margin; a fit that wants more is absorbing batch, overhead or
    # scheduling error (issue 28: SGLang/Blackwell's factor at 0.415 was standing in for a
    # running batch 1.2–1.7× too large).
    "gemm_kernel_factor": (0.7, 1.3),
    "fp8_kernel_factor": (0.7, 1.3),
    "fp4_kernel_factor": (0.7, 1.3),
    # ≥ 0.25 and ≤ 1.3, as gemm_kernel_factor: a grouped GEMM runs at most as fast as the best
    # dense kernel of its rows (plus the same margin) and at least at a generic fallback's speed.
    "moe_kernel_factor": (0.25, 1.3),
    # ≥ 0.2: an immature FP4 path still runs at least as fast as BF16 (0.25 of its FP4 peak);
    # ≤ 1.0: FP8/FP4 kernels cannot beat their own datasheet peak relative to BF16.
    "lowprec_fraction": (0.2, 1.0),
    # ≥ 0.1: dequantization in the main loop costs at most ~10× the MMA issue slots;
    # ≤ 1.0: a mixed-input GEMM cannot beat the BF16 tensor-core peak it runs on.
    "dequant_fraction": (0.1, 1.0),
    # ≥ 0.05: PCIe through host bridges with small messages; ≤ 0.85: NCCL bus bandwidth
    # reaches ~80–82 % of NVLink line rate (protocol overhead ~20 %: NVIDIA/nccl-tests
    # issues #212 and #326; bus bandwidth as defined in nccl-tests doc/PERFORMANCE.md).
    "comm_fraction": (0.05, 0.85),
    # ≥ 100 µs: one CUDA-graph replay plus sampling; ≤ 50 ms: ten times the whole batch-1
    # decode step of an 8B model on an H100 (~5 ms), beyond any engine's scheduling cost.
    "step_overhead_s": (1.0e-4, 0.05),
    # ≥ 0: no CPU work per sequence (fully overlapped); ≤ 200 µs: at 256 sequences 51 ms of
    # CPU per step, more than the GPU step itself on any GPU in the catalog.
    "per_sequence_overhead_s": (0.0, 2.0e-4),
    # ≥ 0.5 µs: one kernel launch under a CUDA graph; ≤ 100 µs: ten 10-µs kernels per layer,
    # a whole batch-1 layer of a 70B model on an H100 (~0.14 ms per layer from weights alone).
    "layer_latency_s": (0.5e-6, 1.0e-4),
    # ≥ 0.5 µs: one more kernel launch under a CUDA graph; ≤ 100 µs: the MoE block's extra
    # kernels at 10 µs each, as for layer_latency_s.
    "moe_layer_latency_s": (0.5e-6, 1.0e-4),
    # ≥ 0.01 µs: the permute's bytes at full HBM bandwidth; ≤ 5 µs per token per layer: a
    # 256-token step of a 58-MoE-layer model would spend 74 ms routing, beyond any measured step.
    "per_token_moe_layer_s": (1.0e-8, 5.0e-6),
    # ≥ 1 ms: a local HTTP round trip; ≤ 0.2 s: HTTP handling (~1 ms), tokenizing an 8K-token
    # prompt with a Rust fast tokenizer (~10 ms), scheduler admission (one scheduler
    # iteration, ≤ one decode step, tens of ms) and streaming the first token (~1 ms) add up
    # to < 0.1 s; 0.2 s leaves a factor of two.
    "ttft_overhead_s": (1.0e-3, 0.2),
    # ≥ 0.02: a share of synchronised arrivals (kept off 0 for the log-space optimiser);
    # ≤ 1: every arrival in a wave.
    "prefill_wave_fraction": (0.02, 1.0),
}


def at_bound(name: str, value: float, rel_tol: float = 1e-3, abs_tol: float = 1e-9) -> bool:
    """Whether ``value`` of factor ``name`` sits on (within ``rel_tol`` of) a bound of
    :data:`EFFICIENCY_BOUNDS`."""
    return any(math.isclose(value, b, rel_tol=rel_tol, abs_tol=abs_tol) for b in EFFICIENCY_BOUNDS[name])


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
