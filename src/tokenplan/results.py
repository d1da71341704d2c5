"""The typed results tokenplan writes as JSON, and the one way each is written and read back.

Every result is a frozen dataclass with :class:`JsonResult` mixed in: ``to_json()`` gives the dict
``--json`` prints and ``from_json(obj)`` reads such a dict back into the same type, so that
``type(r).from_json(r.to_json()) == r`` and a saved file reads as what the command returned. The
JSON keys are the field names, in field order, so each figure (``output_tok_s_total``,
``tpot_ms``, …) is spelled once, where it is declared. Three field markers shape the JSON:

- ``OMIT_NONE``: the key is left out while the value is None (a section that does not apply);
- ``INLINE``: the value's own JSON keys are merged in place of the key (optional groups of keys,
  such as an error band's ``<figure>_interval`` entries, or the figures of a chosen configuration);
  ``inline("tpot_")`` merges them with a prefix; a None value adds no key, and on reading, an
  optional inline group none of whose required keys is present reads as None;
- ``bounded(gt, le)``: a number read back must lie in the bounds (a figure whose derived form,
  such as days in seconds, would overflow);
- ``renamed(key)``: the JSON key differs from the field name (``Interval.outside`` is written
  ``outside_measured_regime``).

A result written on its own (a command's answer) sets ``SCHEMA_VERSION``; its JSON then starts
with ``"schema_version": <int>``, and reading refuses a version it does not know (an absent
version reads as version 1, the format files had before the field was written).

Reading checks each value against the field's annotation (texts, integers, finite numbers, lists,
mappings, nested results) and raises one :class:`~tokenplan.errors.ConfigError` naming the file,
the key's path (``options[0].usd_interval.low``), the value and what is allowed. Keys no field
claims are ignored. Units are in the names (``_bytes``, ``_ms``, ``_tok_s``, ``_days``, ``_usd``).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, Union

from tokenplan.errors import ConfigError

OMIT_NONE: Mapping[str, str] = {"json": "omit_none"}
INLINE: Mapping[str, str] = {"json": "inline"}
SCHEMA_KEY = "schema_version"
LEGACY_VERSION = 1  # what a file without a schema_version is read as (written before the field existed)

# The versions of the JSON outputs built as dicts rather than result types (checked on reading
# with check_version): a bench file (``tokenplan bench --json``/``--save``) and a generate run's
# ``summary.json`` (``generate --json`` prints it).
BENCH_SCHEMA_VERSION = 1
RUN_SUMMARY_SCHEMA_VERSION = 1

R = TypeVar("R", bound="JsonResult")


def inline(prefix: str) -> Mapping[str, str]:
    """Field metadata: merge the value's JSON keys, each with ``prefix`` before it."""
    return {"json": "inline", "prefix": prefix}


def renamed(key: str, omit_none: bool = False) -> Mapping[str, str]:
    """Field metadata: write (and read) the field under the JSON ``key``; with ``omit_none`` the
    key is left out while the value is None."""
    return {"key": key, **({"json": "omit_none"} if omit_none else {})}


def bounded(gt: float | None = None, le: float | None = None) -> Mapping[str, float]:
    """Field metadata: a number read back must be ``> gt`` and ``≤ le`` (where given; None passes)."""
    return {k: v for k, v in (("gt", gt), ("le", le)) if v is not None}


def _check_bounds(value: Any, meta: Mapping[str, Any], where: Reading) -> Any:
    if value is None:
        return value
    if "gt" in meta and not value > meta["gt"]:
        raise where.refuse(value, f"a number > {meta['gt']:g}")
    if "le" in meta and not value <= meta["le"]:
        raise where.refuse(value, f"a number ≤ {meta['le']:g}")
    return value


def plain(value: Any) -> Any:
    """``value`` as JSON-able Python: results through their ``to_json``, other dataclasses
    through ``as_dict`` where they have one (else ``dataclasses.asdict``), tuples as lists."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


class Reading:
    """Where a value being read sits: the file (or ``"JSON"``) and the key's path, for messages."""

    def __init__(self, source: str, path: str = "") -> None:
        self.source, self.path = source, path

    def at(self, key: str | int) -> Reading:
        """The reading one key (or list index) deeper."""
        if isinstance(key, int):
            return Reading(self.source, f"{self.path}[{key}]")
        return Reading(self.source, f"{self.path}.{key}" if self.path else key)

    def refuse(self, value: object, allowed: str) -> ConfigError:
        """The one-line error: the file, the key's path, the value and what is allowed."""
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        return ConfigError(self.source, self.path or "top level", f"{shown} is not allowed (allowed: {allowed})")


