"""``gpus.yaml`` to :class:`~tokenplan.hardware.Gpu` values without pydantic: the start-up path.

Importing pydantic and building :class:`~tokenplan.catalog.gpus.GpuEntry`'s models costs more
than a whole ``tokenplan plan`` search (~0.1 s of a ~0.4 s run), and every run reads the GPU
catalog. :func:`plain_gpus` applies the same checks as ``GpuEntry`` (required and unknown keys,
positive finite numbers, strings of at least 3 characters for a source, the literal sets, the
vendor of the architecture), but only to entries written in the plain form the shipped file uses
(numbers as YAML ints, floats or decimal strings, lists as lists). It answers None for any entry it cannot pass
by these rules, an entry pydantic might still accept after coercion (``"1e9"``, ``8.0`` for an
int, ``inf``) as well as a bad one; the caller then validates the whole file with ``GpuEntry``,
which accepts or raises exactly as before. So a value either comes from here, equal to what
``GpuEntry(...).to_gpu(key)`` gives, or from pydantic; the error for a bad file is always
pydantic's. ``tests/catalog/test_gpus_plain.py`` compares both on the shipped file and on
altered entries.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tokenplan.hardware import ARCHITECTURE_VENDOR, Gpu, Link, LinkKind, Price
from tokenplan.units import Dtype

# GpuEntry's fields (catalog/gpus.py): required, then optional with their defaults.
_REQUIRED = frozenset(
    ("name", "vendor", "architecture", "compute_capability", "memory", "bandwidth", "compute")
    + ("native_dtypes", "scaleup", "host_link")
)
_OPTIONAL = frozenset(("price", "notes", "aliases", "node"))
_VENDORS = frozenset(("nvidia", "amd"))
_ARCHITECTURES = frozenset(
    ("ampere", "ada", "hopper", "blackwell", "blackwell-ultra", "blackwell-gb202", "cdna3", "cdna4")
)
_FLOP_FORMATS = frozenset(("bf16", "fp8", "fp4"))
_DTYPES = {d.value: d for d in Dtype}
_LINK_KINDS = {k.value: k for k in LinkKind}


class _NotPlain(Exception):
    """An entry this module does not judge: pydantic decides."""


def _fields(obj: object, required: frozenset[str], optional: frozenset[str] = frozenset()) -> dict[str, Any]:
    if type(obj) is not dict or not required <= obj.keys() <= required | optional:
        raise _NotPlain
    return obj


# A decimal number as PyYAML leaves it a string (YAML 1.1 floats need a signed exponent: ``6.4e10``
# is a string, ``6.4e+10`` a float): digits, an optional fraction, an optional exponent, nothing
# else (no sign, space, ``_``, ``inf`` or ``nan``); pydantic's float parse of it is this value.
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?")


def _positive(value: object) -> float:
    if type(value) is str and _DECIMAL.fullmatch(value):
        number = float(value)
    elif type(value) is float or (type(value) is int and abs(value) < 2**1000):
        number = float(value)
    else:
        raise _NotPlain
    if not (math.isfinite(number) and number > 0):
        raise _NotPlain
    return number


def _count(value: object) -> int:
    if type(value) is not int or value <= 0:
        raise _NotPlain
    return value


def _text(value: object, min_length: int = 0) -> str:
    if type(value) is not str or len(value) < min_length:
        raise _NotPlain
    return value


def _source(part: dict[str, Any]) -> str:
    return _text(part["source"], 3)


def _one_of(value: object, allowed: frozenset[str] | dict[str, Any]) -> str:
    if type(value) is not str or value not in allowed:
        raise _NotPlain
    return value


def _link(obj: object) -> tuple[Link, int]:
    part = _fields(obj, frozenset(("kind", "name", "bytes_per_s", "latency_s", "source")), frozenset(("max_gpus",)))
    _source(part)
    link = Link(
        _LINK_KINDS[_one_of(part["kind"], _LINK_KINDS)],
        _text(part["name"]),
        _positive(part["bytes_per_s"]),
        _positive(part["latency_s"]),
    )
    return link, _count(part.get("max_gpus", 1))


def _price(obj: object) -> Price | None:
    if obj is None:
        return None
    keys = ("low_usd_per_hour", "high_usd_per_hour", "typical_usd_per_hour")
    part = _fields(obj, frozenset(keys + ("as_of", "source")))
    low, high, typical = (_positive(part[k]) for k in keys)
    return Price(low, high, typical, _text(part["as_of"]), _source(part))


def _gpu(key: str, obj: object) -> tuple[Gpu, tuple[str, ...]]:
    entry = _fields(obj, _REQUIRED, _OPTIONAL)
    vendor, architecture = _one_of(entry["vendor"], _VENDORS), _one_of(entry["architecture"], _ARCHITECTURES)
    memory = _fields(entry["memory"], frozenset(("bytes", "source")))
    bandwidth = _fields(entry["bandwidth"], frozenset(("hbm_bytes_per_s", "source")))
    compute = _fields(entry["compute"], frozenset(("dense_flops_per_s", "source")))
    native = _fields(entry["native_dtypes"], frozenset(("dtypes", "source")))
    for part in (memory, bandwidth, compute, native):
        _source(part)
    flops, dtypes = compute["dense_flops_per_s"], native["dtypes"]
    if type(flops) is not dict or type(dtypes) is not list:
        raise _NotPlain
    scaleup, max_gpus = _link(entry["scaleup"])
    host_link, _ = _link(entry["host_link"])
    node = entry.get("node")
    if node is not None:
        node_part = _fields(node, frozenset(("gpus", "source")))
        _source(node_part)
        node_gpus = _count(node_part["gpus"])
    else:  # GpuEntry.node_gpus: one PCIe card, else the whole scale-up board
        node_gpus = 1 if scaleup.kind == "pcie" else max_gpus
    notes, aliases = entry.get("notes"), entry.get("aliases", [])
    if (notes is not None and type(notes) is not str) or type(aliases) is not list:
        raise _NotPlain
    if ARCHITECTURE_VENDOR.get(architecture) != vendor:  # GpuEntry's model validator
        raise _NotPlain
    gpu = Gpu(
        key=key,
        name=_text(entry["name"]),
        vendor=vendor,
        architecture=architecture,
        compute_capability=_text(entry["compute_capability"]),
        memory_bytes=_positive(memory["bytes"]),
        hbm_bytes_per_s=_positive(bandwidth["hbm_bytes_per_s"]),
        dense_flops_per_s={_one_of(k, _FLOP_FORMATS): _positive(v) for k, v in flops.items()},
        native_dtypes=frozenset(_DTYPES[_one_of(d, _DTYPES)] for d in dtypes),
        scaleup=scaleup,
        host_link=host_link,
        max_gpus_per_scaleup=max_gpus,
        node_gpus=node_gpus,
        price=_price(entry.get("price")),
    )
    return gpu, tuple(_text(a) for a in aliases)


def plain_gpus(raw: object) -> dict[str, tuple[Gpu, tuple[str, ...]]] | None:
    """Catalog key → (its Gpu, without GEMM curves; its aliases), in the file's order, for a
    parsed ``gpus.yaml`` whose every entry passes GpuEntry's checks in plain form; None when
    any entry does not (validate the file with GpuEntry then). Raises nothing."""
    if type(raw) is not dict:
        return None
    try:
        return {_text(key): _gpu(key, entry) for key, entry in raw.items()}
    except _NotPlain:
        return None
