"""Every README plan example renders at 80 and 110 columns without a number cut in two.

rich folds a cell narrower than its longest word mid-word; the plan and provisioning tables are
:class:`~tokenplan.report.fold.FoldingTable`s, which keep every word whole (side by side where the
width allows, stacked per option where it does not). Each README ``$ tokenplan plan …`` example is
run once with ``--json`` (a real CLI subprocess), then its tables and details are rendered at each
width; every word of every cell that holds a digit must appear whole in the rendered lines.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tokenplan.planning.results import PlanResult
from tokenplan.report.tables import plan_details, plan_table, provisioning_table

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "import sys; sys.argv[0] = 'tokenplan'; from tokenplan.cli import main; sys.exit(main())"
BOX = re.compile(r"[│┃┆┊║|]")


def _readme_plan_commands() -> list[str]:
    spec = importlib.util.spec_from_file_location("readme_outputs", ROOT / "tools" / "readme_outputs.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    return [e.tokenplan_command for e in module.examples(lines) if e.command.startswith("tokenplan plan")]


COMMANDS = _readme_plan_commands()


def _words(text: str) -> set[str]:
    return set(BOX.sub(" ", text).split())


def _cell_words(table) -> set[str]:
    cells = [c.plain if hasattr(c, "plain") else str(c) for row in table.rows for c in row]
    return {w for cell in cells for w in cell.split() if any(ch.isdigit() for ch in w)}


def test_the_readme_has_plan_examples():
    assert len(COMMANDS) >= 3, COMMANDS


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_plan_example_keeps_every_number_whole_at_80_and_110_columns(command, tmp_path):
    args = shlex.split(command)[1:] + ["--json"]
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    if done.returncode == 2:  # an example of a refused option (one error line): no table to render
        assert done.stdout == "" and done.stderr.startswith("error: ")
        return
    result = PlanResult.from_json(json.loads(done.stdout))
    tables = [t for t in (provisioning_table(result), plan_table(result)) if t is not None]
    expected = set().union(*(_cell_words(t) for t in tables))
    assert expected  # figures such as "53,738" and "(49,124–64,722)"
    for width in (80, 110, 200):
        out = io.StringIO()
        console = Console(file=out, width=width, no_color=True, legacy_windows=False)
        for t in tables:
            console.print(t)
        console.print(plan_details(result))
        rendered = out.getvalue()
        assert max(len(line) for line in rendered.splitlines()) <= width
        missing = expected - _words(rendered)
        assert not missing, f"{command} at {width} columns cuts {sorted(missing)[:5]}"
