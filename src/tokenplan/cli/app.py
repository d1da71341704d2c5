"""The typer application every command module registers on (``tokenplan.cli`` wires them)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="tokenplan",
    help="Plan, check and run LLM data-generation jobs: memory, throughput, days and dollars.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(help="List the shipped GPU and model catalogs.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")


def console():
    """A rich console: the terminal's width, or 200 columns when output goes to a file or a pipe
    (where rich would otherwise assume 80 and squeeze the tables)."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=200)
