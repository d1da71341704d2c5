"""Base units, number formats and their sizes.

Everything inside tokenplan is in base SI units — bytes, seconds, FLOP, bytes/s, FLOP/s — and
every quantity's name ends with its unit (``kv_bytes_per_token``, ``step_time_s``). Conversion
happens only when printing or when writing the ``--json`` fields the CLI promises
(``step_time_ms``).

Bytes per element of the block-scaled formats include their scales:

- NVFP4: 4-bit E2M1 values plus one FP8 (E4M3) scale per 16 values → 0.5 + 1/16 = 0.5625 bytes.
  Source: NVIDIA, "Introducing NVFP4" (developer.nvidia.com/blog/introducing-nvfp4-for-efficient-
  and-accurate-low-precision-inference, 2025).
- MXFP4 / MXFP8: OCP Microscaling spec v1.0 (opencompute.org, 2023): one E8M0 scale per 32
  values → 0.5 + 1/32 = 0.53125 and 1 + 1/32 = 1.03125 bytes.
- W4A16 (GPTQ/AWQ INT4, group size 128, one FP16 scale and one packed 4-bit zero per group):
  0.5 + (2 + 0.5)/128 = 0.51953125 bytes.
- FP8 with per-channel or per-block (128×128) scales: scale overhead below 0.01 %, counted as 1.
"""

from __future__ import annotations

import math
from enum import StrEnum

from tokenplan.errors import InputError

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024
MiB = 1024**2
GiB = 1024**3

MS_PER_S = 1e3
# The most tokens one request may hold (prompt or output: --isl-cap, --max-tokens, a plan's output
# cap): 2^24 = 16,777,216 tokens, above the longest context any catalog model or engine serves
# (10M, Llama 4 Scout's), and finite, so that deadlines, caps and costs stay finite numbers.
MAX_REQUEST_TOKENS = 2**24
# The most GPUs and requests a plan takes: about a million GPUs (ten times the largest announced
# clusters) and a trillion requests; past them a figure says more about a typo than a job.
MAX_GPUS = 2**20
MAX_SAMPLES = 10**12
# Cloud list prices for one GPU are a few to ~15 USD per hour (2025: B200 on-demand ~6–10 $/h);
# 10,000 $/h is far above any, while keeping cost arithmetic finite (1e308 used to print $inf).
MAX_PRICE_USD_PER_GPU_HOUR = 10_000
S_PER_HOUR = 3600.0
S_PER_DAY = 86400.0


class Dtype(StrEnum):
    """Number formats of weights, activations, KV cache and recurrent state."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"
    W4A16 = "w4a16"

    @property
    def bytes_per_element(self) -> float:
        """Stored bytes per element, block scales included (see the module docstring)."""
        return _BYTES_PER_ELEMENT[self]

    @property
    def compute_dtype(self) -> "Dtype":
        """The tensor-core format a GEMM with weights in this format runs at, when the chip
        supports it natively: W4A16 runs its math in 16-bit; the others run as themselves."""
        return Dtype.BF16 if self is Dtype.W4A16 else self

    @property
    def flops_class(self) -> str:
        """Which datasheet TFLOPS column this format's tensor-core math uses:
        ``bf16`` (also FP16/W4A16), ``fp8`` (also INT8, MXFP8) or ``fp4`` (NVFP4, MXFP4)."""
        return _FLOPS_CLASS[self]


_BYTES_PER_ELEMENT: dict[Dtype, float] = {
    Dtype.FP32: 4.0,
    Dtype.BF16: 2.0,
    Dtype.FP16: 2.0,
    Dtype.FP8: 1.0,
    Dtype.INT8: 1.0,
    Dtype.MXFP8: 1.0 + 1.0 / 32,
    Dtype.NVFP4: 0.5 + 1.0 / 16,
    Dtype.MXFP4: 0.5 + 1.0 / 32,
    Dtype.W4A16: 0.5 + 2.5 / 128,
}

_FLOPS_CLASS: dict[Dtype, str] = {
    Dtype.FP32: "bf16",
    Dtype.BF16: "bf16",
    Dtype.FP16: "bf16",
    Dtype.W4A16: "bf16",
    Dtype.FP8: "fp8",
    Dtype.INT8: "fp8",
    Dtype.MXFP8: "fp8",
    Dtype.NVFP4: "fp4",
    Dtype.MXFP4: "fp4",
}

# Bytes per activation element: the engines run activations, TP all-reduce payloads, PP sends,
# MoE combine and the profiling forward in the model's 16-bit compute dtype (BF16 for every
# shipped checkpoint, FP8/FP4 ones included: only weights and KV are stored low-precision).
ACTIVATION_BYTES = _BYTES_PER_ELEMENT[Dtype.BF16]

WEIGHT_DTYPES = (Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.INT8, Dtype.MXFP8, Dtype.NVFP4, Dtype.MXFP4, Dtype.W4A16)
KV_DTYPES = (Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.NVFP4)


def duration_words(seconds: float) -> str:
    """A duration as a user would say a deadline: ``2 days``, ``1 day``, ``6 h`` below a day,
    ``30 min`` below an hour, ``20 s`` below a minute (3 significant digits)."""
    days = seconds / S_PER_DAY
    if days >= 1000:  # 3 significant digits would read 1e+05
        return f"{days:,.0f} days"
    if days >= 1:
        return f"{days:.3g} day" + ("" if days == 1 else "s")
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def count_text(n: int, noun: str) -> str:
    """``n`` and the noun in the number it takes: ``1 sample``, ``21 samples``, ``1,000 rows``
    (an ``s`` plural; a new-user pass read "1 samples" and "(1 rows)")."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def kv_tokens_text(tokens: float | None) -> str:
    """A KV capacity as the tables print it: ``368,333 tokens``, or what None means (no
    full-attention layer: the cache holds no count of tokens) instead of ``inf tokens``."""
    return "none counted (no full-attention layer)" if tokens is None else f"{tokens:,.0f} tokens"


