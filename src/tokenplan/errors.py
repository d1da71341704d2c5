"""The one family of errors tokenplan raises for bad input.

Every user mistake is a :class:`TokenplanError` whose ``str()`` is one line naming the field,
the value and what is allowed. The CLI prints that line and exits with status 2; anything else
is a bug and keeps its traceback. Infeasible configurations are *results* (a rejection with a
reason), not errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class TokenplanError(Exception):
    """Base of every expected error: its message is one line meant for the user."""

    exit_code = 2


def _allowed_text(allowed: Iterable[object] | str | None) -> str:
    if allowed is None:
        return ""
    if isinstance(allowed, str):
        return f" (allowed: {allowed})"
    return f" (allowed: {', '.join(str(a) for a in allowed)})"


# pydantic error types (``ValidationError.errors()[i]["type"]``) → what is allowed, in words.
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", "≥"),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "≤"),
}
_KINDS = {
    "int_parsing": "an integer",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_parsing": "a number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "text",
    "list_type": "a list",
    "dict_type": "a mapping of keys to values",
    "missing": "a value (required)",
}


def allowed_from_validation(error: Mapping[str, Any]) -> str:
    """What a pydantic validation error allows, in words, for the ``allowed`` part of a one-line
    message: ``a number ≥ 0`` for a ``ge=0`` bound, ``an integer`` for an int that did not parse,
    ``one of 'a', 'b'`` for a literal; a custom validator's own message otherwise (it says what is
    expected). ``error``: one item of ``ValidationError.errors()``."""
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    if kind in _BOUNDS and _BOUNDS[kind][0] in ctx:
        key, sign = _BOUNDS[kind]
        bound = ctx[key]
        if isinstance(bound, (int, float)) and float(bound).is_integer() and abs(bound) < 1e15:
            return f"a number {sign} {int(bound):,}"  # 16,777,216, not 1.67772e+07
        return f"a number {sign} {bound:g}" if isinstance(bound, (int, float)) else f"a number {sign} {bound}"
    if kind == "literal_error" and "expected" in ctx:
        return f"one of {ctx['expected']}"
    if kind in _KINDS:
        return _KINDS[kind]
    return str(error.get("msg", "")).removeprefix("Value error, ")


class InputError(TokenplanError):
    """A user-given value is not allowed.

    Args:
        field: the option, key or column that carried the value (e.g. ``"gpu"``).
        value: what the user gave.
        allowed: the allowed values, or a short text describing them.
    """

    def __init__(self, field: str, value: object, allowed: Iterable[object] | str | None = None):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field} {value!r} is not allowed{_allowed_text(allowed)}")


class CatalogError(InputError):
    """A name is not in a shipped catalog (GPU, model, engine).

    Args:
        kind: the catalog (``"gpu"``, ``"model"``, ``"engine"``).
        name: what the user gave.
        known: every name the catalog holds (all are listed).
        suggestions: the closest names, said first ("did you mean …?").
    """

    def __init__(self, kind: str, name: str, known: Iterable[str], suggestions: Iterable[str] = ()):
        self.field, self.value = kind, name
        self.known, self.suggestions = sorted(known), list(suggestions)
        self.allowed = self.known  # as InputError's: a caller re-wording the refusal reads it
        close = self.suggestions
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        TokenplanError.__init__(self, f"{kind} {name!r} is not in the catalog{hint}{_allowed_text(self.known)}")


class MissingOptionError(InputError):
    """Options a command needs were not given (one line naming them, not a Python ``None``).

    Args:
        options: the options missing, as the user types them (``"--config"``).
        needed: what the command takes, in words (``"--config MODEL and --gpu GPU with --fit"``).
    """

    def __init__(self, options: Iterable[str], needed: str):
        names = list(options)
        self.field, self.value = names[0] if names else "", None
        missing = " and ".join(names)
        TokenplanError.__init__(self, f"{missing} {'is' if len(names) == 1 else 'are'} missing (allowed: {needed})")


class ConfigError(TokenplanError):
    """A file (config.json, job YAML, CSV, calibration JSON) is malformed.

    Args:
        path: the file.
        key: the key or line that is wrong.
        problem: what is wrong and what is expected.
    """

    def __init__(self, path: str, key: str, problem: str):
        self.path, self.key, self.problem = path, key, problem
        super().__init__(f"{path}: {key}: {problem}")


class RunDirError(TokenplanError):
    """A run directory that belongs to another job, or is unreadable."""


class ServerError(TokenplanError):
    """A server that cannot be reached, does not serve the model, or misbehaves.

    Args:
        message: the one line said.
        problems: where several endpoints were asked, one line per endpoint that failed (its
            URL and why), for a caller that has other endpoints up (the Ray driver).
    """

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = list(problems or ())


class EndpointsUnanswering(ServerError):
    """Every endpoint answers its health check (``GET /models``) and no chat request: put back in
    the pool, each failed again with nothing answered, several times in a row
    (:mod:`tokenplan.client.endpoints`). A fault of the servers, not of the rows."""


class Interrupted(TokenplanError):
    """A run stopped at once by a second SIGINT/SIGTERM: exit status 130, as for Ctrl-C."""

    exit_code = 130


class InfeasibleError(TokenplanError):
    """A configuration the user asked for explicitly cannot run (does not fit, bad layout)."""


class MissingExtraError(TokenplanError):
    """A command needs a package that only an optional extra installs (plotting, fitting).

    Args:
        module: the module that could not be imported (``"plotly.graph_objects"``).
        extra: the extra that installs it (``"report"``, ``"calibrate"``).
    """

    def __init__(self, module: str, extra: str):
        self.module, self.extra = module, extra
        top = module.split(".")[0]
        super().__init__(
            f"this needs {top}, which the core install leaves out: pip install 'tokenplan[{extra}]' "
            f"(in a clone of the repository, as the README installs it: pip install '.[{extra}]')"
        )


# The optional packages, by the extra that installs them (pyproject.toml's optional-dependencies).
EXTRA_OF_MODULE = {"numpy": "calibrate", "scipy": "calibrate", "plotly": "report", "matplotlib": "report"}


def missing_extra(exc: ImportError) -> MissingExtraError | None:
    """The :class:`MissingExtraError` for an ``ImportError`` of a package that an extra installs
    (:data:`EXTRA_OF_MODULE`), else None (a broken install is not a missing extra)."""
    top = (exc.name or "").split(".")[0]
    return MissingExtraError(top, EXTRA_OF_MODULE[top]) if top in EXTRA_OF_MODULE else None


def import_extra(module: str, extra: str):
    """Import ``module`` (a package of the optional extra ``extra``, see pyproject.toml) or raise
    :class:`MissingExtraError` naming the extra to install.

    Args:
        module: dotted module name, e.g. ``"scipy.optimize"``.
        extra: the extra that installs it: ``"report"`` (plotly, matplotlib) or ``"calibrate"`` (scipy, numpy).

    Returns:
        The imported module.

    Raises:
        MissingExtraError: the module (or a package it needs) is not installed.
    """
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra) from exc


def shown(value: object) -> object:
    """A number as the user typed it: 0 for 0.0, 10 for 10.0 (options parsed as floats)."""
    # below 2^53 a whole float is exactly the integer typed; 1e30 stays 1e+30, not 31 digits
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 else value
