"""One vocabulary: old spellings are hidden aliases; every help page describes every option,
states defaults, and shows no Python type tags or ``{NAME}`` placeholders."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from tokenplan.cli import app
from tokenplan.cli.params import current_spellings

ROOT = app


def _commands():
    # the group loads a command's module on first use: list_commands/get_command load them all
    out = []
    ctx = click.Context(ROOT)
    for name in ROOT.list_commands(ctx):
        cmd = ROOT.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", cmd.get_command(ctx, sub)) for sub in cmd.list_commands(ctx)]
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
    assert "Usage: tokenplan " + name in text
    assert not re.search(r"<(list\[|str>|int>|float>|path>|bool>)", text), text
    assert not re.search(r"\{[A-Za-z_]+\}", text), text


def test_plan_help_keeps_its_bracketed_defaults():
    text = " ".join(CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "200"}).output.split())
    for default in ("[default: qwen3.6-27b]", "[default: 914000]", "[default: 1024]", "[default: sglang]"):
        assert default in text


def test_one_default_engine():
    defaults = {name: {p.opts[0]: p.get_default(click.Context(cmd)) for p in cmd.params} for name, cmd in COMMANDS}
    # an option with no default (plan: the job file or the api decides) holds none to compare
    engines = {name: d["--engine"] for name, d in defaults.items() if isinstance(d.get("--engine"), str)}
    assert set(engines.values()) == {"sglang"}, engines


def test_one_name_per_idea():
    # The same idea is spelled the same way wherever it appears.
    names = {opt for _, cmd in COMMANDS for p in cmd.params for opt in p.opts}
    assert not {"--isl-mean", "--osl-mean", "--deadline-s", "--output"} & names
    assert {tuple(p.opts) for _, cmd in COMMANDS for p in cmd.params if "-o" in p.opts} == {("-o", "--out")}
    lengths = {opt for _, cmd in COMMANDS for p in cmd.params for opt in p.opts if "sl" in opt}
    assert lengths <= {"--isl", "--osl", "--isl-sigma", "--osl-sigma", "--isl-cap"}, lengths


OLD_SPELLINGS = {name: cmd.old_spellings for name, cmd in COMMANDS if getattr(cmd, "old_spellings", None)}


def test_the_old_spellings_kept():
    assert OLD_SPELLINGS == {
        "plan": {"--isl-mean": "--isl", "--osl-mean": "--osl"},
        "generate": {"--deadline-s": "--request-timeout"},
        "bench": {"--deadline": "--request-timeout"},
        "report": {"--output": "--out"},
        "calibrate": {"--config": "--model"},
    }


@pytest.mark.parametrize(
    "command, argv, expected",
    [
        ("plan", ["--isl-mean", "900", "--osl-mean=3000"], ["--isl", "900", "--osl=3000"]),
        ("generate", ["in.jsonl", "--deadline-s", "30"], ["in.jsonl", "--request-timeout", "30"]),
        ("bench", ["--deadline", "30"], ["--request-timeout", "30"]),
        ("report", ["run", "--output", "r.html"], ["run", "--out", "r.html"]),
        ("calibrate", ["--from-run", "d", "--config", "qwen3.6-27b"], ["--from-run", "d", "--model", "qwen3.6-27b"]),
        ("plan", ["--deadline", "2d"], ["--deadline", "2d"]),  # plan's --deadline is the job's
        ("generate", ["--", "--deadline-s"], ["--", "--deadline-s"]),
    ],
)
def test_old_spellings_are_rewritten(command, argv, expected):
    assert current_spellings(argv, OLD_SPELLINGS.get(command, {})) == expected


def test_every_alias_points_at_a_real_option():
    for name, cmd in COMMANDS:
        table = getattr(cmd, "old_spellings", {})
        names = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
        assert set(table.values()) <= names, (name, table)
        assert not set(table) & names, (name, table)  # hidden: not on the help page
        help_text = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"}).output
        assert not [old for old in table if old in help_text], (name, table)


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