def output_tokens_text(tokens: float) -> str:
    """A job's output tokens as the plan states them: ``2.285 B`` from 100 M up, else the count
    (``52,500``), so a short job does not read ``0.000 B``."""
    return f"{tokens / 1e9:.3f} B" if tokens >= 1e8 else f"{tokens:,.0f}"


def usd_text(usd: float) -> str:
    """A cost in US dollars as the plan states it: whole dollars from $100 up (``$411``,
    ``$12,840``), cents below (``$0.16``, ``$42.50``), so a short job does not read ``$0``; under
    half a cent (a one-request job) ``<$0.01``, not ``$0.00``; from a trillion up in powers of ten
    (``$1.00e+15``), so an unbounded ``--budget 1e300`` does not print 301 digits."""
    if 0 < abs(usd) < 0.005:
        return "<$0.01"
    if abs(usd) >= 1e12:
        return f"${usd:.2e}"
    return f"${usd:,.0f}" if abs(usd) >= 100 else f"${usd:,.2f}"


def days_words(seconds: float) -> str:
    """A job's wall time as the plan states it: ``0.41 days`` (two decimals) from a tenth of a
    day up, else :func:`duration_words` (``14.9 min``), so a short job does not read ``0.00 days``."""
    days = seconds / S_PER_DAY
    return f"{days:.2f} days" if days >= 0.1 else duration_words(seconds)


def days_band_words(seconds: float, low_s: float, high_s: float) -> str:
    """The 80 % band of a wall time in the unit :func:`days_words` gives the point figure
    (``0.38–0.60 days``, ``1.38–2.66 h``), so one band never reads ``1.38 h–0.11 days``."""
    if seconds / S_PER_DAY >= 0.1:
        return f"{low_s / S_PER_DAY:.2f}–{high_s / S_PER_DAY:.2f} days"
    unit, size = next(((u, n) for u, n in (("h", 3600.0), ("min", 60.0)) if seconds >= n), ("s", 1.0))
    low, high = low_s / size, high_s / size
    # both ends with the decimals three significant digits give the larger ("0.98–2.10 min", not
    # "0.982–2.1 min"); whole numbers from 100 up
    decimals = max(0, 2 - math.floor(math.log10(high))) if high > 0 else 2
    return f"{low:.{decimals}f}–{high:.{decimals}f} {unit}"


def parse_dtype(text: str, field: str, allowed: tuple[Dtype, ...] = tuple(Dtype)) -> Dtype:
    """Parse a dtype name (case-insensitive; ``bfloat16``/``float16``/``fp8_e4m3`` aliases).

    Raises:
        InputError: the name is not one of ``allowed``.
    """
    key = _ALIASES.get(text.strip().lower(), text.strip().lower())
    try:
        dtype = Dtype(key)
    except ValueError:
        raise InputError(field, text, [d.value for d in allowed]) from None
    if dtype not in allowed:
        raise InputError(field, text, [d.value for d in allowed])
    return dtype


_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_block": "fp8",
    "e4m3": "fp8",
    "fp4": "nvfp4",
    "int4_wo": "w4a16",
    "int4": "w4a16",
    "awq": "w4a16",
    "gptq": "w4a16",
}
