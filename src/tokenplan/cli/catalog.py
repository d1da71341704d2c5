"""``tokenplan catalog gpus|models``: what ships."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from tokenplan.cli.app import console as wide_console
from tokenplan.cli.app import catalog_app


@catalog_app.command("gpus")
def gpus_cmd(as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON, sources included")) -> None:
    """GPUs: memory, bandwidth, dense TFLOPS, link, native formats, price."""
    from tokenplan.api.catalog import catalog_gpus

    rows = [g.to_json() for g in catalog_gpus()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(header_style="bold")
    for col in ("key", "name", "arch", "GiB", "TB/s", "BF16 TF", "FP8 TF", "FP4 TF", "scale-up (GB/s/dir)", "native", "$/GPU-h typical (range)"):
        t.add_column(col)
    for r in rows:
        f = r["dense_tflops"]
        price = "—" if r["price"] is None else (f"{r['price']['typical']:.2f} ({r['price']['low']:.2f}–"
                                                 f"{r['price']['high']:.2f}, {r['price']['as_of']})")
        t.add_row(r["key"], r["name"], r["architecture"], f"{r['memory_gib']:.1f}", f"{r['hbm_tb_s']:.2f}",
                  f"{f.get('bf16', 0):,.0f}", f"{f.get('fp8', 0):,.0f}" if "fp8" in f else "—",
                  f"{f.get('fp4', 0):,.0f}" if "fp4" in f else "—", f"{r['scaleup']} {r['scaleup_gb_s']:,.0f}",
                  ",".join(r["native_dtypes"]), price)
    wide_console().print(t)
    Console(stderr=True).print("Sources of every figure: tokenplan catalog gpus --json (\"sources\").", style="dim")


@catalog_app.command("models")
def models_cmd(as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON, sources included")) -> None:
    """Models: family, parameters, KV bytes per token, state per sequence, what is approximated."""
    from tokenplan.api.catalog import catalog_models

    rows = [m.to_json() for m in catalog_models()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(header_style="bold")
    for col in ("name", "architecture", "family", "params (B)", "active (B)", "KV B/token (bf16)", "state MiB/seq", "MTP", "modelled"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["architecture"], r["family"], f"{r['params_b']:.1f}", f"{r['active_params_b']:.1f}",
                  f"{r['kv_bytes_per_token']:,.0f}", f"{r['state_bytes_per_sequence'] / 2**20:,.1f}", str(r["mtp_layers"]),
                  "exact" if not r["approximations"] else "approx.: " + "; ".join(r["approximations"]))
    wide_console().print(t)



