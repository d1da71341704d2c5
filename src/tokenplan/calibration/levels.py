"""The factor hierarchy the fit works on: which efficiency factors each level may move, which
rows inform each, how a case's factors merge from the levels, and the table a set of fitted
values makes.

Levels: ``default`` (every row), the engine (``sglang``), and for :data:`SILICON_FACTORS` the
silicon level ``*/architecture``, a ratio to the engine's value shared by every engine on that
architecture, under the vendor level ``*:amd`` (the ratio a chip no row measured takes; NVIDIA's
CUDA stack is the reference, ratio 1). A factor is fitted at a level only where rows of at
least :data:`MIN_MODELS` models inform it there (:func:`informing_models`), each pulled toward
its parent (default → engine; vendor → architecture) by the fit's prior, so a level with few
rows stays near its parent. Fitted values are optimised in log space (:func:`x_of`,
:func:`value_of`, :func:`bounds_x`). The engine × architecture group (``sglang/hopper``) is
still a key of the table and of the merge (a calibration update profile may set it), but the
fit moves no factor there.
"""

from __future__ import annotations

import math
from collections.abc import Container

from tokenplan.calibration.validate import Case
from tokenplan.hardware import ARCHITECTURE_VENDOR
from tokenplan.perf.efficiency import (
    EFFICIENCY_BOUNDS,
    EFFICIENCY_FIELDS,
    GEMM_KERNEL_FACTORS,
    KERNEL_FACTOR_OF_CURVE,
    Efficiency,
    EfficiencyTable,
)
from tokenplan.perf.gemm import curve_for
from tokenplan.units import Dtype

# Which factors each level may move (issue 28: at most 60 fitted factors, each named for the
# physics it stands for, each informed by rows of at least two models). The default level holds
# every factor. The engine level holds what the engine's software sets: its step and
# per-sequence CPU overhead, its TTFT path (HTTP, admission, how it mixes prefills into decode
# steps), and the kernels it picks, one GEMM kernel factor per number format
# (``perf.efficiency.KERNEL_FACTOR_OF_CURVE``: BF16, FP8, FP4) and the grouped expert GEMM.
# What the silicon sets for every engine alike — achievable HBM and KV-read bandwidth, the
# per-layer launch latency — sits at the architecture and vendor levels below (ratios).
# The engine-level layer and MoE-layer latencies were tried too: fitted, they stayed within 5 %
# of the default's (4.7–4.9e-5 s, 3.1–3.2e-5 s), so the data do not tell the engines apart
# there and they are left to the default and the silicon ratio.
# Before issue 28 each engine × architecture group also had up to nine factors of its own
# (130 in all); the engine × architecture gemm_kernel_factor then fitted SGLang on Blackwell to
# 0.415, a dense FP8 matmul at ~24 % of peak, standing in for a running batch the model took
# 1.2–1.7× too large. There is no engine × architecture level any more: an engine's kernels
# differ per silicon through the format (Blackwell's rows are FP4 and FP8, Hopper's FP8 and
# BF16), and each kernel factor is bounded to 0.7–1.3 of the measured tables.
DEFAULT_FACTORS = EFFICIENCY_FIELDS
ENGINE_FACTORS = (
    "step_overhead_s",
    "per_sequence_overhead_s",
    "ttft_overhead_s",
    "prefill_wave_fraction",
    *GEMM_KERNEL_FACTORS,
    "moe_kernel_factor",
)
ARCH_FACTORS: tuple[str, ...] = ()
# What the silicon sets for every engine alike: the share of HBM bandwidth a streaming kernel
# and a paged KV read reach, and the per-layer launch latency (HIP graph replays cost more
# than CUDA graph ones). These get the level ``*/architecture``: a ratio to the engine's
# value, shared by every engine on that architecture (MI300X's ROCm kernels reach a smaller
# share of its 5.3 TB/s than Hopper's CUDA ones of theirs). Above the architectures sits the
# vendor (``*:amd``, ``*:nvidia``): the software stack (ROCm and HIP graphs, CUDA and CUDA
# graphs) that every chip of the vendor shares. An architecture's ratio is pulled toward its
# vendor's, and a chip no row measured takes the vendor's ratio: with MI300X held out, the
# MI355X rows still tell the fit that ROCm kernels reach a smaller share of HBM.
# The FP8/FP4 kernel maturity of a chip without measured GEMM tables (``lowprec_fraction``:
# hipBLASLt's FP8 on MI300X against MI355X's) is the silicon's too; it is fitted only on the
# architectures whose rows run the fallback curve (levels.informed_factors).
SILICON_FACTORS = ("hbm_fraction", "attention_fraction", "layer_latency_s", "lowprec_fraction")
# The vendor whose software stack the default and engine values describe (the defaults' sources
# are CUDA profiles, and most rows run on NVIDIA GPUs): its ratio is 1 by definition, not a
# fitted factor (fitted, it was a second copy of the default level: 1.10, 1.08, 0.91 against
# Hopper's own 1.12, 1.12, 0.91). A NVIDIA chip no row measured takes the engine's values.
REFERENCE_VENDOR = "*:nvidia"
# A ratio of 1/4 to 4: the widest spread of any one of these factors between two chips an engine
# runs on stays inside its own bounds (EFFICIENCY_BOUNDS: hbm 0.3–0.95 is a factor of ~3).
SILICON_RATIO_BOUNDS = (0.25, 4.0)
# A factor is fitted at a level only where rows of at least this many models inform it there
# (issue 28: SGLang-on-MI300X's eight factors rested on DeepSeek-R1 rows alone, so they held
# that model's errors, not the silicon's).
MIN_MODELS = 2
# The factors every row's prediction reads, whatever its format, model or metric.
_ALWAYS = ("hbm_fraction", "attention_fraction", "gemm_fraction", "step_overhead_s", "per_sequence_overhead_s")
_MOE = ("moe_kernel_factor", "moe_layer_latency_s", "per_token_moe_layer_s")


