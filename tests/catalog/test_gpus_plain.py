"""The pydantic-free reading of ``gpus.yaml`` (catalog/gpus_plain.py) gives exactly GpuEntry's values
or steps aside: on the shipped file it answers every entry, equal to ``GpuEntry.to_gpu``; on an
altered entry it either answers the same values as GpuEntry or answers None (GpuEntry then decides),
and it never answers for an entry GpuEntry refuses."""

from __future__ import annotations

import copy
import importlib.resources
import subprocess
import sys

import pydantic
import pytest
import yaml

from tokenplan.catalog.gpus import GpuEntry
from tokenplan.catalog.gpus_plain import plain_gpus


def _raw() -> dict:
    text = (importlib.resources.files("tokenplan.catalog") / "gpus.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - as catalog._read_yaml


RAW = _raw()


def _by_pydantic(raw: dict) -> dict:
    entries = {key: GpuEntry.model_validate(entry) for key, entry in raw.items()}
    return {key: (entry.to_gpu(key), tuple(entry.aliases)) for key, entry in entries.items()}


def test_shipped_file_is_read_plainly_and_equal_to_pydantic() -> None:
    plain = plain_gpus(RAW)
    assert plain is not None  # the shipped file needs no pydantic at start-up
    assert list(plain) == list(RAW)  # the file's order (aliases resolve in it)
    assert plain == _by_pydantic(RAW)
    # spot check by hand: gpus.yaml's rtx-pro-6000 host link is written `6.4e10` (a YAML 1.1
    # string: no signed exponent) and must read as 64 GB/s, as pydantic coerces it
    assert plain["rtx-pro-6000"][0].host_link.bytes_per_s == 6.4e10


def _set(path: tuple[str, ...], value: object):
    def alter(entry: dict) -> None:
        for key in path[:-1]:
            entry = entry[key]
        entry[path[-1]] = value

    return alter


def _drop(path: tuple[str, ...]):
    def alter(entry: dict) -> None:
        for key in path[:-1]:
            entry = entry[key]
        del entry[path[-1]]

    return alter


# (what is altered, how, what pydantic says: True accepts, False refuses)
ALTERATIONS = [
    ("memory as an int", _set(("memory", "bytes"), 192_000_000_000), True),
    ("memory as a decimal string", _set(("memory", "bytes"), "1.92e11"), True),
    ("memory as a string with spaces", _set(("memory", "bytes"), " 1.92e11"), None),
    ("memory negative", _set(("memory", "bytes"), -1.0), False),
    ("memory zero", _set(("memory", "bytes"), 0), False),
    ("memory infinite", _set(("memory", "bytes"), float("inf")), True),
    ("memory nan", _set(("memory", "bytes"), float("nan")), False),
    ("memory a bool", _set(("memory", "bytes"), True), None),
    ("source too short", _set(("memory", "source"), "ab"), False),
    ("source missing", _drop(("bandwidth", "source")), False),
    ("unknown key", _set(("unknown",), 1), False),
    ("unknown nested key", _set(("scaleup", "speed"), 1), False),
    ("vendor not allowed", _set(("vendor",), "intel"), False),
    ("vendor of another architecture", _set(("vendor",), "amd"), False),
    ("architecture not allowed", _set(("architecture",), "volta"), False),
    ("a flop format not allowed", _set(("compute", "dense_flops_per_s", "int4"), 1e15), False),
    ("a dtype not allowed", _set(("native_dtypes", "dtypes"), ["bf16", "fp64"]), False),
    ("dtypes as a tuple", _set(("native_dtypes", "dtypes"), ("bf16",)), True),
    ("link kind not allowed", _set(("scaleup", "kind"), "ethernet"), False),
    ("max_gpus as a float", _set(("scaleup", "max_gpus"), 8.0), True),
    ("max_gpus zero", _set(("scaleup", "max_gpus"), 0), False),
    ("max_gpus absent", _drop(("scaleup", "max_gpus")), True),
    ("no price", _set(("price",), None), True),
    ("a node of 4", _set(("node",), {"gpus": 4, "source": "a tray of four"}), True),
    ("a node of 0", _set(("node",), {"gpus": 0, "source": "a tray of none"}), False),
    ("aliases not strings", _set(("aliases",), [1]), False),
    ("notes a number", _set(("notes",), 3), False),
    ("compute capability a float", _set(("compute_capability",), 10.0), False),
    ("name missing", _drop(("name",)), False),
]


@pytest.mark.parametrize(("what", "alter", "accepted"), ALTERATIONS, ids=[a[0] for a in ALTERATIONS])
def test_altered_entry_is_pydantics_value_or_left_to_pydantic(what: str, alter, accepted: bool | None) -> None:
    raw = copy.deepcopy(RAW)
    alter(raw["b200"])
    plain = plain_gpus(raw)
    try:
        expected = _by_pydantic(raw)
    except pydantic.ValidationError:
        assert accepted is not True, what
        assert plain is None, what  # never answers for an entry GpuEntry refuses
        return
    assert accepted is not False, what
    assert plain is None or plain == expected, what


def test_not_a_mapping_is_left_to_pydantic() -> None:
    assert plain_gpus([RAW["b200"]]) is None
    assert plain_gpus({1: RAW["b200"]}) is None


def test_plan_imports_no_pydantic() -> None:
    """The default ``tokenplan plan`` (no job file, no profile) reads the catalog without pydantic
    (~0.1 s of start-up: the import and GpuEntry's models)."""
    probe = (
        "import contextlib, io, sys\nsys.argv = ['tokenplan', 'plan']\nfrom tokenplan.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main()\n    except SystemExit:\n"
        "        pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"
