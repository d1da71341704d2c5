"""Hardware as values: a GPU, its links, and the dtypes its tensor cores run natively.

No performance logic lives here: these are the datasheet figures (base SI units) that
``tokenplan.perf`` turns into step times. The catalog (``tokenplan/catalog/gpus.yaml``) gives
every figure with its source; this module only holds them.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from enum import StrEnum

from tokenplan.units import Dtype


class LinkKind(StrEnum):
    """How GPUs of one node talk to each other."""

    NVSWITCH = "nvswitch"  # NVLink through NVSwitch: every pair at full per-GPU bandwidth
    NVLINK_BRIDGE = "nvlink_bridge"  # NVLink bridge between pairs only (H100 NVL/PCIe)
    IF_MESH = "if_mesh"  # AMD Infinity Fabric direct mesh (7 links to 7 peers)
    PCIE = "pcie"  # no scale-up fabric: peer traffic over PCIe (and the host)


@dataclass(frozen=True, slots=True)
class Link:
    """A GPU-to-GPU (or GPU-to-host) link.

    Attributes:
        kind: the fabric kind.
        name: human name (e.g. ``"NVLink 5"``).
        bytes_per_s: unidirectional bandwidth one GPU can drive into the fabric (bytes/s);
            for an IF mesh this is the sum over its links, of which a ring uses 2/7 per step.
        latency_s: per-message latency of a small collective step (seconds).
    """

    kind: LinkKind
    name: str
    bytes_per_s: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class Price:
    """A public price range per GPU-hour (US dollars) and when it was seen."""

    low_usd_per_hour: float
    high_usd_per_hour: float
    typical_usd_per_hour: float
    as_of: str
    source: str


@dataclass(frozen=True, slots=True)
class GemmCurve:
    """A measured GEMM efficiency curve: achieved / datasheet dense FLOP/s against rows M.

    Attributes:
        fmt: the GEMM format (``"bf16"``, ``"fp8_block"``, ``"fp8_tensor"``, ``"fp4"``).
        rows: M of the measured points (rows = tokens per GEMM), strictly increasing, ≥ 1.
        fraction: achieved / datasheet dense FLOP/s at each M (0 < f ≤ 1).
        bytes_per_weight: bytes of one weight element of the format, block scales included
            (2 for BF16, 1 + 4/128² for 128×128 block-scaled FP8, 0.5 + 1/16 for NVFP4).
        ridge_rows: the roofline ridge of the GPU the curve was measured on, ``M* = F·b / (2·B)``
            (datasheet FLOP/s F, ``bytes_per_weight`` b, datasheet bandwidth B): the rows at
            which a GEMM's FLOPs at peak take as long as reading its weights. Below it the
            measured points describe that GPU's weight read, not its math. A property of the
            measurement, so it does not move when a GPU's bandwidth is varied.
        source: where the points come from (``catalog/gemm_curves.json`` names the tables).
        weight_elements: N·K (elements per GPU) of the weight-size bands measured apart,
            strictly increasing (the band centres, 2^21 … 2^27); empty when only the
            all-shapes curve exists.
        fraction_by_size: one curve per weight-size band, at ``rows``.
    """

    fmt: str
    rows: tuple[float, ...]
    fraction: tuple[float, ...]
    bytes_per_weight: float
    ridge_rows: float = 1.0
    source: str = ""
    weight_elements: tuple[float, ...] = ()
    fraction_by_size: tuple[tuple[float, ...], ...] = ()
    log_rows: tuple[float, ...] = field(init=False, repr=False, compare=False)
    log_sizes: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_rows", tuple(math.log(m) for m in self.rows))
        object.__setattr__(self, "log_sizes", tuple(math.log(n) for n in self.weight_elements))

    def at(self, rows: float, weight_elements: float | None = None) -> float:
        """The fraction at ``rows`` (tokens per GEMM) for a weight of ``weight_elements`` (N·K
        per GPU): linear in log M between measured points and, with sizes, linear in log N·K
        between the band curves; held at the end points outside them. ``rows`` below 1 count
        as 1. Without ``weight_elements`` (or without size bands) the all-shapes median."""
        x = math.log(max(rows, 1.0))
        if weight_elements is None or not self.log_sizes:
            return _interp(self.log_rows, self.fraction, x)
        by_size = tuple(_interp(self.log_rows, f, x) for f in self.fraction_by_size)
        return _interp(self.log_sizes, by_size, math.log(max(weight_elements, 1.0)))


def _interp(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """Piecewise-linear ``y(x)`` through the points (xs increasing), held at the end points."""
    i = bisect_right(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    w = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + w * (ys[i] - ys[i - 1])


# The vendor of each GPU architecture the catalog names (its software stack: CUDA or ROCm).
# catalog/gpus.py checks every entry's vendor against it.
ARCHITECTURE_VENDOR: dict[str, str] = {
    "ampere": "nvidia",
    "ada": "nvidia",
    "hopper": "nvidia",
    "blackwell": "nvidia",
    "blackwell-ultra": "nvidia",
    "blackwell-gb202": "nvidia",
    "cdna3": "amd",
    "cdna4": "amd",
}


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU model.

    Attributes:
        key: catalog key (``"b200"``).
        name: marketing name.
        vendor: ``"nvidia"`` or ``"amd"``.
        architecture: ``"ampere"``, ``"ada"``, ``"hopper"``, ``"blackwell"``,
            ``"blackwell-ultra"``, ``"blackwell-gb202"`` (sm_120), ``"cdna3"``, ``"cdna4"``.
        compute_capability: e.g. ``"10.0"`` (NVIDIA) or ``"gfx942"`` (AMD).
        memory_bytes: device memory the runtime can see (bytes).
        hbm_bytes_per_s: datasheet memory bandwidth (bytes/s).
        dense_flops_per_s: dense (not 2:4-sparse) tensor throughput per class
            ``bf16``/``fp8``/``fp4`` (FLOP/s); a class the chip lacks is absent.
        native_dtypes: formats whose GEMMs run on the tensor cores as themselves.
        scaleup: the GPU-to-GPU link inside a node.
        host_link: the link to host memory (PCIe, or NVLink-C2C on Grace).
        max_gpus_per_scaleup: GPUs one scale-up domain holds (8 on HGX, 72 on NVL72).
        price: public price range, or ``None`` where no public figure exists.
        node_gpus: GPUs rented together (1 for PCIe cards, 8 for an HGX board, 4 for a GB200
            NVL72 compute tray); provisioning counts in multiples of it.
        gemm_curves: measured GEMM efficiency curves by format (``catalog/gemm_curves.json``);
            empty for a GPU without published GEMM tables (AMD, H20, H100 PCIe/NVL, RTX 5090).
    """

    key: str
    name: str
    vendor: str
    architecture: str
    compute_capability: str
    memory_bytes: float
    hbm_bytes_per_s: float
    dense_flops_per_s: dict[str, float]
    native_dtypes: frozenset[Dtype]
    scaleup: Link
    host_link: Link
    max_gpus_per_scaleup: int
    price: Price | None = field(default=None)
    node_gpus: int = 1
    gemm_curves: tuple[GemmCurve, ...] = ()

    def gemm_curve(self, fmt: str) -> GemmCurve | None:
        """The measured GEMM curve of format ``fmt``, or None where none was measured."""
        return next((c for c in self.gemm_curves if c.fmt == fmt), None)

    def runs_natively(self, dtype: Dtype) -> bool:
        """True when the tensor cores run ``dtype`` GEMMs without dequantizing first."""
        return dtype in self.native_dtypes

    def flops_per_s(self, dtype: Dtype) -> float:
        """Dense tensor FLOP/s for GEMMs with weights in ``dtype``.

        A format without native support runs weight-only: dequantized to BF16 in the kernel
        and multiplied at the BF16 rate (what engines do for FP8 on A100 or MXFP4 on Hopper).
        """
        bf16 = self.dense_flops_per_s["bf16"]
        if dtype.compute_dtype in self.native_dtypes:
            return self.dense_flops_per_s.get(dtype.compute_dtype.flops_class, bf16)
        return bf16
