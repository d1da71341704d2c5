"""What ``tokenplan catalog gpus|models`` prints: the shipped catalogs as tables (rows from
``tokenplan.api.catalog_gpus``/``catalog_models``; ``--json`` has the sources of every figure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from tokenplan.catalog.listing import CatalogGpu, CatalogModel

GPU_SOURCES_NOTE = 'Sources of every figure: tokenplan catalog gpus --json ("sources").'
MODEL_SOURCES_NOTE = 'Where each config.json comes from: tokenplan catalog models --json ("source").'

GPU_COLUMNS = (
    "key",
    "name",
    "arch",
    "GiB",
    "TB/s",
    "BF16 TF",
    "FP8 TF",
    "FP4 TF",
    "scale-up (GB/s/dir)",
    "native",
    "$/GPU-h typical (range)",
)
TFLOPS_COLUMNS = ("bf16", "fp8", "fp4")  # the formats of the "… TF" columns, in column order
MODEL_COLUMNS = (
    "name",
    "architecture",
    "family",
    "params (B)",
    "active (B)",
    "KV B/token (bf16)",
    "state MiB/seq",
    "MTP",
    "modelled",
)


def gpus_table(rows: Sequence[CatalogGpu]) -> Table:
    """GPUs: memory (GiB), HBM bandwidth (TB/s), dense TFLOPS per format, scale-up link, native
    formats and the typical rental price with its range ("—" where a figure does not exist)."""
    t = Table(header_style="bold")
    for col in GPU_COLUMNS:
        t.add_column(col)
    for r in rows:
        p = r.price
        price = "—" if p is None else f"{p.typical:.2f} ({p.low:.2f}–{p.high:.2f}, {p.as_of})"
        t.add_row(
            r.key,
            r.name,
            r.architecture,
            f"{r.memory_gib:.1f}",
            f"{r.hbm_tb_s:.2f}",
            *(_tflops(r, fmt) for fmt in TFLOPS_COLUMNS),
            f"{r.scaleup} {r.scaleup_gb_s:,.0f}",
            ", ".join(r.native_dtypes),  # spaces: the cell wraps instead of being cut to "…"
            price,
        )
    return t


def _tflops(gpu: CatalogGpu, fmt: str) -> str:
    """Dense TFLOPS of ``gpu`` in ``fmt`` ("—" where it has none; BF16, which every GPU has, 0)."""
    for name, tflops in gpu.dense_tflops.items():
        if name == fmt:
            return f"{tflops:,.0f}"
    return "0" if fmt == "bf16" else "—"


def models_table(rows: Sequence[CatalogModel]) -> Table:
    """Models: family, parameters (billions, total and active), KV bytes per token (bf16), state
    per sequence (MiB), MTP layers and what the model approximates ("exact" where nothing)."""
    t = Table(header_style="bold")
    for col in MODEL_COLUMNS:
        t.add_column(col)
    for r in rows:
        t.add_row(
            r.name,
            r.architecture,
            r.family,
            f"{r.params_b:.1f}",
            f"{r.active_params_b:.1f}",
            f"{r.kv_bytes_per_token:,.0f}",
            f"{r.state_bytes_per_sequence / 2**20:,.1f}",
            str(r.mtp_layers),
            "exact" if not r.approximations else "approx.: " + "; ".join(r.approximations),
        )
    return t
