"""``generate --dry-run`` with a local model directory in the core install (newuser finding 4): the
tokenizer defaults to ``--model``, and without transformers (in no extra but ``test``) the dry run
used to fail naming a ``--tokenizer`` the user never gave. Now a defaulted tokenizer that needs
transformers is left out with a note (no token statistics, as for a catalog ``--model``); an
explicit ``--tokenizer`` is refused in one line that says to install transformers; a tokenizer
transformers cannot load is named by the option it came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# the core install: transformers cannot be imported (None in sys.modules halts the import)
WITHOUT_TRANSFORMERS = "import sys; sys.modules['transformers'] = None; from tokenplan.cli import main; main()"
WITH = "from tokenplan.cli import main; main()"


def _dry_run(tmp_path: Path, code: str, *options: str) -> subprocess.CompletedProcess:
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    model = tmp_path / "tiny-model"
    model.mkdir(exist_ok=True)
    (model / "tokenizer_config.json").write_text("{}")  # what makes --model a tokenizer directory
    args = ["generate", "in.jsonl", "--out", "run", "--endpoint", "http://127.0.0.1:9/v1", "--dry-run", *options]
    if "--model" not in options:
        args += ["--model", str(model)]
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False
    )


def test_a_local_model_without_transformers_gives_counts_without_tokens_and_a_note(tmp_path):
    text = _dry_run(tmp_path, WITHOUT_TRANSFORMERS)
    assert text.returncode == 0, text.stderr
    assert "--tokenizer" not in text.stderr and "Traceback" not in text.stderr
    stderr = " ".join(text.stderr.split())  # notes wrap at 80 columns off a terminal
    assert f"prompt tokens not counted: the tokenizer of --model {tmp_path / 'tiny-model'} needs the transformers" in (
        stderr
    )
    done = _dry_run(tmp_path, WITHOUT_TRANSFORMERS, "--json")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    # one row, one user turn, n = 1: one request; no tokenizer, so no prompt-token figures
    assert counts["requests"] == 1 and counts["prompt_tokens_mean"] is None and counts["tokenizer"] is None


def test_an_explicit_tokenizer_without_transformers_is_one_line_naming_the_package(tmp_path):
    done = _dry_run(tmp_path, WITHOUT_TRANSFORMERS, "--model", "m", "--tokenizer", "tiny-model")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("note:")]
    assert len(lines) == 1
    assert lines[0].startswith("error: --tokenizer 'tiny-model' is not allowed")
    assert "pip install transformers" in lines[0]


def test_a_local_model_transformers_cannot_load_is_named_as_model(tmp_path):
    # with transformers, an empty tokenizer_config.json and no vocabulary cannot load: the error
    # names --model, where the tokenizer came from, not a --tokenizer the user never gave
    done = _dry_run(tmp_path, WITH)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"error: --model '{tmp_path / 'tiny-model'}' is not allowed" in done.stderr
    assert "--tokenizer" not in done.stderr
