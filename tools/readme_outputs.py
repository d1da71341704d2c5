"""Check or rewrite the terminal output the README shows for ``tokenplan plan`` and ``predict``.

A README code block that starts with ``$ tokenplan plan`` (or ``predict``/``memory``) holds one or
more commands, each followed by what it printed. This script reruns each command the way a user
would see it (a subprocess, ``COLUMNS=200``, stderr merged into stdout, in an empty directory) and
compares with the block, so a refit or a changed table never leaves a stale example behind.

A block that shows only the head of a long output ends with a line holding ``…`` (ELLIPSIS): then
only that many lines are compared, and rewritten. A command may end in a shell pipeline that picks
the lines worth showing (``$ tokenplan plan | grep 'best is'``): it runs in ``sh`` as typed, with
``tokenplan`` this checkout's, so the figures a sentence would otherwise quote stay checked.

Usage (from the repository root)::

    python tools/readme_outputs.py            # list stale blocks, exit 1 if any
    python tools/readme_outputs.py --write    # rewrite them in README.md
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
COLUMNS = "200"
ELLIPSIS = "…"
# Commands whose output is deterministic and needs no files or servers.
# The console script's entry point, run with the README's program name.
ENTRY = "import sys; sys.argv[0] = 'tokenplan'; from tokenplan.cli import main; sys.exit(main())"
RERUN = re.compile(r"^\$ tokenplan (plan|predict|memory)\b")
PIPE = " | "
# A shell function standing for the console script, so a command line runs in sh as a user types it.
SHELL_TOKENPLAN = 'tokenplan() { "$README_PYTHON" -c "$README_ENTRY" "$@"; }\n'


@dataclass(frozen=True)
class Example:
    """One ``$ tokenplan …`` line of the README and the output lines printed under it."""

    first_line: int  # 0-based index in README.md of the ``$`` line
    command: str
    shown: list[str]

    @property
    def tokenplan_command(self) -> str:
        """The ``tokenplan …`` part of the command line, without a pipeline after it."""
        return self.command.split(PIPE, 1)[0]


def examples(lines: list[str]) -> list[Example]:
    """Every rerunnable command in a fenced block, with the lines up to the next ``$`` or fence."""
    found: list[Example] = []
    in_block = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = not in_block
            i += 1
            continue
        if in_block and RERUN.match(line):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(("$ ", "```")):
                j += 1
            found.append(Example(i, line[2:], lines[i + 1 : j]))
            i = j
            continue
        i += 1
    return found


def run(command: str) -> list[str]:
    """Lines printed by ``command`` (stdout and stderr in order) with the README's terminal width."""
    env = dict(os.environ, COLUMNS=COLUMNS, NO_COLOR="1", TERM="dumb", README_PYTHON=sys.executable)
    env["README_ENTRY"] = ENTRY
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    assert shlex.split(command)[0] == "tokenplan", command
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["sh", "-c", SHELL_TOKENPLAN + command],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
    return done.stdout.splitlines()


def stale(lines: list[str]) -> list[tuple[Example, list[str]]]:
    """(example, fresh output) for each example whose shown output differs from a rerun.

    The fresh output is cut to the shown head (plus the ``…`` line) where the example elides."""
    out = []
    for example in examples(lines):
        fresh = as_shown(example, run(example.command))
        if fresh != example.shown:
            out.append((example, fresh))
    return out


def as_shown(example: Example, fresh: list[str]) -> list[str]:
    """``fresh`` as the README would show it: cut to the head and ``…`` where the example elides."""
    if example.shown and example.shown[-1] == ELLIPSIS:
        return fresh[: len(example.shown) - 1] + [ELLIPSIS]
    return fresh


def main(argv: list[str]) -> int:
    """Report stale examples (exit 1), or with ``--write`` replace them in README.md (exit 0)."""
    lines = README.read_text(encoding="utf-8").split("\n")
    outdated = stale(lines)
    for example, _ in outdated:
        print(f"README.md:{example.first_line + 1}: output of `{example.command}` is stale")
    if "--write" not in argv:
        return 1 if outdated else 0
    for example, fresh in sorted(outdated, key=lambda pair: -pair[0].first_line):
        start = example.first_line + 1
        lines[start : start + len(example.shown)] = fresh
    README.write_text("\n".join(lines), encoding="utf-8")
    print(f"rewrote {len(outdated)} example(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
