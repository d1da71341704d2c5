"""One vocabulary across the commands: old option spellings kept as hidden aliases, and help
pages without Python type tags.

Every command names the same idea the same way (``--isl``/``--osl`` for lengths, ``--engine``,
``--concurrency``, ``-o/--out`` for the file a command writes, ``--model`` for the catalog model,
``--deadline`` for the whole job's time limit, ``--request-timeout`` for one request's). The
spellings used before are rewritten to the current ones before parsing, so old scripts keep
working while ``--help`` shows one name per idea.
"""

from __future__ import annotations

import inspect
import typing

import typer
from typer.core import TyperArgument, TyperCommand

# command → old spelling → current spelling
OLD_SPELLINGS: dict[str, dict[str, str]] = {
    "plan": {"--isl-mean": "--isl", "--osl-mean": "--osl"},
    "generate": {"--deadline-s": "--request-timeout"},
    "bench": {"--deadline": "--request-timeout"},
    "report": {"--output": "--out"},
    "calibrate": {"--config": "--model"},
}


def current_spellings(argv: list[str]) -> list[str]:
    """``argv`` with the old spellings of the invoked command's options replaced by the current
    ones (``--isl-mean 900`` and ``--isl-mean=900`` → ``--isl``); nothing after ``--`` changes.

    Args:
        argv: the arguments after the program name.

    Returns:
        A new list. Raises nothing.
    """
    command = next((a for a in argv if not a.startswith("-")), None)
    table = OLD_SPELLINGS.get(command or "", {})
    out, literal = [], False
    for arg in argv:
        if arg == "--":
            literal = True
        name, eq, value = arg.partition("=")
        if not literal and name in table:
            arg = table[name] + eq + value
        out.append(arg)
    return out


def set_metavars(app: typer.Typer) -> None:
    """Give every option and argument of ``app`` (and its groups) that takes a value a metavar
    named after it (``--gpu GPU``, ``INPUTS...``) where none is set, so that help pages show no
    Python type tags (typer ≥ 0.2x prints ``<list[str]>`` otherwise). Flags keep none."""
    for info in app.registered_commands:
        if info.callback is not None:
            _fill(info.callback)
        if info.cls in (None, TyperCommand):
            info.cls = PlainArgumentsCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            set_metavars(group.typer_instance)


def _fill(fn) -> None:
    hints = typing.get_type_hints(fn, include_extras=True)
    for name, param in inspect.signature(fn).parameters.items():
        hint = hints.get(name)
        if _is_flag(hint):
            continue
        for info in (param.default, *getattr(hint, "__metadata__", ())):
            if isinstance(info, typer.models.ParameterInfo) and info.metavar is None:
                decls = [
                    d
                    for d in (*(getattr(info, "param_decls", None) or ()), info.default)
                    if isinstance(d, str) and d.startswith("--")
                ]
                label = decls[0].lstrip("-").split("/")[0] if decls else name
                info.metavar = label.replace("-", "_").upper()
        if hasattr(hint, "__metadata__"):
            # With postponed annotations typer re-evaluates the annotation string into new
            # objects: keep the evaluated one (metavar set) in its place.
            fn.__annotations__[name] = hint


class _PlainArgument(TyperArgument):
    """A positional argument shown by its metavar alone: ``INPUTS...`` in the usage line, no
    ``{INPUTS}`` braces and no ``<list[str]>`` type tag in the help (typer 0.2x's defaults)."""

    def display_type_rich(self, ctx):  # noqa: D102 - typer hook
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


class PlainArgumentsCommand(TyperCommand):
    """typer's command, its positional arguments shown as :class:`_PlainArgument`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _PlainArgument


def _is_flag(hint) -> bool:
    """True for a bool option (``Annotated[bool, …]`` or ``bool``)."""
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    return base is bool
