"""What ``tokenplan catalog gpus|models`` prints: the shipped catalogs as tables (rows from
``tokenplan.api.catalog_gpus``/``catalog_models``; ``--json`` has the sources of every figure)."""

from __future__ import annotations

from rich.table import Table

GPU_SOURCES_NOTE = 'Sources of every figure: tokenplan catalog gpus --json ("sources").'

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


def gpus_table(rows: list[dict]) -> Table:
    """GPUs: memory (GiB), HBM bandwidth (TB/s), dense TFLOPS per format, scale-up link, native
    formats and the typical rental price with its range ("—" where a figure does not exist)."""
    t = Table(header_style="bold")
    for col in GPU_COLUMNS:
        t.add_column(col)
    for r in rows:
        f = r["dense_tflops"]
        price = (
            "—"
            if r["price"] is None
            else (
                f"{r['price']['typical']:.2f} ({r['price']['low']:.2f}–{r['price']['high']:.2f}, {r['price']['as_of']})"
            )
        )
        t.add_row(
            r["key"],
            r["name"],
            r["architecture"],
            f"{r['memory_gib']:.1f}",
            f"{r['hbm_tb_s']:.2f}",
            f"{f.get('bf16', 0):,.0f}",
            f"{f.get('fp8', 0):,.0f}" if "fp8" in f else "—",
            f"{f.get('fp4', 0):,.0f}" if "fp4" in f else "—",
            f"{r['scaleup']} {r['scaleup_gb_s']:,.0f}",
            ",".join(r["native_dtypes"]),
            price,
        )
    return t


def models_table(rows: list[dict]) -> Table:
    """Models: family, parameters (billions, total and active), KV bytes per token (bf16), state
    per sequence (MiB), MTP layers and what the model approximates ("exact" where nothing)."""
    t = Table(header_style="bold")
    for col in MODEL_COLUMNS:
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["name"],
            r["architecture"],
            r["family"],
            f"{r['params_b']:.1f}",
            f"{r['active_params_b']:.1f}",
            f"{r['kv_bytes_per_token']:,.0f}",
            f"{r['state_bytes_per_sequence'] / 2**20:,.1f}",
            str(r["mtp_layers"]),
            "exact" if not r["approximations"] else "approx.: " + "; ".join(r["approximations"]),
        )
    return t
