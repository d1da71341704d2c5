"""Command-line entry point: ``tokenplan``.

Each command module translates options into a request, calls one ``tokenplan.api`` function and
renders the result. A :class:`~tokenplan.errors.TokenplanError` becomes one line on stderr and
exit status 2; so does every usage error (unknown command or option, a value of the wrong type):
no traceback is printed for bad input.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from tokenplan.cli.app import app
from tokenplan.cli.vocabulary import current_spellings, set_metavars
from tokenplan.errors import TokenplanError, missing_extra

__all__ = ["app", "main", "register_commands"]

USAGE_EXIT = 2

# Command name → the module that registers it on ``app`` when imported. A command imports only
# what it runs: ``tokenplan plan`` does not load aiohttp (generate) or numpy-heavy fitting (bench).
COMMAND_MODULES = {
    "plan": "plan",
    "predict": "predict",
    "memory": "predict",
    "catalog": "catalog",
    "generate": "generate",
    "validate": "validate",
    "calibrate": "calibrate",
    "report": "report",
    "bench": "bench",
}


def register_commands(argv: list[str] | None = None) -> None:
    """Import the command modules that ``argv`` needs (all of them when it names no command).

    Args:
        argv: the arguments after the program name; ``None`` registers every command.
    """
    first = next((a for a in argv or () if not a.startswith("-")), None) if argv else None
    if first is None and argv and "--version" in argv:
        return  # eager: prints and exits before any command is looked up
    names = {COMMAND_MODULES[first]} if first in COMMAND_MODULES else set(COMMAND_MODULES.values())
    for name in sorted(names):
        importlib.import_module(f"tokenplan.cli.{name}")
    set_metavars(app)


def _click_exceptions():
    """The click exception module typer runs on.

    typer ≥ 0.22 bundles click as ``typer._click`` and no longer installs ``click``; older typer
    releases (allowed by ``typer>=0.12``) run on the ``click`` package. Both expose the same
    ``ClickException``/``UsageError``/``Abort`` classes.
    """
    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    return exceptions


# typer's value conversion speaks pydantic ("Input should be a valid integer, unable to parse
# string as an integer"); the one-line error names the option, the value and what is allowed.
_ALLOWED = (("valid integer", "an integer"), ("valid number", "a number"), ("valid boolean", "true or false"))


def _given(option: str, argv: list[str], allowed: str = "") -> str | None:
    """The value of ``option`` on the command line (``--x v`` or ``--x=v``) that could not be
    converted to ``allowed`` (``an integer``, ``a number``): the first such value where the
    option is given more than once, else the last value given (the one click keeps); None when
    the option is not on the line."""
    values = []
    for i, word in enumerate(argv):
        if word == option and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif word.startswith(option + "="):
            values.append(word[len(option) + 1 :])
    convert = {"an integer": int, "a number": float}.get(allowed)
    if convert is not None:
        for value in values:
            try:
                convert(value)
            except ValueError:
                return value
    return values[-1] if values else None


def _bad_value_line(exc: Exception) -> str | None:
    """``--tp '1.5' is not allowed (allowed: an integer)`` for a value typer could not convert."""
    param = getattr(exc, "param", None)
    text = exc.format_message()  # type: ignore[attr-defined]
    allowed = next((what for key, what in _ALLOWED if key in text), None)
    if param is None or allowed is None or not getattr(param, "opts", None):
        return None
    option = max(param.opts, key=len)
    value = _given(option, sys.argv[1:], allowed)
    return None if value is None else f"{option} {value!r} is not allowed (allowed: {allowed})"


def _usage_line(exc: Exception) -> str:
    """One line for a click usage error: its message and where to find help."""
    ctx = getattr(exc, "ctx", None)
    message = _bad_value_line(exc) or " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    group: Any = getattr(ctx, "command", None)
    if message.startswith("No such command") and hasattr(group, "list_commands"):
        message = f"{message.rstrip('.')} (allowed: {', '.join(group.list_commands(ctx))})"
    where = f" (try '{ctx.command_path} --help')" if ctx is not None else ""
    return f"error: {message}{where}"


def main() -> None:
    """Run the CLI; map expected errors to one line on stderr and exit status 2.

    Raises:
        SystemExit: always, with 0 on success, 2 on bad input or usage, 130 on Ctrl-C.
    """
    exceptions = _click_exceptions()
    register_commands(sys.argv[1:])
    try:
        # Outside standalone mode click returns the code of a ``typer.Exit`` instead of exiting.
        status = app(args=current_spellings(sys.argv[1:]), prog_name="tokenplan", standalone_mode=False)
    except TokenplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except ImportError as exc:  # an optional package a command needs is not installed
        if (missing := missing_extra(exc)) is None:
            raise
        print(f"error: {missing}", file=sys.stderr)
        sys.exit(missing.exit_code)
    except exceptions.UsageError as exc:
        print(_usage_line(exc), file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except exceptions.ClickException as exc:  # e.g. a file option that cannot be opened
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except OSError as exc:  # a write the up-front path checks could not foresee (/dev/full, a disk filling up)
        where = f"{exc.filename}: " if exc.filename else "input/output: "
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except typer.Abort:  # typer ≥ 0.22 keeps it in typer.exceptions, not in its bundled click
        print("aborted", file=sys.stderr)
        sys.exit(1)
    if isinstance(status, int) and status:
        sys.exit(status)
