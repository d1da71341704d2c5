"""The candidates of one hardware option: layout × weight dtype × KV dtype × speculative
decoding × running-request cap (the engine's default, or raised with a flag; or the layout
and cap the user fixed, :class:`Fixed`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import Engine
from tokenplan.engines.launch import MaxRunning
from tokenplan.errors import InputError, shown
from tokenplan.hardware import Gpu
from tokenplan.job.evaluate import Config
from tokenplan.job.graphs import graph_running_cap
from tokenplan.perf.layout import Layout, layout_rejection
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


def tp_is(n: int) -> Callable[[Config], bool]:
    """The predicate "the configuration's TP is ``n``" (for ``search.best_with``)."""
    return lambda c: c.layout.tp == n


@dataclass(frozen=True, slots=True)
class Fixed:
    """What the user fixed instead of searching (``plan --tp/--pp/--dp/--ep/--max-running``; None =
    searched): TP, DP (replicas), EP and PP (pipeline stages) of the layout, and the engine's running-request cap per
    replica (``max_running``: every candidate launches with it; where reaching it takes the
    cap-lifting flags, SGLang's ``--disable-radix-cache`` on a hybrid model, the candidate is tried
    with and without them, as :func:`candidates` does for the engine's own cap)."""

    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    max_running: int | None = None
    pp: int | None = None

    def parts(self) -> tuple[tuple[str, int | None], ...]:
        """The layout's parts as fixed, in the order a layout is named (TP, PP, DP, EP)."""
        return (("tp", self.tp), ("pp", self.pp), ("dp", self.dp), ("ep", self.ep))

    def admits(self, layout: Layout) -> bool:
        """Whether ``layout`` has every fixed TP, PP, DP and EP."""
        return all(v is None or getattr(layout, k) == v for k, v in self.parts())

    def describe(self) -> str:
        """``TP8 × DP1`` (the fixed parts of the layout; empty when none is fixed)."""
        return " × ".join(f"{k.upper()}{v}" for k, v in self.parts() if v is not None)


SEARCH_ALL = Fixed()  # nothing fixed


def fixed_parts(
    tp: int | None, dp: int | None, ep: int | None, max_running: int | None, pp: int | None = None
) -> Fixed:
    """``plan --tp/--pp/--dp/--ep/--max-running`` as the search takes them (``planning.space.Fixed``;
    None = searched). Raises InputError (one line naming the option) for a value that is not a
    whole number ≥ 1."""
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("max-running", max_running)):
        if value is not None and (isinstance(value, bool) or not 1 <= value < math.inf or value != int(value)):
            raise InputError(
                name,
                shown(value),
                "an integer ≥ 1" + (", running requests per replica" if name == "max-running" else ""),
            )
    tp, dp, ep, max_running, pp = (None if v is None else int(v) for v in (tp, dp, ep, max_running, pp))
    return Fixed(tp, dp, ep, max_running, pp)


def widest_tp(option: HardwareOption) -> int:
    """The largest TP group an option allows: a power of two that divides its GPUs, within one
    scale-up domain (1 when no wider group divides the count, e.g. 7 GPUs)."""
    return max(
        tp for tp in _powers_of_two_up_to(min(option.count, option.gpu.max_gpus_per_scaleup)) if option.count % tp == 0
    )


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
            # EP splits the experts over one pipeline stage's TP ranks (layout_rejection): EP = TP
            if model.moe is not None and tp > 1:
                out.append(Layout(tp=tp, pp=pp, ep=tp, dp=dp))
                if pp == 1:
                    out.append(Layout(tp=tp, pp=1, ep=tp, dp=dp, attention_dp=True))
    return out


