"""Usage errors from the command-line parser: one ``error:`` line, exit status 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

RUN = "from tokenplan.cli import main; main()"

CASES = {
    "no_command": ([], "needs a command"),
    # a misspelt command gets the close match, as a misspelt option does (a new-user pass)
    "misspelt_command": (["plna"], "No such command 'plna'; did you mean plan? (allowed: bench,"),
    "unknown_option": (["plan", "--bogus-flag"], "--bogus-flag"),
    "close_option": (["plan", "--gpus", "8xh200"], "--gpu"),
    "bad_integer": (["plan", "--samples", "914,000"], "--samples"),
    "catalog_without_command": (["catalog"], "gpus, models"),
    "unknown_catalog": (["catalog", "foo"], "No such command 'foo' (allowed: gpus, models)"),
    "bad_number": (["plan", "--budget", "ten"], "--budget 'ten' is not allowed (allowed: a number)"),
    "missing_required": (["predict", "--gpu", "b200"], "Missing option '--model'"),
    # an option given more than once: click keeps the last value, and that is the one named
    "bad_repeated_integer": (["plan", "--tp", "x", "--tp", "2", "--tp", "y"], "--tp 'y' is not allowed"),
    # an option at the end without its value: click says it needs one; the option's help says which
    "missing_value": (["plan", "--gpu"], "Option '--gpu' requires an argument. (--gpu: Hardware option COUNTxKEY"),
    # an option whose value is the next option: click names only the argument left over
    "swallowed_option": (["plan", "--png", "--gpu", "b200"], "(--png took '--gpu' as its value: give --png a value)"),
}


def _run(prefix: str, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", prefix + RUN, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(CASES))
def test_usage_error_is_one_line(case):
    args, needle = CASES[case]
    r = _run("", args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, r.stderr
    assert lines[0].startswith("error:") and needle in r.stderr
    assert r.stdout == ""


def test_version_prints_the_package_version():
    from tokenplan import __version__

    r = _run("", ["--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tokenplan {__version__}"


def test_a_command_that_exits_with_a_status_keeps_it(monkeypatch):
    # A SystemExit from inside a command passes through main's handlers untouched.
    import sys

    from tokenplan.cli import app, main

    @app.command("exit-130-for-test", hidden=True)
    def _exit() -> None:
        sys.exit(130)

    try:
        monkeypatch.setattr(sys, "argv", ["tokenplan", "exit-130-for-test"])
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code == 130
    finally:
        del app.commands["exit-130-for-test"]


def test_a_typed_value_error_is_not_read_from_its_text():
    # The bad-value line comes from the exception's fields (option, value, allowed), so a value
    # that itself reads like click's own wording is still shown as given.
    r = _run("", ["plan", "--samples", "Invalid value for"])
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == (
        "error: --samples 'Invalid value for' is not allowed (allowed: an integer) (try 'tokenplan plan --help')"
    )


def test_ctrl_c_in_a_command_exits_130_with_one_word(monkeypatch, capsys):
    # click turns a KeyboardInterrupt into Abort (the interrupt as its cause); main says
    # "interrupted" and exits 130, the shell's status for SIGINT (128 + 2).
    from tokenplan.cli import app, main

    @app.command("interrupt-for-test", hidden=True)
    def _interrupt() -> None:
        raise KeyboardInterrupt

    try:
        monkeypatch.setattr(sys, "argv", ["tokenplan", "interrupt-for-test"])
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code == 130
        assert capsys.readouterr().err.split() == ["interrupted"]
    finally:
        del app.commands["interrupt-for-test"]


def test_a_reader_that_closes_stdout_early_ends_the_command_with_the_sigpipe_status():
    # `tokenplan plan | head -1`: the table's first line is read, then the pipe closes. The status
    # is 141 (128 + SIGPIPE), as a shell reports it, not 1 (plan's "no option runs the job"), and
    # nothing is written to stderr.
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "tokenplan", "plan"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    # 0 where the child wrote all of it into the pipe's buffer before the close (a race on a loaded
    # machine); never 1, which it was whenever the close came first (rich's own broken-pipe exit)
    assert proc.wait(timeout=120) in (0, 141)
    assert err == b""
