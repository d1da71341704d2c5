"""The factor hierarchy the fit works on: which efficiency factors each level may move, how a
case's factors merge from the levels, and the table a set of fitted values makes.

Levels: ``default`` (every row), the engine (``sglang``), the engine × architecture group
(``sglang/hopper``), and for :data:`SILICON_FACTORS` the silicon level ``*/architecture``, a
ratio to the engine's value shared by every engine on that architecture, under the vendor level
``*:vendor`` (the ratio a chip no row measured takes). Fitted values are
optimised in log space (:func:`x_of`, :func:`value_of`, :func:`bounds_x`).
"""

from __future__ import annotations

import math
from collections.abc import Container

from tokenplan.calibration.validate import Case
from tokenplan.hardware import ARCHITECTURE_VENDOR
from tokenplan.perf.efficiency import EFFICIENCY_BOUNDS, EFFICIENCY_FIELDS, Efficiency, EfficiencyTable
from tokenplan.units import Dtype

# Which factors each level may move. The engine level holds what the engine's software sets
# (step overhead, per-sequence CPU, its kernels' bandwidth and GEMM efficiency); the
# engine × architecture level holds kernel maturity on that silicon.
DEFAULT_FACTORS = EFFICIENCY_FIELDS
ENGINE_FACTORS = (
    "hbm_fraction",
    "step_overhead_s",
    "per_sequence_overhead_s",
    "ttft_overhead_s",
    "prefill_wave_fraction",
    "layer_latency_s",
    "moe_layer_latency_s",
    "gemm_kernel_factor",
    "moe_kernel_factor",
)
# Achievable HBM and KV-read bandwidth and the per-layer kernel latency also depend on the
# silicon (MI300X's ROCm kernels reach a smaller share of its 5.3 TB/s than Hopper's CUDA ones
# of theirs; HIP graph launches cost more than CUDA graph ones), so they may move per
# engine × architecture as well.
# On GPUs with a measured GEMM curve (catalog/gemm_curves.json) the engine's gemm_kernel_factor
# scales it, per engine and per engine × architecture: the kernels an engine picks differ per
# silicon (DeepGEMM, CUTLASS, FlashInfer's CuTe-DSL FP4, Triton). Fitted per engine only, the
# InferenceX median rose from 13.2 % to 14.4 % (SGLang on Blackwell wants ~0.39 of the tables'
# speed, SGLang on Hopper ~0.77). Elsewhere (AMD, GPUs without tables) the fallback curve
# gemm_fraction · T/(T + gemm_half_tokens) is fitted per engine × architecture; gemm_fraction
# also sets the attention math rate. The routed experts' grouped GEMM has its own
# moe_kernel_factor at the same two levels: the MoE kernel an engine picks differs per silicon and
# format (the example: vLLM FP8 block-scale MoE runs DeepGEMM on Blackwell, Marlin/Triton
# on Hopper); sharing one factor let SGLang's DeepSeek-R1 MoE steps on B200 pull its dense GEMM
# factor to 0.35 and Qwen3.6-27B FP8 on B200 (dense) 25 % slow.
ARCH_FACTORS = (
    "gemm_kernel_factor",
    "moe_kernel_factor",
    "gemm_fraction",
    "gemm_half_tokens",
    "lowprec_fraction",
    "dequant_fraction",
    "hbm_fraction",
    "attention_fraction",
    "layer_latency_s",
)
# What the silicon sets for every engine alike: the share of HBM bandwidth a streaming kernel
# and a paged KV read reach, and the per-layer launch latency (HIP graph replays cost more
# than CUDA graph ones). These get a fourth level, ``*/architecture``: a ratio to the engine's
# value, shared by every engine on that architecture, so that an engine × architecture pair
# with too few rows for its own group starts from what the architecture does to the engines
# that were measured on it, not from the engine's CUDA-level value (vLLM has two MI300X rows;
# SGLang on MI300X reaches 0.57 of its own overall HBM fraction). A fitted engine × architecture
# group's prior parent is the engine's value times this ratio. Above the architectures sits the
# vendor (``*:amd``, ``*:nvidia``): the software stack (ROCm and HIP graphs, CUDA and CUDA
# graphs) that every chip of the vendor shares. An architecture's ratio is pulled toward its
# vendor's, and a chip no row measured takes the vendor's ratio: with MI300X held out, the
# MI355X rows still tell the fit that ROCm kernels reach a smaller share of HBM.
SILICON_FACTORS = ("hbm_fraction", "attention_fraction", "layer_latency_s")
# A ratio of 1/4 to 4: the widest spread of any one of these factors between two chips an engine
# runs on stays inside its own bounds (EFFICIENCY_BOUNDS: hbm 0.3–0.95 is a factor of ~3).
SILICON_RATIO_BOUNDS = (0.25, 4.0)


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


def parameters(cases: list[Case], min_rows: int, held: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(level, factor) pairs the data supports: default factors, then engines and
    engine/architecture groups, architectures and vendors (silicon ratios) with at least
    ``min_rows`` rows, less the factors in ``held``. A group's low-precision and
    dequantization factors are fitted only where its rows run such kernels (a factor no row
    touches has nothing to fit and would only cost Jacobian columns)."""
    counts: dict[str, int] = {}
    kernels: dict[str, set[str]] = {}
    for c in cases:
        for level in all_levels(c)[1:]:
            counts[level] = counts.get(level, 0) + 1
        kernels.setdefault(c.group, set()).update(_kernel_factors(c))
    params = [("default", f) for f in DEFAULT_FACTORS]
    for level in sorted(counts):
        if counts[level] >= min_rows:
            if is_ratio_level(level):
                params += [(level, f) for f in SILICON_FACTORS]
            elif "/" not in level:
                params += [(level, f) for f in ENGINE_FACTORS]
            else:
                params += [
                    (level, f) for f in ARCH_FACTORS if f not in _KERNEL_FACTORS or f in kernels.get(level, set())
                ]
    return [(level, f) for level, f in params if f not in held]


_KERNEL_FACTORS = ("lowprec_fraction", "dequant_fraction")


def _kernel_factors(case: Case) -> tuple[str, ...]:
    """Which format-specific GEMM factors the case's weights use (see ``perf.step._gemm_rate``)."""
    w, gpu = case.config.weight_dtype, case.gpu
    if gpu.runs_natively(w) and w.flops_class != "bf16":
        return ("lowprec_fraction",)
    if w is Dtype.W4A16 or not gpu.runs_natively(w):
        return ("dequant_fraction",)
    return ()


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
