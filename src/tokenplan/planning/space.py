"""The candidates of one hardware option: layout × weight dtype × KV dtype × speculative
decoding × running-request cap (the engine's default, or raised with a flag)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tokenplan.arch.spec import ModelSpec
from tokenplan.hardware import Gpu
from tokenplan.job.evaluate import Config
from tokenplan.perf.engine import EngineFacts
from tokenplan.perf.layout import Layout
from tokenplan.perf.speculative import SpecDecode
from tokenplan.units import Dtype


@dataclass(frozen=True, slots=True)
class HardwareOption:
    """GPUs one may rent: ``count`` × ``gpu`` at ``usd_per_gpu_hour`` (None = unknown)."""

    gpu: Gpu
    count: int
    usd_per_gpu_hour: float | None

    @property
    def label(self) -> str:
        """``8× b200``."""
        return f"{self.count}× {self.gpu.key}"


def widest_tp(option: HardwareOption) -> int:
    """The largest TP group an option allows: all its GPUs, within one scale-up domain."""
    return _powers_of_two_up_to(min(option.count, option.gpu.max_gpus_per_scaleup))[-1]


def _powers_of_two_up_to(n: int) -> list[int]:
    out, p = [], 1
    while p <= n:
        out.append(p)
        p *= 2
    return out


def layouts(model: ModelSpec, gpu: Gpu, count: int) -> list[Layout]:
    """TP × PP × DP splits of ``count`` GPUs (TP within one scale-up domain), with EP and
    attention-DP variants for MoE models. Invalid splits are kept: the evaluation rejects them
    with a reason."""
    out: list[Layout] = []
    for tp in _powers_of_two_up_to(min(count, gpu.max_gpus_per_scaleup)):
        for pp in _powers_of_two_up_to(count // tp):
            if count % (tp * pp):
                continue
            dp = count // (tp * pp)
            out.append(Layout(tp=tp, pp=pp, dp=dp))
            if model.moe is not None and tp * pp > 1:
                out.append(Layout(tp=tp, pp=pp, ep=tp * pp, dp=dp))
                if pp == 1:
                    out.append(Layout(tp=tp, pp=1, ep=tp, dp=dp, attention_dp=True))
    return out


def weight_dtypes(model: ModelSpec, gpu: Gpu, allowed: tuple[Dtype, ...] | None) -> list[Dtype]:
    """BF16, FP8 (near-lossless), the model's own release format — and 4-bit formats the chip
    runs natively only when asked for: they change the outputs a drafter or student learns from."""
    native = Dtype(model.native_weight_dtype)
    if native is not Dtype.BF16 and not allowed:
        # A model released quantized (gpt-oss MXFP4, DeepSeek FP8) is served as released:
        # re-quantizing it to another format changes its outputs and no recipe does it.
        return [native]
    wanted = [Dtype.BF16, Dtype.FP8] + ([Dtype.NVFP4, Dtype.MXFP4] if allowed else [])
    out = [d for d in wanted if d is Dtype.BF16 or gpu.runs_natively(d)]
    if native not in out:
        out.append(native)
    if allowed is not None:
        out = [d for d in out if d in allowed]
    return out


def kv_dtypes(gpu: Gpu, allowed: tuple[Dtype, ...] | None) -> list[Dtype]:
    """BF16 and, where the chip runs FP8, an FP8 KV cache."""
    out = [Dtype.BF16] + ([Dtype.FP8] if gpu.runs_natively(Dtype.FP8) else [])
    return [d for d in out if allowed is None or d in allowed]


def candidates(model: ModelSpec, option: HardwareOption, engine: EngineFacts, specs: list[SpecDecode | None],
               weight_allowed: tuple[Dtype, ...] | None, kv_allowed: tuple[Dtype, ...] | None,
               vision_cut: float) -> Iterator[Config]:
    """Every configuration of one option. Where the engine caps running requests by default
    (SGLang: 48 with speculative decoding; hybrid models: state slots ÷ 5), a second candidate
    lifts the cap — the plan then prints the flags it needs.

    Args:
        model: the model. option: the GPUs (type and count). engine: the engine's facts.
        specs: speculative settings to try (None = off).
        weight_allowed, kv_allowed: the weight and KV dtypes to consider (None = every one the
            GPU runs).
        vision_cut: SGLang's memory multiplier for multimodal checkpoints (1 = none).

    Returns:
        An iterator of Config, lazily (layouts × weight dtypes × KV dtypes × specs, plus the
        cap-lifted twins); feasibility is judged later by ``job.evaluate``. Raises nothing.
    """
    for layout in layouts(model, option.gpu, option.count):
        for w in weight_dtypes(model, option.gpu, weight_allowed):
            for kv in kv_dtypes(option.gpu, kv_allowed):
                for spec in specs:
                    yield Config(layout, w, kv, engine, spec, vision_cut=vision_cut)
                    caps_by_default = (spec is not None and engine.spec_max_running_default is not None) or (
                        model.is_hybrid and engine.state_to_kv_memory_ratio is not None)
                    if caps_by_default:
                        yield Config(layout, w, kv, engine, spec, vision_cut=vision_cut, lift_running_cap=True)
