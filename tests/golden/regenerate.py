"""Write the golden ``--json`` outputs of the README examples (``tests/golden/*.json``).

Run ONLY when a change of behaviour is intended (a refit of ``efficiency.json``, a new field in
the JSON, a corrected formula), never to make ``test_golden_json.py`` pass after a refactor:
a refactor must leave these bytes unchanged. Say in the commit message which behaviour changed
and why the files were regenerated.

Usage (from the worktree root)::

    python tests/golden/regenerate.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, HERE, run_case  # noqa: E402


def main() -> None:
    """Run every case in an empty directory and write its stdout next to this script."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in CASES.items():
            (HERE / name).write_text(run_case(args, Path(tmp)), encoding="utf-8")
            print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
