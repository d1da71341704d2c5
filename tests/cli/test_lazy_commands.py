"""A command imports only what it runs: ``tokenplan plan`` loads neither the HTTP client nor the
runner, bench or generate modules (they cost ~0.5 s of start-up, aiohttp alone ~0.25 s)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import contextlib, io, json, sys
sys.argv = ["tokenplan"] + sys.argv[1:]
from tokenplan.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""
NOT_NEEDED_TO_PLAN = (
    "aiohttp",
    "tokenplan.runner",
    "tokenplan.client",
    "tokenplan.bench",
    "tokenplan.api.generate",
    "tokenplan.api.bench",
    "tokenplan.cli.generate",
    "tokenplan.cli.bench",
)


def _modules(*args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_plan_imports_no_client_runner_or_bench():
    loaded = _modules("plan", "--json")
    assert "tokenplan.api.plan" in loaded  # the probe did run the plan
    assert [m for m in loaded if m.startswith(NOT_NEEDED_TO_PLAN)] == []


def test_version_imports_no_command():
    from tokenplan.cli import COMMAND_MODULES

    loaded = set(_modules("--version"))
    assert not [m for m in set(COMMAND_MODULES.values()) if f"tokenplan.cli.{m}" in loaded]


def test_help_lists_every_command():
    r = subprocess.run(
        [sys.executable, "-c", "from tokenplan.cli import main; main()", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0
    for command in ("plan", "predict", "memory", "generate", "bench", "calibrate", "validate", "report", "catalog"):
        assert command in r.stdout
