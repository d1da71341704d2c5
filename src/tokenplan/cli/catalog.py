"""``tokenplan catalog gpus|models``: what ships (tables: :mod:`tokenplan.report.catalog`)."""

from __future__ import annotations

import json

import click

from tokenplan.cli.app import Group, app, require_command
from tokenplan.cli.app import console as wide_console

_JSON = click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON, sources included")


@app.group("catalog", cls=Group, invoke_without_command=True)
@click.pass_context
def catalog(ctx: click.Context) -> None:
    """List the shipped GPU and model catalogs."""
    require_command(ctx)


@catalog.command("gpus")
@_JSON
def gpus_cmd(as_json: bool) -> None:
    """GPUs: memory, bandwidth, dense TFLOPS, link, native formats, price."""
    from rich.console import Console

    from tokenplan.api.catalog import catalog_gpus
    from tokenplan.report.catalog import GPU_SOURCES_NOTE, gpus_table

    gpus = catalog_gpus()
    if as_json:
        print(json.dumps([g.to_json() for g in gpus], indent=2))
        return
    wide_console().print(gpus_table(gpus))
    Console(stderr=True).print(GPU_SOURCES_NOTE, style="dim")


@catalog.command("models")
@_JSON
def models_cmd(as_json: bool) -> None:
    """Models: family, parameters, KV bytes per token, state per sequence, what is approximated."""
    from rich.console import Console

    from tokenplan.api.catalog import catalog_models
    from tokenplan.report.catalog import MODEL_SOURCES_NOTE, models_table

    models = catalog_models()
    if as_json:
        print(json.dumps([m.to_json() for m in models], indent=2))
        return
    wide_console().print(models_table(models))
    Console(stderr=True).print(MODEL_SOURCES_NOTE, style="dim")
