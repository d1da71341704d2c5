"""The README's demo input (tests/support/make_demo_input.py): 20 rows, four in each of the five
shapes, one broken line, 21 user turns; line 4 is the record the README shows."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.support.make_demo_input import write_demo_input  # noqa: E402

from tokenplan.runner.input.rows import Reject, read_rows
from tokenplan.runner.input.shapes import Row


def test_demo_input_has_twenty_rows_in_five_shapes_and_one_broken_line(tmp_path: Path) -> None:
    path = write_demo_input(tmp_path / "data.jsonl")
    items = list(read_rows([path]))
    rows = [i for i in items if isinstance(i, Row)]
    rejects = [i for i in items if isinstance(i, Reject)]
    assert len(items) == 21 and len(rows) == 20
    assert Counter(r.shape for r in rows) == {"conversations": 4, "sharegpt": 4, "messages": 4, "batch": 4, "prompt": 4}
    assert [(r.line, r.reason.startswith("invalid JSON")) for r in rejects] == [(11, True)]
    # regenerate sends one request per user turn: 19 rows with one, spec-0 with two
    assert sum(sum(m.role == "user" for m in r.messages) for r in rows) == 21
    line4 = next(r for r in rows if r.line == 4)
    assert (line4.id, line4.shape, line4.messages[0].content) == ("batch-0", "batch", "Count to three.")


def test_the_script_writes_the_same_bytes_every_time(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/support/make_demo_input.py"), str(tmp_path / "a.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.jsonl").read_bytes() == write_demo_input(tmp_path / "b.jsonl").read_bytes()
