"""The click application every command module registers on, and how it turns errors into one line.

:class:`Group` is click's group with two of click's documented extension points filled in: it
loads a command's module on first use (``get_command``/``list_commands``, click's lazy-group
pattern), so ``tokenplan plan`` imports neither the HTTP client nor the runner; and its ``main``
runs click outside standalone mode and maps each error *type* to one line on stderr and an exit
status: a :class:`~tokenplan.errors.TokenplanError` or a usage error (unknown command or option,
a value of the wrong type) exits 2 with no traceback.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from tokenplan.cli.params import Command
from tokenplan.errors import InputError, TokenplanError, missing_extra

USAGE_EXIT = 2
# The reader of stdout closed it early (``tokenplan plan | head -1``): the status a shell reports for
# a process SIGPIPE ends (128 + 13), not 1, which plan uses for "no option runs the job".
BROKEN_PIPE_EXIT = 141

# Command name → the module under tokenplan.cli that registers it on ``app`` when imported. A command
# imports only what it runs: ``tokenplan plan`` does not load aiohttp (generate) or fitting (bench).
COMMAND_MODULES = {
    "bench": "bench",
    "calibrate": "calibrate",
    "catalog": "catalog",
    "generate": "generate",
    "memory": "predict",
    "plan": "plan",
    "predict": "predict",
    "report": "report",
    "validate": "validate",
}


def _fail(line: str, status: int) -> NoReturn:
    print(line, file=sys.stderr)
    sys.exit(status)


def _usage_line(exc: click.UsageError) -> str:
    """``error: MESSAGE (try 'tokenplan plan --help')`` for a click usage error, on one line."""
    where = f" (try '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
    return f"error: {' '.join(exc.format_message().split())}{where}"


class Group(click.Group):
    """A click group whose commands load on first use and whose ``main`` reports errors in one line.

    Args:
        lazy: command name → the module under ``tokenplan.cli`` that registers it (None: none).
    """

    command_class = Command

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def _swallowed_option(self, exc: click.UsageError, args: list[str]) -> str:
        """Where an extra argument follows an option whose value was itself an option (``plan
        --png --gpu b200``: ``--png`` took ``--gpu``, and ``b200`` was left over), say so; click
        says only "Got unexpected extra argument (b200)" (a final fresh-clone check)."""
        if "unexpected extra argument" not in str(exc.message):
            return ""
        command = self.get_command(click.Context(self), args[0]) if args else None
        takes_value = {
            opt
            for p in (command.params if command is not None else ())
            if isinstance(p, click.Option) and not p.is_flag and not p.count
            for opt in p.opts
        }
        for option, value in zip(args, args[1:]):
            if option in takes_value and value.startswith("--"):
                return f" ({option} took {value!r} as its value: give {option} a value)"
        return ""

    def _option_help(self, exc: click.UsageError, args: list[str]) -> str:
        """`` (--gpu: …)`` from the help of the option a usage error names without a value
        (``plan --gpu`` at the end of the line: click says only that it needs one), else empty.
        The help says what the option is, not a list of values: "allowed: Also write the report's
        charts…" read as nonsense (a new-user pass)."""
        name = getattr(exc, "option_name", None)
        command = self.get_command(click.Context(self), args[0]) if args and exc.ctx is None else None
        for param in command.params if command is not None and name else ():
            if name in getattr(param, "opts", ()) and getattr(param, "help", None):
                what = str(param.help).split(" [default:")[0]  # the help's default says what is not given
                return f" ({name}: {what})"
        return ""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            importlib.import_module(f"tokenplan.cli.{self.lazy[cmd_name]}")
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if not ctx.resilient_parsing and not name.startswith("-") and self.get_command(ctx, name) is None:
            commands = self.list_commands(ctx)
            close = difflib.get_close_matches(name, commands, n=2)  # as a misspelled option gets
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}{hint} (allowed: {', '.join(commands)})", ctx)
        return super().resolve_command(ctx, args)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]
        """Run the command line; exit with 0 on success, 2 on bad input or usage, 130 on Ctrl-C.

        Raises:
            SystemExit: on any failure (after one line on stderr), or with a command's own status.
        """
        extra.pop("standalone_mode", None)
        try:
            # Outside standalone mode click returns the status of a ctx.exit(...) instead of exiting.
            status = super().main(args, prog_name, standalone_mode=False, **extra)
        except TokenplanError as exc:
            _fail(f"error: {_as_typed(exc, sys.argv[1:] if args is None else list(args))}", exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except ImportError as exc:  # an optional package a command needs is not installed
            if (missing := missing_extra(exc)) is None:
                raise
            _fail(f"error: {missing}", missing.exit_code)
        except click.UsageError as exc:
            given = sys.argv[1:] if args is None else list(args)
            _fail(_usage_line(exc) + self._option_help(exc, given) + self._swallowed_option(exc, given), USAGE_EXIT)
        except click.ClickException as exc:
            _fail(f"error: {' '.join(exc.format_message().split())}", USAGE_EXIT)
        except click.Abort as exc:  # click raises it for Ctrl-C (its cause) and for an aborted prompt
            _fail(*(("interrupted", 130) if isinstance(exc.__cause__, KeyboardInterrupt) else ("aborted", 1)))
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(BROKEN_PIPE_EXIT)
        except OSError as exc:  # a write the up-front path checks could not foresee (/dev/full, a full disk)
            where = f"{exc.filename}: " if exc.filename else "input/output: "
            _fail(f"error: {where}{exc.strerror or exc}", USAGE_EXIT)
        if isinstance(status, int) and status:
            sys.exit(status)
        return status


# A field checked under one name but typed under another (bench takes vllm bench serve's
# --max-concurrency for its --concurrency).
OPTION_ALIASES: dict[str, tuple[str, ...]] = {"concurrency": ("--max-concurrency",)}
# A field named with its unit whose option is not (progress_every_s is --progress-every).
UNIT_SUFFIXES = ("-s", "-gib", "-usd", "-tokens")


def _as_typed(exc: TokenplanError, argv: Sequence[str]) -> str:
    """The error's line, naming an :class:`InputError`'s field as the option the user typed:
    ``max_num_batched_tokens 0`` → ``--max-num-batched-tokens 0``, ``samples -5`` → ``--samples -5``,
    ``n 0`` → ``-n 0`` where ``-n`` was typed: one name from the flag to the message. A field the
    command line did not carry (a job file's key, a column, a config.json key) stays as it is."""
    text = str(exc)
    field = getattr(exc, "field", None)
    if not isinstance(exc, InputError) or not isinstance(field, str) or field.startswith("-"):
        return text
    if not text.startswith(field + " ") or " " in field:
        return text
    spelled = field.replace("_", "-")
    bare = spelled.rsplit("-", 1)[0] if spelled.endswith(UNIT_SUFFIXES) else spelled  # progress-every-s
    for flag in (f"--{spelled}", f"-{spelled}", f"--{bare}", *OPTION_ALIASES.get(field, ())):
        if any(arg == flag or arg.startswith(flag + "=") for arg in argv):
            return flag + text[len(field) :]
    return text


def require_command(ctx: click.Context) -> None:
    """Refuse a group called without a command: one line naming its commands, exit status 2.

    Raises:
        click.UsageError: when ``ctx`` has no subcommand to run.
    """
    if ctx.invoked_subcommand is None and not ctx.resilient_parsing:
        commands = ", ".join(ctx.command.list_commands(ctx))  # type: ignore[attr-defined]
        raise click.UsageError(f"{ctx.command_path} needs a command: one of {commands}", ctx)


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from tokenplan import __version__

        print(f"tokenplan {__version__}")
        ctx.exit()


@click.group(
    "tokenplan",
    cls=Group,
    lazy=COMMAND_MODULES,
    invoke_without_command=True,
    context_settings={"show_default": True, "max_content_width": 200},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print tokenplan's version and exit.",
)
@click.pass_context
def app(ctx: click.Context) -> None:
    """Plan, check and run LLM data-generation jobs: memory, throughput, days and dollars."""
    require_command(ctx)


def console():  # noqa: ANN201 - a rich Console (rich is imported only when a command prints a table)
    """A rich console: the terminal's width (or ``COLUMNS`` where set), else 200 columns when output
    goes to a file or a pipe (where rich would otherwise assume 80 and squeeze the tables)."""
    import os

    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1 here: the same status as "no answer"
            self.quiet = True
            _quiet_stdout()
            raise SystemExit(BROKEN_PIPE_EXIT)

    out = _Console()
    return out if out.is_terminal or os.environ.get("COLUMNS") else _Console(width=200)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe raises no
    second error (the Python documentation's note on SIGPIPE)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def exit_status(status: int) -> None:
    """End the command with ``status`` (0: return normally), as click's ``ctx.exit`` does."""
    if status:
        click.get_current_context().exit(status)
