"""The README's `tokenplan plan`/`predict`/`memory` examples show what those commands print today.

Each example is rerun as a user would (subprocess, 200 columns); a refit or a changed table that
leaves a stale example fails here. `python tools/readme_outputs.py --write` refreshes them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_outputs", ROOT / "tools" / "readme_outputs.py")
readme_outputs = importlib.util.module_from_spec(_spec)
sys.modules["readme_outputs"] = readme_outputs
_spec.loader.exec_module(readme_outputs)


def test_readme_has_the_examples_it_checks():
    # The README shows `tokenplan plan` (the mission's question), the provisioning example and two
    # one-line errors (`plan --gpu 8xh100`, `predict --tp 3`): at least these four are checked.
    lines = readme_outputs.README.read_text(encoding="utf-8").split("\n")
    commands = [example.command for example in readme_outputs.examples(lines)]
    assert "tokenplan plan" in commands
    assert "tokenplan plan --gpu 8xh100" in commands
    assert len(commands) >= 4


def test_every_example_output_is_current():
    lines = readme_outputs.README.read_text(encoding="utf-8").split("\n")
    outdated = readme_outputs.stale(lines)
    assert not outdated, "stale README examples (run `python tools/readme_outputs.py --write`): " + ", ".join(
        f"line {e.first_line + 1}: {e.command}" for e, _ in outdated
    )


def test_an_elided_example_compares_only_its_head(tmp_path):
    # A block of 2 shown lines + "…" keeps 2 fresh lines and the marker; a changed second line is
    # stale, extra lines after the head are not.
    lines = ["```", "$ tokenplan plan --gpu 8xh100", "a", "b", "…", "```"]
    (example,) = readme_outputs.examples(lines)
    assert example.shown == ["a", "b", "…"]
    assert readme_outputs.as_shown(example, ["a", "b", "c", "d"]) == ["a", "b", "…"]
    assert readme_outputs.as_shown(example, ["a", "x", "c"]) == ["a", "x", "…"] != example.shown
    # Without the marker the whole output is compared.
    (whole,) = readme_outputs.examples(["```", "$ tokenplan predict", "a", "```"])
    assert readme_outputs.as_shown(whole, ["a", "b"]) == ["a", "b"]


def test_a_piped_example_shows_what_the_pipeline_keeps_and_every_error_line():
    # `… | sed -n 1p` keeps the first line of stdout, as in a shell; the command's own part (what
    # other README tests rerun) is the text before " | ". An error goes to stderr, around the pipe:
    # `sed d` deletes all of stdout, yet the one error line still shows, as on a terminal.
    (example,) = readme_outputs.examples(["```", "$ tokenplan plan --gpu 8xb200 | sed -n 1p", "x", "```"])
    assert example.tokenplan_command == "tokenplan plan --gpu 8xb200"
    whole = readme_outputs.run(example.tokenplan_command)
    assert len(whole) > 1
    assert readme_outputs.run(example.command) == whole[:1]
    refused = readme_outputs.run("tokenplan predict --model llama-3.1-8b --gpu h100-sxm --tp 3 | sed d")
    assert refused == [
        "error: configuration cannot run: TP3 does not divide the 32 attention heads (allowed TP: 1, 2, 4, 8, 16, 32)"
    ]
