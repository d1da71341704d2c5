"""The typer application every command module registers on (``tokenplan.cli`` wires them)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="tokenplan",
    help="Plan, check and run LLM data-generation jobs: memory, throughput, days and dollars.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
catalog_app = typer.Typer(help="List the shipped GPU and model catalogs.", rich_markup_mode=None)
app.add_typer(catalog_app, name="catalog")


def require_command(ctx: typer.Context) -> None:
    """Refuse a group called without a command: one line naming the commands, exit status 2.

    Raises:
        typer.Exit: with code 2 when ``ctx`` has no subcommand to run.
    """
    if ctx.invoked_subcommand is not None or ctx.resilient_parsing:
        return
    commands = ", ".join(sorted(ctx.command.commands))  # type: ignore[attr-defined]
    typer.echo(f"error: {ctx.command_path} needs a command: one of {commands} (add --help for details)", err=True)
    raise typer.Exit(2)


@catalog_app.callback(invoke_without_command=True)
def _catalog_root(ctx: typer.Context) -> None:
    """List the shipped GPU and model catalogs."""
    require_command(ctx)


def console():
    """A rich console: the terminal's width (or ``COLUMNS`` where set), else 200 columns when output
    goes to a file or a pipe (where rich would otherwise assume 80 and squeeze the tables)."""
    import os

    from rich.console import Console

    out = Console()
    return out if out.is_terminal or os.environ.get("COLUMNS") else Console(width=200)


def _print_version(value: bool) -> None:
    if value:
        from tokenplan import __version__

        print(f"tokenplan {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", help="Print tokenplan's version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """Plan, check and run LLM data-generation jobs: memory, throughput, days and dollars."""
    require_command(ctx)
