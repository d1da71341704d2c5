"""Write the README's demo input for ``tokenplan generate``: ``python tests/support/make_demo_input.py OUT.jsonl``.

21 lines: 20 rows, four in each of the five shapes ``generate`` reads, and one broken line:

- SpecForge ``conversations`` (``role``/``content``; ``spec-0`` has two user turns, so the 20
  rows make 21 requests in ``regenerate`` mode),
- ShareGPT ``conversations`` (``from``/``value``),
- OpenAI ``messages``,
- OpenAI Batch API lines (``custom_id``, ``body.messages``),
- a plain ``prompt`` (no id: its id is the hash of its messages).

The shapes take turns, so line 4 is ``batch-0`` ("Count to three."), the record the README shows;
line 11 is not JSON and goes to ``rejects.jsonl``. The file is the same byte for byte every time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

QUESTIONS = ["Count to three.", "Name a colour.", "Say hello.", "What is two plus two?"]
BROKEN_LINE = '{"prompt": "this line is cut off'


def _row(shape: str, i: int) -> dict:
    q = QUESTIONS[i]
    if shape == "conversations":
        turns = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": q},
            {"role": "assistant", "content": "old answer"},
        ]
        if i == 0:
            turns += [{"role": "user", "content": "And then?"}, {"role": "assistant", "content": "old answer 2"}]
        return {"id": f"spec-{i}", "conversations": turns}
    if shape == "sharegpt":
        return {"id": f"share-{i}", "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": "old"}]}
    if shape == "messages":
        return {"id": f"msg-{i}", "messages": [{"role": "user", "content": q}]}
    if shape == "batch":
        return {
            "custom_id": f"batch-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"messages": [{"role": "user", "content": q}]},
        }
    return {"prompt": f"{q} (prompt {i})"}


SHAPES = ("conversations", "sharegpt", "messages", "batch", "prompt")


def demo_lines() -> list[str]:
    """The 21 lines of the demo input (without newlines)."""
    rows = [json.dumps(_row(shape, i)) for i in range(4) for shape in SHAPES]
    return rows[:10] + [BROKEN_LINE] + rows[10:]


def write_demo_input(path: Path) -> Path:
    """Write the demo input to ``path``; return it."""
    path.write_text("".join(line + "\n" for line in demo_lines()), encoding="utf-8")
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/support/make_demo_input.py OUT.jsonl")
    print(write_demo_input(Path(sys.argv[1])))
