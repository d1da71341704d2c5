"""``tokenplan catalog gpus|models``: what ships (tables: :mod:`tokenplan.report.catalog`)."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from tokenplan.cli.app import catalog_app
from tokenplan.cli.app import console as wide_console


@catalog_app.command("gpus")
def gpus_cmd(as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON, sources included")) -> None:
    """GPUs: memory, bandwidth, dense TFLOPS, link, native formats, price."""
    from tokenplan.api.catalog import catalog_gpus
    from tokenplan.report.catalog import GPU_SOURCES_NOTE, gpus_table

    gpus = catalog_gpus()
    if as_json:
        print(json.dumps([g.to_json() for g in gpus], indent=2))
        return
    wide_console().print(gpus_table(gpus))
    Console(stderr=True).print(GPU_SOURCES_NOTE, style="dim")


@catalog_app.command("models")
def models_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON, sources included"),
) -> None:
    """Models: family, parameters, KV bytes per token, state per sequence, what is approximated."""
    from tokenplan.api.catalog import catalog_models
    from tokenplan.report.catalog import models_table

    models = catalog_models()
    if as_json:
        print(json.dumps([m.to_json() for m in models], indent=2))
        return
    wide_console().print(models_table(models))