def fixed_layout_reasons(model: ModelSpec, option: HardwareOption, fixed: Fixed) -> list[str]:
    """Why the layouts of ``option`` are not searched, one line each (the rejections of a plan's
    option): :func:`dropped_layouts` — of the fixed TP only, where TP is fixed — and, where no
    layout of the option has the fixed TP, DP and EP, why, with the values it allows."""
    dropped = dropped_layouts(option.gpu, option.count)
    if fixed.tp is not None:
        dropped = [d for d in dropped if d.startswith((f"TP{fixed.tp}:", f"TP{fixed.tp}×"))]
    if fixed.pp is not None:  # a split's own PP ("TP2×PP2: …"; PP1 unnamed); a TP past the domain drops every PP
        dropped = [d for d in dropped if "scale-up domain" in d or _split_pp(d) == fixed.pp]
    every = layouts(model, option.gpu, option.count)
    if any(fixed.admits(lay) for lay in every):
        return dropped
    domain = option.gpu.max_gpus_per_scaleup
    if fixed.tp is not None and fixed.tp > option.count:  # the plainer reason first (a new-user pass)
        why = f"TP{fixed.tp} needs {fixed.tp} GPUs; the option has {option.count}"
    elif fixed.tp is not None and fixed.tp > domain:
        why = f"TP stays within one scale-up domain ({domain} GPUs on {option.gpu.scaleup.name})"
    elif fixed.ep is not None and fixed.ep > 1 and model.moe is None:
        why = f"EP splits experts; {model.name} is dense (EP 1 only)"
    elif fixed.tp is not None and (own := layout_rejection(model, Layout(tp=fixed.tp))) is not None:
        why = own  # the model's own reason (TP3 and 4 KV heads), not the search's powers of two
    elif fixed.tp is not None and fixed.tp & (fixed.tp - 1):
        why = f"plan searches TP in powers of two (1, 2, 4, …); TP{fixed.tp} is not one (predict --tp {fixed.tp} costs it)"
    elif fixed.pp is not None and fixed.pp & (fixed.pp - 1) and option.count % fixed.pp == 0:
        why = f"plan searches PP in powers of two (1, 2, 4, …); PP{fixed.pp} is not one (predict --pp {fixed.pp} costs it)"
    else:
        kept = [lay for lay in every if fixed.tp is None or lay.tp == fixed.tp]
        allowed = (
            [
                (k, sorted({getattr(lay, k) for lay in kept}))
                for k in ("pp", "dp", "ep")
                if getattr(fixed, k) is not None
            ]
            if kept
            else [("tp", sorted({lay.tp for lay in every}))]
        )
        within = f" with TP{fixed.tp}" if kept and fixed.tp is not None else ""
        why = f"no layout of {option.count} GPUs has it; " + "; ".join(
            f"{k.upper()}{within} is one of {', '.join(map(str, v))}" for k, v in allowed
        )
    return dropped + [f"{fixed.describe()} (fixed): {why}"]


def _split_pp(dropped: str) -> int:
    """The pipeline stages of a :func:`dropped_layouts` line's split (``TP2×PP4: …`` → 4, ``TP4: …`` → 1)."""
    split = dropped.split(":", 1)[0]
    return int(split.split("×PP", 1)[1]) if "×PP" in split else 1


