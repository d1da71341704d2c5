"""Command-line entry point: ``tokenplan``.

Each command module translates options into a request, calls one ``tokenplan.api`` function and
renders the result. A :class:`~tokenplan.errors.TokenplanError` becomes one line on stderr and
exit status 2; so does every usage error (unknown command or option, a value of the wrong type):
no traceback is printed for bad input.
"""

from __future__ import annotations

import sys

import typer

from tokenplan.cli.app import app
from tokenplan.errors import TokenplanError

# Command modules register themselves on ``app`` when imported.
from tokenplan.cli import plan as _plan  # noqa: F401,E402
from tokenplan.cli import predict as _predict  # noqa: F401,E402
from tokenplan.cli import catalog as _catalog  # noqa: F401,E402
from tokenplan.cli import generate as _generate  # noqa: F401,E402
from tokenplan.cli import validate as _validate  # noqa: F401,E402
from tokenplan.cli import calibrate as _calibrate  # noqa: F401,E402
from tokenplan.cli import report as _report  # noqa: F401,E402
from tokenplan.cli import bench as _bench  # noqa: F401,E402

from tokenplan.cli.vocabulary import current_spellings, set_metavars  # noqa: E402

set_metavars(app)

__all__ = ["app", "main"]

USAGE_EXIT = 2


def _click_exceptions():
    """The click exception module typer runs on.

    typer ≥ 0.22 bundles click as ``typer._click`` and no longer installs ``click``; older typer
    releases (allowed by ``typer>=0.12``) run on the ``click`` package. Both expose the same
    ``ClickException``/``UsageError``/``Abort`` classes.
    """
    try:
        from typer._click import exceptions  # type: ignore[attr-defined]
    except ImportError:
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def _usage_line(exc: Exception) -> str:
    """One line for a click usage error: its message and where to find help."""
    ctx = getattr(exc, "ctx", None)
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    where = f" (try '{ctx.command_path} --help')" if ctx is not None else ""
    return f"error: {message}{where}"


def main() -> None:
    """Run the CLI; map expected errors to one line on stderr and exit status 2.

    Raises:
        SystemExit: always, with 0 on success, 2 on bad input or usage, 130 on Ctrl-C.
    """
    exceptions = _click_exceptions()
    try:
        # Outside standalone mode click returns the code of a ``typer.Exit`` instead of exiting.
        status = app(args=current_spellings(sys.argv[1:]), prog_name="tokenplan", standalone_mode=False)
    except TokenplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except exceptions.UsageError as exc:
        print(_usage_line(exc), file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except exceptions.ClickException as exc:  # e.g. a file option that cannot be opened
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except typer.Abort:  # typer ≥ 0.22 keeps it in typer.exceptions, not in its bundled click
        print("aborted", file=sys.stderr)
        sys.exit(1)
    if isinstance(status, int) and status:
        sys.exit(status)