def case_levels(case: Case | _Dummy) -> tuple[str, str, str]:
    return "default", case.engine, case.group


def silicon_level(group: str) -> str:
    """The silicon level of an ``engine/architecture`` group: ``*/architecture``."""
    return "*/" + group.split("/", 1)[1]


def _vendor_of(arch: str) -> str:
    """``*:nvidia`` or ``*:amd``: the vendor level of an architecture (the software stack, CUDA
    or ROCm, that every chip of the vendor shares)."""
    return "*:" + ARCHITECTURE_VENDOR.get(arch, arch)


def vendor_level(group: str) -> str:
    """The vendor level of an ``engine/architecture`` group (see :func:`_vendor_of`)."""
    return _vendor_of(group.split("/", 1)[1])


def is_ratio_level(level: str) -> bool:
    """Whether ``level`` holds ratios (silicon ``*/architecture`` or vendor ``*:vendor``)."""
    return level.startswith("*")


def silicon_key(group: str, name: str, fitted: Container[tuple[str, str]]) -> tuple[str, str] | None:
    """The ratio that scales factor ``name`` of ``group``: the architecture's where it is in
    ``fitted`` (a container of ``(level, factor)``), else the vendor's, else None."""
    for level in (silicon_level(group), vendor_level(group)):
        if (level, name) in fitted:
            return (level, name)
    return None


def ratio_parent_key(level: str, name: str, fitted: Container[tuple[str, str]]) -> tuple[str, str] | None:
    """The prior parent of a ratio level's factor: an architecture's ratio is pulled toward its
    vendor's (when fitted), a vendor's toward 1 (None)."""
    if level.startswith("*/"):
        key = (_vendor_of(level[2:]), name)
        return key if key in fitted else None
    return None


def all_levels(case: Case) -> tuple[str, ...]:
    return (*case_levels(case), silicon_level(case.group), vendor_level(case.group))


def informed_factors(case: Case) -> frozenset[str]:
    """The factors the case's prediction depends on (a row informs only these): the GEMM kernel
    factor of the format its GEMMs run on a measured curve (``perf.gemm.curve_for``), else the
    fitted saturating form's factors; the dequantization factor for a weight-only format; the
    MoE factors for an MoE model; the TTFT factors where TTFT is measured; layer latency except
    on rows whose only figure is a throughput at full batch (where it is a share of a long step,
    still read)."""
    w, gpu = case.config.weight_dtype, case.gpu
    weight_only = w is Dtype.W4A16 or not gpu.runs_natively(w)
    out = set(_ALWAYS) | {"layer_latency_s", "comm_fraction"}
    curve = curve_for(gpu.gemm_curves, w, weight_only)
    if curve is not None:
        out.add(KERNEL_FACTOR_OF_CURVE[curve.fmt])
    else:
        out.add("gemm_half_tokens")
        if not weight_only and w.flops_class != "bf16":
            out.add("lowprec_fraction")
    if weight_only:
        out.add("dequant_fraction")
    if case.model.moe is not None:
        out.update(_MOE)
    if case.measurement.ttft_s is not None:
        out.update(("ttft_overhead_s", "prefill_wave_fraction"))
    return frozenset(out)


def _level_factors(level: str) -> tuple[str, ...]:
    if level == "default":
        return DEFAULT_FACTORS
    if level == REFERENCE_VENDOR:
        return ()
    if is_ratio_level(level):
        return SILICON_FACTORS
    return ENGINE_FACTORS if "/" not in level else ARCH_FACTORS


def informing_models(cases: list[Case]) -> dict[tuple[str, str], tuple[set[str], int]]:
    """(level, factor) → (models, rows) of the cases that inform the factor at the level, for
    every level a case belongs to (:func:`all_levels`) and factor the level may move."""
    out: dict[tuple[str, str], tuple[set[str], int]] = {}
    for c in cases:
        read = informed_factors(c)
        for level in all_levels(c):
            for name in _level_factors(level):
                if name in read:
                    models, n = out.get((level, name), (set(), 0))
                    models.add(c.measurement.model)
                    out[(level, name)] = (models, n + 1)
    return out


