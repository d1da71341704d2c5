"""Usage errors from the command-line parser: one ``error:`` line, exit status 2, no traceback.

typer ≥ 0.22 bundles its own click and a plain ``pip install .`` no longer installs ``click``;
the test environment has ``click`` (other test extras pull it in), so each case also runs with
``click`` made unimportable, as on a fresh install.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCK_CLICK = "import sys; sys.modules['click'] = None; "
RUN = "from tokenplan.cli import main; main()"

CASES = {
    "no_command": ([], "needs a command"),
    "misspelt_command": (["plann"], "plan"),
    "unknown_option": (["plan", "--bogus-flag"], "--bogus-flag"),
    "close_option": (["plan", "--gpus", "8xh200"], "--gpu"),
    "bad_integer": (["plan", "--samples", "914,000"], "--samples"),
    "catalog_without_command": (["catalog"], "gpus, models"),
    "unknown_catalog": (["catalog", "foo"], "No such command 'foo' (allowed: gpus, models)"),
}


def _run(prefix: str, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", prefix + RUN, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("prefix", ["", BLOCK_CLICK], ids=["with_click", "without_click"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_usage_error_is_one_line(case, prefix):
    args, needle = CASES[case]
    r = _run(prefix, args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, r.stderr
    assert lines[0].startswith("error:") and needle in r.stderr
    assert r.stdout == ""


def test_version_prints_the_package_version():
    from tokenplan import __version__

    r = _run(BLOCK_CLICK, ["--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tokenplan {__version__}"


def test_a_command_that_exits_with_a_status_keeps_it(monkeypatch):
    # A SystemExit from inside a command passes through main's handlers untouched (each except
    # clause names a class that exists in the installed typer).
    import sys

    import pytest

    from tokenplan.cli import app, main, register_commands

    register_commands()  # commands load lazily; a test of the whole app loads them all

    @app.command("exit-130-for-test", hidden=True)
    def _exit() -> None:
        sys.exit(130)

    try:
        monkeypatch.setattr(sys, "argv", ["tokenplan", "exit-130-for-test"])
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code == 130
    finally:
        app.registered_commands.pop()