def dropped_layouts(gpu: Gpu, count: int) -> list[str]:
    """Why the TP × PP splits that :func:`layouts` leaves out are not searched, one line each
    with the numbers: the split does not divide the GPUs, or TP would leave the scale-up domain.
    """
    out = []
    domain = gpu.max_gpus_per_scaleup
    for tp in _powers_of_two_up_to(count):
        if tp > domain:
            out.append(
                f"TP{tp}: TP stays within one scale-up domain ({domain} GPUs on {gpu.scaleup.name}); "
                f"use PP or DP across domains"
            )
            continue
        for pp in _powers_of_two_up_to(count // tp) if count % tp == 0 else [1]:
            if count % (tp * pp):
                split = f"TP{tp}" + (f"×PP{pp}" if pp > 1 else "")
                lower, upper = count // (tp * pp) * tp * pp, (count // (tp * pp) + 1) * tp * pp
                use = f"{lower} or {upper}" if lower else f"{upper}"
                out.append(
                    f"{split}: {count} GPUs are not a multiple of {tp * pp} ({count} = "
                    f"{count // (tp * pp)}×{tp * pp} + {count % (tp * pp)}); use {use} GPUs"
                )
    return out


def weight_dtypes(model: ModelSpec, gpu: Gpu, allowed: tuple[Dtype, ...] | None) -> tuple[list[Dtype], list[str]]:
    """(weight formats to search, why others are not searched).

    Unasked: BF16, FP8 (near-lossless) where the chip runs it natively, and the model's own
    release format; 4-bit formats are searched only when named — they change the outputs a
    drafter or student learns from. A model released quantized (gpt-oss MXFP4, DeepSeek FP8) is
    served as released. Named formats (``allowed``) are all searched: the evaluation runs each
    or rejects it with its reason (NVFP4 on AMD; a non-native format runs weight-only).
    """
    native = Dtype(model.native_weight_dtype)
    if allowed:
        return list(dict.fromkeys(allowed)), []
    if native is not Dtype.BF16:
        return [native], [
            f"other weight formats: {model.name} is released in {native.value} and served as "
            f"released (name one with --weight-dtype to re-quantize)"
        ]
    notes = [
        "4-bit weights (nvfp4, mxfp4, w4a16): searched only when named (--weight-dtype nvfp4): "
        "they change the outputs a drafter or student learns from"
    ]
    out = [Dtype.BF16]
    if gpu.runs_natively(Dtype.FP8):
        out.append(Dtype.FP8)
    else:
        notes.append(
            f"fp8 weights: not native on {gpu.architecture} ({gpu.key}); searched only when named "
            "(--weight-dtype fp8: weight-only, at the BF16 compute rate)"
        )
    return out, notes


def kv_dtypes(gpu: Gpu, allowed: tuple[Dtype, ...] | None) -> tuple[list[Dtype], list[str]]:
    """(KV-cache formats to search, why others are not searched): BF16 and, where the chip runs
    FP8, an FP8 KV cache; named formats are all searched (the evaluation rejects what cannot run)."""
    if allowed:
        return list(dict.fromkeys(allowed)), []
    if gpu.runs_natively(Dtype.FP8):
        return [Dtype.BF16, Dtype.FP8], []
    return [Dtype.BF16], [
        f"fp8 KV cache: not native on {gpu.architecture} ({gpu.key}); searched only when named (--kv-dtype fp8)"
    ]


def candidates(
    model: ModelSpec,
    option: HardwareOption,
    engine: Engine,
    specs: list[SpecDecode | None],
    weight_allowed: tuple[Dtype, ...] | None,
    kv_allowed: tuple[Dtype, ...] | None,
    vision_cut: float,
    fixed: Fixed = SEARCH_ALL,
) -> Iterator[Config]:
    """Every configuration of one option. Where the engine caps running requests by default
    (SGLang: 48 with speculative decoding; hybrid models: state slots ÷ 5), a second candidate
    lifts the cap — the plan then prints the flags it needs. Where the engine's default lets a
    decode step pass its CUDA graphs at a cost (vLLM on a GDN hybrid, ``job.graphs``), a second
    candidate caps the batch inside them. A cap the user fixed is tried the
    same way where the engine's lifting flags change what it allows: a hybrid model on SGLang with
    the radix cache on runs at most state slots ÷ 5 whatever ``--max-running-requests`` says (S3),
    and with ``--disable-radix-cache`` the fixed cap itself, so both twins are evaluated and the
    faster wins, as for the engine's own cap (the plan's radix note says what the cache costs).

    Args:
        model: the model. option: the GPUs (type and count). engine: the engine.
        specs: speculative settings to try (None = off).
        weight_allowed, kv_allowed: the weight and KV dtypes to consider (None = every one the
            GPU runs).
        vision_cut: SGLang's memory multiplier for multimodal checkpoints (1 = none).
        fixed: the layouts searched are those it admits; its ``max_running`` is every
            candidate's running cap (``Config.max_running``).

    Returns:
        An iterator of Config, lazily (layouts × weight dtypes × KV dtypes × specs, plus the
        cap-lifted twins); feasibility is judged later by ``job.evaluate``. Raises nothing.
    """
    weights, _ = weight_dtypes(model, option.gpu, weight_allowed)
    kvs, _ = kv_dtypes(option.gpu, kv_allowed)
    if fixed.max_running is None:
        lifts = [engine.caps_running_by_default(spec is not None, model.is_hybrid) for spec in specs]
    else:
        lifts = [engine.disables_radix_cache(model.is_hybrid, MaxRunning(fixed.max_running, lifted=True))] * len(specs)
    for layout in layouts(model, option.gpu, option.count):
        if not fixed.admits(layout):
            continue
        # vLLM on a GDN hybrid: also the cap that keeps every decode step in its CUDA graphs (job.graphs)
        graphs = [
            None
            if fixed.max_running is not None
            else graph_running_cap(model, engine.settings(option.gpu, layout, speculative=spec is not None), spec)
            for spec in specs
        ]
        for w in weights:
            for kv in kvs:
                for spec, lift, graph in zip(specs, lifts, graphs, strict=True):
                    yield Config(
                        layout, w, kv, engine, spec, vision_cut=vision_cut, max_running=MaxRunning(fixed.max_running)
                    )
                    if graph is not None:
                        yield Config(layout, w, kv, engine, spec, vision_cut=vision_cut, max_running=MaxRunning(graph))
                    if lift:
                        yield Config(
                            layout,
                            w,
                            kv,
                            engine,
                            spec,
                            vision_cut=vision_cut,
                            max_running=MaxRunning(fixed.max_running, lifted=True),
                        )
