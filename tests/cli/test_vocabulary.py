"""One vocabulary: old spellings are hidden aliases; every help page describes every option,
states defaults, and shows no Python type tags or ``{NAME}`` placeholders."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from tokenplan.cli import app, register_commands

register_commands()  # commands load lazily; a test of the whole app loads them all
from tokenplan.cli.vocabulary import OLD_SPELLINGS, current_spellings

ROOT = get_command(app)


def _commands():
    out = []
    for name, cmd in ROOT.commands.items():
        if hasattr(cmd, "commands"):
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
        else:
            out.append((name, cmd))
    return out


COMMANDS = _commands()


@pytest.mark.parametrize("name, cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_has_a_description(name, cmd):
    missing = [p.opts[0] for p in cmd.params if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"{name}: no help for {missing}"


@pytest.mark.parametrize("name, cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_help_page_has_no_type_tags_or_placeholders(name, cmd):
    result = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert not re.search(r"<(list\[|str>|int>|float>|path>|bool>)", text), text
    assert not re.search(r"\{[A-Za-z_]+\}", text), text


def test_plan_help_keeps_its_bracketed_defaults():
    text = " ".join(CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "200"}).output.split())
    for default in ("[default: qwen3.6-27b]", "[default: 914000]", "[default: 1024]", "[default: sglang]"):
        assert default in text


def test_one_default_engine():
    engines = {
        name: p.default
        for name, cmd in COMMANDS
        for p in cmd.params
        if p.opts and p.opts[0] == "--engine" and p.default is not None
    }
    assert set(engines.values()) == {"sglang"}, engines


def test_one_name_per_idea():
    # The same idea is spelled the same way wherever it appears.
    names = {opt for _, cmd in COMMANDS for p in cmd.params for opt in p.opts}
    assert not {"--isl-mean", "--osl-mean", "--deadline-s", "--output"} & names
    assert {tuple(p.opts) for _, cmd in COMMANDS for p in cmd.params if "-o" in p.opts} == {("-o", "--out")}
    lengths = {opt for _, cmd in COMMANDS for p in cmd.params for opt in p.opts if "sl" in opt}
    assert lengths <= {"--isl", "--osl", "--isl-sigma", "--osl-sigma", "--isl-cap"}, lengths


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["plan", "--isl-mean", "900", "--osl-mean=3000"], ["plan", "--isl", "900", "--osl=3000"]),
        (["generate", "in.jsonl", "--deadline-s", "30"], ["generate", "in.jsonl", "--request-timeout", "30"]),
        (["bench", "--deadline", "30"], ["bench", "--request-timeout", "30"]),
        (["report", "run", "--output", "r.html"], ["report", "run", "--out", "r.html"]),
        (
            ["calibrate", "--from-run", "d", "--config", "qwen3.6-27b"],
            ["calibrate", "--from-run", "d", "--model", "qwen3.6-27b"],
        ),
        (["plan", "--deadline", "2d"], ["plan", "--deadline", "2d"]),  # plan's --deadline is the job's
        (["generate", "--", "--deadline-s"], ["generate", "--", "--deadline-s"]),
    ],
)
def test_old_spellings_are_rewritten(argv, expected):
    assert current_spellings(argv) == expected


def test_every_alias_points_at_a_real_option():
    for command, table in OLD_SPELLINGS.items():
        cmd = ROOT.commands[command]
        names = {opt for p in cmd.params for opt in p.opts}
        assert set(table.values()) <= names, (command, table)
        assert not set(table) & names, (command, table)  # hidden: not on the help page


def test_old_spelling_works_end_to_end(capsys, monkeypatch):
    import json
    import sys

    from tokenplan.cli import main

    monkeypatch.setattr(
        sys, "argv", ["tokenplan", "plan", "--gpu", "1xb200", "--spec", "none", "--isl-mean", "900", "--json"]
    )
    main()  # returns on success
    assert json.loads(capsys.readouterr().out)["job"]["isl_mean_tokens"] == pytest.approx(
        900, rel=1e-3
    )  # capped lognormal: mean ≈ 900
