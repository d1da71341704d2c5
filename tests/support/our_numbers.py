"""A deployment and efficiency factors of our own round numbers, for hand-derived step times.

``ours(deployment)`` keeps the model's layers and layout but sets 4 TB/s of HBM, 1 PFLOP/s of
dense math, 8e9 dense parameters in 8e9 bytes, a 5e8-parameter lm_head in 1e9 bytes and no KV,
attention or recurrence work, so a decode step is ``9e9 B / (4e12 × hbm_fraction)`` plus the
overheads of :data:`EFF` at every batch and context the FLOPs do not reach: a synchronous engine
step, whose CPU time adds to its kernels (``cpu_overlap`` off; ``engines.overlap``).
"""

from dataclasses import replace

from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency

EFF = Efficiency(
    hbm_fraction=0.8,
    attention_fraction=0.5,
    gemm_fraction=0.5,
    gemm_half_tokens=8.0,
    lowprec_fraction=1.0,
    dequant_fraction=1.0,
    comm_fraction=0.5,
    step_overhead_s=1e-3,
    per_sequence_overhead_s=0.0,
    ttft_overhead_s=0.05,
    prefill_wave_fraction=0.5,
    layer_latency_s=0.0,
    moe_layer_latency_s=0.0,
    per_token_moe_layer_s=0.0,
)


def ours(d: Deployment) -> Deployment:
    """``d`` with our round numbers (module docstring); no measured GEMM curve."""
    return replace(
        d,
        gpu=replace(d.gpu, hbm_bytes_per_s=4e12, gemm_curves=()),
        memory=replace(d.memory, kv_bytes_per_token_per_gpu=0.0, sliding_bytes_per_token_per_gpu=0.0),
        dense_params=8e9,
        dense_bytes=8e9,
        lm_head_params=5e8,
        lm_head_bytes=1e9,
        gemm_flops_per_s=1e15,
        attn_flops_per_s=1e15,
        attn_flops_per_token_ctx=0.0,
        attn_prefill_flops_per_token_ctx=0.0,
        gdn_flops_per_token=0.0,
        lowprec=False,
        weight_only=False,
        cpu_overlap=False,
    )
