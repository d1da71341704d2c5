"""Make ``tests.support`` importable (the fault server the client tests talk to)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
