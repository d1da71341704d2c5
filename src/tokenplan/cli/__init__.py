"""Command-line entry point: ``tokenplan``.

Each command module translates options into a request, calls one ``tokenplan.api`` function and
renders the result. A :class:`~tokenplan.errors.TokenplanError` becomes one line on stderr and
exit status 2; no traceback is printed for bad input.
"""

from __future__ import annotations

import sys

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

__all__ = ["app", "main"]


def main() -> None:
    """Run the CLI; map expected errors to one line and exit status 2."""
    try:
        app(standalone_mode=False)
    except TokenplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(2)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(1)
        raise
