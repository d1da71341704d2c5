"""The command line's value types and command class, on click's own extension points.

A value that cannot be converted raises :class:`NotAllowed` (a :class:`click.BadParameter`) that
knows the option, the value and what is allowed, so the error line is built from those three,
never from a message's text. Old option spellings are rewritten by :class:`Command` before click
parses a command's arguments (click's ``Command.parse_args`` hook), so ``--help`` shows one name
per idea while old scripts keep working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

__all__ = ["INTEGER", "NUMBER", "PATH", "Command", "NotAllowed", "current_spellings"]


class NotAllowed(click.BadParameter):
    """A value an option's type refuses: ``--tp '1.5' is not allowed (allowed: an integer)``.

    Attributes:
        value: the text given on the command line.
        allowed: what the option takes, in words.
    """

    def __init__(self, value: str, allowed: str, ctx: click.Context | None, param: click.Parameter | None) -> None:
        super().__init__(f"{value!r} is not allowed (allowed: {allowed})", ctx=ctx, param=param)
        self.value = value
        self.allowed = allowed

    def format_message(self) -> str:
        """One line naming the option (its longest name), the value and what is allowed."""
        names = getattr(self.param, "opts", None) or [getattr(self.param, "name", None) or "value"]
        return f"{max(names, key=len)} {self.value!r} is not allowed (allowed: {self.allowed})"


class _Integer(click.ParamType):
    """A whole number (``int()``'s syntax: ``8``, ``1_000``); anything else is :class:`NotAllowed`."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return int(value)
        except ValueError:
            raise NotAllowed(str(value), "an integer", ctx, param) from None


class _Number(click.ParamType):
    """A real number (``float()``'s syntax: ``2.5``, ``1e3``, ``inf``); ranges (and NaN) are the api's to refuse."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return float(value)
        except ValueError:
            raise NotAllowed(str(value), "a number", ctx, param) from None


INTEGER = _Integer()
NUMBER = _Number()
PATH = click.Path(path_type=Path)


def current_spellings(argv: list[str], table: dict[str, str]) -> list[str]:
    """``argv`` with the old spellings in ``table`` replaced by the current ones (``--isl-mean
    900`` and ``--isl-mean=900`` → ``--isl``); nothing after ``--`` changes.

    Args:
        argv: one command's arguments.
        table: old spelling → current spelling.

    Returns:
        A new list. Raises nothing.
    """
    out, literal = [], False
    for arg in argv:
        if arg == "--":
            literal = True
        name, eq, value = arg.partition("=")
        if not literal and name in table:
            arg = table[name] + eq + value
        out.append(arg)
    return out


def given_values(argv: list[str], option: str) -> list[str]:
    """The values ``option`` (one that takes a value) is given in ``argv``, in order, as
    ``--gpu b200`` or ``--gpu=b200``; nothing after ``--`` counts. Raises nothing."""
    out = []
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == option and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith(option + "="):
            out.append(arg[len(option) + 1 :])
    return out


class Command(click.Command):
    """click's command with the spellings a command used before kept as hidden aliases.

    Args:
        old_spellings: old option name → current name (``{"--isl-mean": "--isl"}``); not shown by
            ``--help``, rewritten before parsing.
        once: option → what it takes, for options another command repeats (``plan --gpu b200
            --gpu h200`` compares both) but this one takes once: two different values are refused
            (click kept the last with no word: ``predict --gpu b200 --gpu h200`` predicted h200).
    """

    def __init__(
        self, *args: Any, old_spellings: dict[str, str] | None = None, once: dict[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.old_spellings = dict(old_spellings or {})
        self.once = dict(once or {})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = current_spellings(args, self.old_spellings)
        for option, takes in self.once.items():
            values = list(dict.fromkeys(given_values(args, option)))
            if len(values) > 1:
                raise click.UsageError(
                    f"{option} {values[1]!r} is not allowed (allowed: {takes}; {option} {values[0]!r} is given already)",
                    ctx,
                )
        return super().parse_args(ctx, args)


# --draft-model, shared by plan, predict and memory (api: files.drafter)
DRAFT_MODEL = click.option(
    "--draft-model",
    help="EAGLE/DFlash: the drafter's checkpoint folder (its config.json sizes its weights and KV) or owner/name repository id, written into the launch commands [default: its shape from the target's, a DRAFT_MODEL placeholder]",
)
