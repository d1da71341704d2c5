"""Command-line entry point: ``tokenplan``, built on click.

Each command module translates options into a request, calls one ``tokenplan.api`` function and
renders the result; :mod:`tokenplan.cli.app` holds the group, which loads a command's module on
first use and turns every expected error into one line on stderr and exit status 2 (no traceback
for bad input); :mod:`tokenplan.cli.params` holds the value types and the command class.
"""

from __future__ import annotations

import sys

from tokenplan.cli.app import COMMAND_MODULES, USAGE_EXIT, app

__all__ = ["COMMAND_MODULES", "USAGE_EXIT", "app", "main"]


def main() -> None:
    """Run the CLI on ``sys.argv``.

    Raises:
        SystemExit: 2 on bad input or usage, 130 on Ctrl-C, a command's own non-zero status;
            returns normally on success.
    """
    app.main(sys.argv[1:], prog_name="tokenplan")