def parameters(cases: list[Case], min_rows: int, held: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(level, factor) pairs the data supports: the default factors, then each engine's,
    architecture's and vendor's (silicon ratios), each where at least ``min_rows`` rows of at
    least :data:`MIN_MODELS` models inform it (:func:`informed_factors`; the default level
    needs the models only), less the factors in ``held``. A factor no row informs has nothing to
    fit and would only cost Jacobian columns."""
    support = informing_models(cases)
    order = sorted({level for level, _ in support}, key=lambda lv: (lv != "default", is_ratio_level(lv), lv))
    params = []
    for level in order:
        for name in _level_factors(level):
            models, n = support.get((level, name), (set(), 0))
            if name in held or len(models) < MIN_MODELS or (level != "default" and n < min_rows):
                continue
            params.append((level, name))
    return params


def _to_x(name: str, value: float) -> float:
    # Optimise in log space (fractions, token counts and times are all positive scales);
    # per-sequence overhead may be 0, so it is offset by 1 µs.
    return math.log(value + (1e-6 if name == "per_sequence_overhead_s" else 0.0))


def _from_x(name: str, x: float) -> float:
    return math.exp(x) - (1e-6 if name == "per_sequence_overhead_s" else 0.0)


def x_of(level: str, name: str, value: float) -> float:
    """The optimiser's coordinate of a factor value or ratio (natural log; see ``_to_x``)."""
    return math.log(value) if is_ratio_level(level) else _to_x(name, value)


def value_of(level: str, name: str, x: float) -> float:
    """The factor value or ratio at the optimiser's coordinate ``x`` (inverse of :func:`x_of`)."""
    return math.exp(x) if is_ratio_level(level) else _from_x(name, x)


def bounds_x(level: str, name: str) -> tuple[float, float]:
    """The optimiser's bounds of a factor (``EFFICIENCY_BOUNDS``) or ratio (``SILICON_RATIO_BOUNDS``)."""
    lo, hi = SILICON_RATIO_BOUNDS if is_ratio_level(level) else EFFICIENCY_BOUNDS[name]
    return x_of(level, name, lo), x_of(level, name, hi)


def efficiency_for(values: dict[tuple[str, str], float], case: Case | _Dummy, base: Efficiency) -> Efficiency:
    """The case's factors: ``base``, overridden by the default and engine fits, the silicon
    factors scaled by the ``*/architecture`` ratio, else the vendor's (kept inside
    ``EFFICIENCY_BOUNDS``), then overridden by the engine/arch fit."""
    default, engine, group = case_levels(case)
    merged = base.as_dict()
    for level in (default, engine):
        merged.update({name: values[(level, name)] for name in EFFICIENCY_FIELDS if (level, name) in values})
    for name in SILICON_FACTORS:
        key = silicon_key(group, name, values)
        if key is not None:
            lo, hi = EFFICIENCY_BOUNDS[name]
            merged[name] = min(max(merged[name] * values[key], lo), hi)
    merged.update({name: values[(group, name)] for name in EFFICIENCY_FIELDS if (group, name) in values})
    return Efficiency(**merged)


def table_from_values(
    values: dict[tuple[str, str], float], cases: list[Case], base: Efficiency, provenance: str = ""
) -> EfficiencyTable:
    """An EfficiencyTable: the fitted default, and one merged group per engine and per
    engine/architecture seen in ``cases``, plus every engine seen on every architecture with a
    fitted silicon or vendor ratio (``*/architecture``, ``*:vendor``), so that an engine never
    measured on a chip starts from what the chip (or, for a chip never measured, its vendor's
    software stack) does to the engines that were."""
    default = efficiency_for({k: v for k, v in values.items() if k[0] == "default"}, _Dummy(), base)
    groups: dict[str, Efficiency] = {}
    for c in cases:
        groups.setdefault(c.engine, efficiency_for(values, _Dummy(c.engine), base))
        groups.setdefault(c.group, efficiency_for(values, c, base))
    ratios = {level for level, _ in values if is_ratio_level(level)}
    architectures = [a for a in ARCHITECTURE_VENDOR if {"*/" + a, _vendor_of(a)} & ratios]
    for engine in sorted({c.engine for c in cases}):
        for arch in architectures:
            group = f"{engine}/{arch}"
            groups.setdefault(group, efficiency_for(values, _Dummy(engine, group), base))
    return EfficiencyTable(default, groups, provenance)


class _Dummy:
    """Stand-in with the two level names ``efficiency_for`` reads."""

    def __init__(self, engine: str = "", group: str = ""):
        self.engine, self.group = engine or "-", group or "-/-"