def check_version(obj: Mapping[str, Any], known: int, where: Reading) -> None:
    """Refuse a ``schema_version`` other than ``known`` (absent: :data:`LEGACY_VERSION`).

    Raises:
        ConfigError: ``<file>: schema_version: 7 is not allowed (allowed: 1, …)``.
    """
    version = obj.get(SCHEMA_KEY, LEGACY_VERSION)
    if type(version) is not int or version != known:
        raise where.at(SCHEMA_KEY).refuse(version, f"{known}, the schema this tokenplan reads and writes")


class JsonResult:
    """Mixin: ``to_json()`` from the dataclass fields and ``from_json()`` back (module docstring).

    ``SCHEMA_VERSION``: set on a result that is written on its own (a command's answer); raise it
    when a field changes meaning or is removed.
    """

    __slots__ = ()  # a slotted dataclass that mixes this in stays slotted
    SCHEMA_VERSION: ClassVar[int | None] = None

    def to_json(self) -> dict[str, Any]:
        """The JSON-able dict of this result: field name → value, in field order (after
        ``schema_version`` where the type has one)."""
        out: dict[str, Any] = {} if self.SCHEMA_VERSION is None else {SCHEMA_KEY: self.SCHEMA_VERSION}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            how = f.metadata.get("json")
            if value is None and how in ("omit_none", "inline"):
                continue
            if how == "inline":
                prefix, merged = f.metadata.get("prefix", ""), plain(value)
                for part in merged if isinstance(merged, list) else [merged]:
                    out.update({prefix + k: v for k, v in part.items()})
            else:
                out[f.metadata.get("key", f.name)] = plain(value)
        return out

    @classmethod
    def from_json(cls: type[R], obj: object, source: str = "JSON") -> R:
        """The result ``obj`` (what :meth:`to_json` wrote, parsed) describes.

        Args:
            obj: the parsed JSON object.
            source: the file it came from, named in errors.

        Raises:
            ConfigError: a key is missing or holds a value its field does not allow, or the
                ``schema_version`` is not this type's.
        """
        return cls.read(obj, Reading(source))

    @classmethod
    def read(cls: type[R], obj: object, where: Reading, prefix: str = "") -> R:
        """:meth:`from_json` at a place in a larger document (``where``); ``prefix``: the one an
        ``inline(prefix)`` field writes before each key."""
        if not isinstance(obj, Mapping):
            raise where.refuse(obj, f"a JSON object ({cls.__name__})")
        if cls.SCHEMA_VERSION is not None and not prefix:
            check_version(obj, cls.SCHEMA_VERSION, where)
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            tp = hints[f.name]
            if f.metadata.get("json") == "inline":
                values[f.name] = _read_inline(tp, obj, where, prefix + f.metadata.get("prefix", ""))
                continue
            key = prefix + f.metadata.get("key", f.name)
            if key in obj:
                values[f.name] = _check_bounds(read_value(tp, obj[key], where.at(key)), f.metadata, where.at(key))
            elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            elif _optional(tp) and f.metadata.get("json") == "omit_none":
                values[f.name] = None
            else:
                raise ConfigError(where.source, where.at(key).path, "missing")
        return cls(**values)

    @classmethod
    def present(cls, obj: Mapping[str, Any], prefix: str = "") -> bool:
        """Whether ``obj`` holds this type's keys (``prefix`` before each): any of its required
        fields is there. How an optional ``INLINE`` group tells itself from its absence."""
        return any(
            prefix + f.metadata.get("key", f.name) in obj
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of ``cls`` (strings under ``from __future__ import annotations``)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


def _read_inline(tp: Any, obj: Mapping[str, Any], where: Reading, prefix: str) -> Any:
    arms = [a for a in typing.get_args(tp) if a is not type(None)] if _optional(tp) else [tp]
    (kind,) = arms
    if typing.get_origin(kind) is tuple:  # a tuple merges its items' keys: each item reads them all
        raise TypeError(f"{kind}: an inline tuple has no generic reading; give the type its own read()")
    if _optional(tp) and not kind.present(obj, prefix):
        return None
    return kind.read(obj, where, prefix)


_KIND_WORDS = {str: "text", bool: "true or false", int: "an integer", float: "a finite number"}


def read_value(tp: Any, value: object, where: Reading) -> Any:
    """``value`` (parsed JSON) checked against the annotation ``tp`` and built into it: nested
    results through their ``read``, lists into tuples, objects into dicts. Raises ConfigError."""
    if tp is Any or tp is object:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        errors = []
        for arm in arms:
            try:
                return read_value(arm, value, where)
            except ConfigError as e:
                errors.append(e)
        if len(arms) == 1:
            raise errors[0]
        raise where.refuse(value, " or ".join(_words(a) for a in arms) + (" or null" if type(None) in args else ""))
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        if isinstance(value, list):
            item = args[0] if len(args) == 2 and args[1] is Ellipsis else Any
            return tuple(read_value(item, v, where.at(i)) for i, v in enumerate(value))
    elif origin in (Mapping, dict, typing.Mapping) or tp is dict:
        if isinstance(value, Mapping):
            item = args[1] if len(args) == 2 else Any
            return {k: read_value(item, v, where.at(k)) for k, v in value.items()}
    elif isinstance(tp, type) and issubclass(tp, JsonResult):
        return tp.read(value, where)
    else:
        raise TypeError(f"{tp!r}: no JSON reading for this annotation")
    raise where.refuse(value, _words(tp))


def _words(tp: Any) -> str:
    if tp in _KIND_WORDS:
        return _KIND_WORDS[tp]
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "a list"
    if origin in (Mapping, dict) or tp is dict:
        return "a JSON object"
    return f"a JSON object ({getattr(tp, '__name__', tp)})"


@dataclass(frozen=True, slots=True)
class Interval(JsonResult):
    """An interval on one figure: ``low``/``high`` in the figure's units, its nominal coverage
    (a fraction), the regime it came from and why it is wider (outside the measured regime), if
    it is. JSON: ``{"low", "high", "coverage", "regime"[, "outside_measured_regime"]}``."""

    low: float
    high: float
    coverage: float
    regime: str
    outside: str | None = field(default=None, metadata=renamed("outside_measured_regime", omit_none=True))

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (:meth:`to_json`)."""
        return self.to_json()


@dataclass(frozen=True)
class ErrorBand(JsonResult):
    """Where the error band of a configuration comes from: its ``regime``, the nominal
    ``coverage`` (a fraction) and, when it lies outside the measured regime, why."""

    regime: str
    coverage: float
    outside_measured_regime: str | None


@dataclass(frozen=True)
class Bands:
    """The error bands of a result's figures: figure field name → its interval (same units as
    the figure), and the band's regime. JSON: ``<figure>_interval`` per figure, ``error_band``;
    written ``INLINE`` in the result that holds the figures."""

    intervals: Mapping[str, Interval]
    error_band: ErrorBand | None

    SUFFIX: ClassVar[str] = "_interval"

    def to_json(self) -> dict[str, Any]:
        """``{"<figure>_interval": {...}, ..., "error_band": {...}}`` (only what is present)."""
        out: dict[str, Any] = {f"{key}{self.SUFFIX}": band.to_json() for key, band in self.intervals.items()}
        if self.error_band is not None:
            out["error_band"] = self.error_band.to_json()
        return out

    def of(self, figure: str) -> Interval | None:
        """The interval on ``figure`` (a field name such as ``"wall_days"``), or None."""
        return self.intervals.get(figure)

    @classmethod
    def read(cls, obj: Mapping[str, Any], where: Reading, prefix: str = "") -> Bands:
        """The ``<figure>_interval`` keys and ``error_band`` of ``obj`` (``prefix`` before each)."""
        intervals = {
            key[len(prefix) : -len(cls.SUFFIX)]: Interval.read(value, where.at(key))
            for key, value in obj.items()
            if key.startswith(prefix) and key.endswith(cls.SUFFIX)
        }
        band = obj.get(prefix + "error_band")
        return cls(intervals, None if band is None else ErrorBand.read(band, where.at(prefix + "error_band")))

    @classmethod
    def present(cls, obj: Mapping[str, Any], prefix: str = "") -> bool:
        """Whether ``obj`` holds any interval or an ``error_band``."""
        return any(k.startswith(prefix) and k.endswith(cls.SUFFIX) for k in obj) or prefix + "error_band" in obj
