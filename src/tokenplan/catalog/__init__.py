"""Shipped catalogs — GPUs, models, engines, efficiency — and their loaders.

The only module that reads package data (``importlib.resources``). Each file is validated once
and cached; lookups by unknown names raise :class:`~tokenplan.errors.CatalogError` listing the
known names.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from tokenplan.arch.hf_config import parse_hf_config
from tokenplan.arch.spec import ModelSpec
from tokenplan.catalog.gpus import GpuEntry
from tokenplan.errors import CatalogError, ConfigError, InputError
from tokenplan.hardware import Gpu
from tokenplan.perf.efficiency import EFFICIENCY_FIELDS, Efficiency, EfficiencyTable
from tokenplan.perf.engine import EngineFacts, SglangBucket

_PKG = resources.files("tokenplan.catalog")


@lru_cache(maxsize=1)
def _gpu_entries() -> dict[str, GpuEntry]:
    raw = yaml.safe_load((_PKG / "gpus.yaml").read_text(encoding="utf-8"))
    return {key: GpuEntry.model_validate(entry) for key, entry in raw.items()}


def gpu_names() -> list[str]:
    """Keys of the GPU catalog, sorted."""
    return sorted(_gpu_entries())


def gpu_entry(key: str) -> GpuEntry:
    """The catalog entry (with sources) of GPU ``key``. Raises CatalogError."""
    entries = _gpu_entries()
    if key not in entries:
        raise CatalogError("gpu", key, entries)
    return entries[key]


@lru_cache(maxsize=64)
def load_gpu(key: str) -> Gpu:
    """GPU ``key`` as a frozen value. Raises CatalogError for an unknown key."""
    return gpu_entry(key.strip().lower()).to_gpu(key.strip().lower())


def model_names() -> list[str]:
    """Short names of the shipped model configs, sorted."""
    return sorted(p.name[:-5] for p in (_PKG / "models").iterdir() if p.name.endswith(".json"))


@lru_cache(maxsize=128)
def load_model(name_or_path: str) -> ModelSpec:
    """A model from a shipped short name or a path to a Hugging Face ``config.json`` (or its folder).

    Raises:
        CatalogError: not a shipped name and not an existing path.
        ConfigError: the file is not valid JSON or lacks a required key.
    """
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    looks_like_path = path.suffix == ".json" or "/" in name_or_path or "\\" in name_or_path
    if looks_like_path and not path.exists():
        raise InputError("model", name_or_path, "a catalog name or an existing config.json (file not found)")
    if path.suffix == ".json" and path.exists():
        text, source, name = path.read_text(encoding="utf-8"), str(path), path.parent.name if path.name == "config.json" else path.stem
    else:
        key = name_or_path.strip().lower()
        res = _PKG / "models" / f"{key}.json"
        if not res.is_file():
            raise CatalogError("model", name_or_path, model_names())
        text, source, name = res.read_text(encoding="utf-8"), f"catalog/models/{key}.json", key
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(source, f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from None
    spec = parse_hf_config(raw, name, source)
    release = _launch_raw().get(name, {}).get("release_dtype") if source.startswith("catalog/") else None
    return dataclasses.replace(spec, native_weight_dtype=release) if release else spec


@lru_cache(maxsize=1)
def _engine_raw() -> dict:
    return yaml.safe_load((_PKG / "engines.yaml").read_text(encoding="utf-8"))



@lru_cache(maxsize=8)
def load_engine(name: str) -> EngineFacts:
    """An engine's defaults. Raises CatalogError for an unknown engine."""
    raw = _engine_raw()
    key = name.strip().lower()
    if key not in raw:
        raise CatalogError("engine", name, raw)
    e = dict(raw[key])
    buckets = tuple(SglangBucket(**b) for b in e.pop("buckets", []))
    running = e.pop("max_running_default", {})
    hybrid = e.pop("hybrid_state", {})
    e.pop("source", None)
    if "vendors" in e:
        e["vendors"] = tuple(e["vendors"])
    return EngineFacts(
        name=key, buckets=buckets,
        max_running_per_context_factor=running.get("per_context_factor", 0.0),
        max_running_min=running.get("min", 0), max_running_max=running.get("max", 0),
        state_to_kv_memory_ratio=hybrid.get("state_to_kv_memory_ratio"),
        slots_per_request=hybrid.get("slots_per_request", 1),
        slots_per_request_spec=hybrid.get("slots_per_request_spec", 1),
        **e,
    )



def efficiency_table_from_json(data: dict, source: str) -> EfficiencyTable:
    """Build an EfficiencyTable from a calibration JSON object.

    Raises:
        ConfigError: unknown factor names or non-numeric values.
    """
    def parse(obj: object, key: str) -> Efficiency:
        if not isinstance(obj, dict):
            raise ConfigError(source, key, "expected an object of factor → number")
        unknown = set(obj) - set(EFFICIENCY_FIELDS)
        if unknown:
            raise ConfigError(source, f"{key}.{sorted(unknown)[0]}", f"unknown factor (known: {', '.join(EFFICIENCY_FIELDS)})")
        try:
            return Efficiency(**{k: float(v) for k, v in obj.items()})
        except (TypeError, ValueError):
            raise ConfigError(source, key, "every factor must be a number") from None

    default = parse(data.get("default", {}), "default")
    groups = data.get("groups", {})
    if not isinstance(groups, dict):
        raise ConfigError(source, "groups", "expected an object of group → factors")
    by_group = {g: parse({**default.as_dict(), **v}, f"groups.{g}") for g, v in groups.items()}
    return EfficiencyTable(default, by_group, str(data.get("provenance", source)))


@lru_cache(maxsize=1)
def shipped_efficiency() -> EfficiencyTable:
    """The calibrated efficiency table that ships (``catalog/efficiency.json``), or the built-in
    defaults when none ships."""
    res = _PKG / "efficiency.json"
    if not res.is_file():
        return EfficiencyTable(Efficiency(), {})
    return efficiency_table_from_json(json.loads(res.read_text(encoding="utf-8")), "catalog/efficiency.json")


@lru_cache(maxsize=1)
def shipped_error_bands_json() -> dict | None:
    """The error-band data file that ships (``catalog/error_bands.json``, written by
    ``tokenplan calibrate --bands``), as parsed JSON; None when none ships."""
    res = _PKG / "error_bands.json"
    if not res.is_file():
        return None
    return json.loads(res.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _launch_raw() -> dict:
    return yaml.safe_load((_PKG / "launch.yaml").read_text(encoding="utf-8"))["models"]


def launch_info(model_name: str) -> tuple[str, object]:
    """(Hugging Face repository, reasoning parser name or {engine: name}) for a shipped model;
    a local config gets its folder as the repository and no parser."""
    entry = _launch_raw().get(model_name)
    if entry is None:
        return model_name, None
    return str(entry["repo"]), entry.get("reasoning_parser")
