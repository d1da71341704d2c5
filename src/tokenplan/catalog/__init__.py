"""Shipped catalogs — GPUs, models, engines, efficiency — and their loaders.

The only module that reads package data (the files beside it in the installed package). Each file
is validated once and cached; lookups by unknown names raise :class:`~tokenplan.errors.CatalogError` listing the
known names.
"""

from __future__ import annotations

import dataclasses
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from tokenplan.arch.hf_config import parse_hf_config
from tokenplan.arch.params import WEIGHT_COMPONENTS
from tokenplan.arch.spec import ModelSpec
from tokenplan.catalog.efficiency_json import CALIBRATION_KEYS as CALIBRATION_KEYS
from tokenplan.catalog.efficiency_json import efficiency_table_from_json
from tokenplan.catalog.gpus_plain import plain_gpus
from tokenplan.catalog.local_launch import by_model_type, local_value
from tokenplan.catalog.modelopt_file import with_modelopt_file
from tokenplan.engines import Engine, from_catalog
from tokenplan.errors import CatalogError, InputError
from tokenplan.hardware import GemmCurve, Gpu
from tokenplan.loaders import parse_json, read_text
from tokenplan.perf.efficiency import Efficiency, EfficiencyTable

if TYPE_CHECKING:
    from tokenplan.catalog.gpus import GpuEntry

# The package's folder: what ``importlib.resources.files("tokenplan.catalog")`` answers for a package
# installed as files (a pathlib.Path), without importing importlib.resources (tempfile, shutil,
# zipfile, random: ~10 ms of every run's start-up). A zipped install is not supported.
_PKG = Path(__file__).parent

# libyaml's C loader parses the 840-line GPU catalog ~8× faster than the pure-Python one; PyYAML
# built without libyaml has only the latter.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(name: str):
    """Parse the shipped YAML file ``name`` with the fastest safe loader available."""
    return yaml.load((_PKG / name).read_text(encoding="utf-8"), Loader=_YAML_LOADER)  # noqa: S506


@lru_cache(maxsize=1)
def _gpus_raw():
    return _read_yaml("gpus.yaml")


@lru_cache(maxsize=1)
def _gpu_entries() -> dict[str, GpuEntry]:
    # Imported here: its pydantic models cost more than a plan's search; the values come from
    # _gpus() unless an entry needs pydantic's judgement (or a caller wants the entry itself).
    from tokenplan.catalog.gpus import GpuEntry

    return {key: GpuEntry.model_validate(entry) for key, entry in _gpus_raw().items()}


@lru_cache(maxsize=1)
def _gpus() -> dict[str, tuple[Gpu, tuple[str, ...]]]:
    """Key → (Gpu without GEMM curves, aliases): checked without pydantic where every entry is
    plainly valid (catalog/gpus_plain.py), else by GpuEntry, which raises for a bad entry."""
    plain = plain_gpus(_gpus_raw())
    if plain is not None:
        return plain
    return {key: (entry.to_gpu(key), tuple(entry.aliases)) for key, entry in _gpu_entries().items()}


def gpu_names() -> list[str]:
    """Keys of the GPU catalog, sorted."""
    return sorted(_gpus())


def close_names(name: str, known: list[str], n: int = 4) -> list[str]:
    """The known names closest to ``name``, best first: those that start with it (``h100`` →
    h100-sxm, h100-pcie, h100-nvl), then difflib's close matches (ratio ≥ 0.6)."""
    import difflib  # only for an unknown name

    wanted = name.strip().lower()
    prefixed = [k for k in known if k.startswith(wanted)] if len(wanted) >= 2 else []
    return list(dict.fromkeys(prefixed + difflib.get_close_matches(wanted, known, n=n, cutoff=0.6)))[
        : max(n, len(prefixed))
    ]


@lru_cache(maxsize=1)
def _gpu_aliases() -> dict[str, str]:
    return {alias.lower(): key for key, (_, aliases) in _gpus().items() for alias in aliases}


def gpu_key(name: str) -> str:
    """The catalog key a GPU name means: the key itself (any case), one of its aliases
    (AIConfigurator's system names ``h200_sxm``, ``b200_sxm``), or the key spelled with ``_``.

    Raises:
        CatalogError: an unknown name, with the closest keys and every key.
    """
    entries, wanted = _gpus(), name.strip().lower()
    for candidate in (wanted, wanted.replace("_", "-")):
        if candidate in entries:
            return candidate
        if candidate in _gpu_aliases():
            return _gpu_aliases()[candidate]
    raise CatalogError("gpu", name, entries, close_names(wanted, sorted(entries)))


def gpu_entry(key: str) -> GpuEntry:
    """The catalog entry (with sources) of GPU ``key`` (or an alias). Raises CatalogError."""
    return _gpu_entries()[gpu_key(key)]


@lru_cache(maxsize=64)
def load_gpu(key: str) -> Gpu:
    """GPU ``key`` (or an alias, see :func:`gpu_key`) as a frozen value. Raises CatalogError for
    an unknown name."""
    canonical = gpu_key(key)
    gpu = _gpus()[canonical][0]
    return dataclasses.replace(gpu, gemm_curves=_gemm_curves().get(canonical, ()))


@lru_cache(maxsize=1)
def _gemm_curves() -> dict[str, tuple[GemmCurve, ...]]:
    """GPU key → its measured GEMM curves (``gemm_curves.json``, made by ``tools/gemm_curves.py``
    from aiconfigurator's per-op tables; the file names its source commit and tables)."""
    data = json.loads((_PKG / "gemm_curves.json").read_text(encoding="utf-8"))
    src = data["source"]
    source = f"{src['repository']} @ {src['commit'][:12]} ({src['license']}); {src['reduction']}"

    def curve(fmt: str, c: dict) -> GemmCurve:
        sizes = c["by_size"]
        return GemmCurve(
            fmt,
            tuple(map(float, c["m"])),
            tuple(map(float, c["fraction"])),
            float(c["bytes_per_weight"]),
            float(c["ridge_rows"]),
            source,
            tuple(map(float, sizes["weight_elements"])),
            tuple(tuple(map(float, f)) for f in sizes["fraction"]),
        )

    return {gpu: tuple(curve(fmt, c) for fmt, c in sorted(curves.items())) for gpu, curves in data["curves"].items()}


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
    given = Path(name_or_path).expanduser()
    folder = given.is_dir() and not _catalog_name_over_folder(name_or_path)
    path = _local_config(name_or_path) or (given / "config.json" if folder else given)
    looks_like_path = path.suffix == ".json" or "/" in name_or_path or "\\" in name_or_path
    checkpoint = None  # the weight format a Hugging Face id's own name says its checkpoint is in
    id_note = ""  # where a name that is no path is read as another owner's Hugging Face id
    if looks_like_path and not path.exists():
        catalog_name = model_for_hf_id(name_or_path)
        checkpoint = checkpoint_format_of_hf_id(name_or_path) if catalog_name is not None else None
        if catalog_name is None and path.suffix == ".json":
            found = f"{path.parent} holds none" if path.parent.is_dir() and path.name == "config.json" else None
            raise InputError(
                "model",
                name_or_path,
                f"an existing config.json ({found or 'file not found'}), or a catalog name (`tokenplan catalog models`)",
            )
        if catalog_name is None:
            # a path that does not exist is not read as a catalog name (./qwen3.6-27b planned the
            # catalog's BF16 model and launched from ./qwen3.6-27b: a new-user pass)
            ids = "Qwen/Qwen3.6-27B or Qwen/Qwen3.6-27B-FP8"
            allowed = (
                f"a Hugging Face id of a catalog model such as {ids} (this id names none), a catalog name "
                "(`tokenplan catalog models`), or an existing config.json or its folder"
                if _HF_ID.fullmatch(name_or_path.strip().rstrip("/"))
                else "an existing config.json or its folder (nothing is at this path), a catalog name "
                f"(`tokenplan catalog models`) or a Hugging Face id of a catalog model such as {ids}"
            )
            raise InputError("model", name_or_path, allowed)
        owner = str(_hf_ids().get(catalog_name, "")).split("/")[0].lower()
        if given.parts and given.parts[0].lower() != owner:  # another owner's id, or a mistyped path: said
            id_note = (
                f"--model {given}: nothing is at this path; read as the Hugging Face id of a {catalog_name} checkpoint"
            )
        name_or_path = catalog_name
    if path.is_file():  # a file named (any suffix): read as a config.json
        text = read_text(path)  # ConfigError: byte N, not UTF-8
        # the folder's name, resolved: ./config.json named the model "" (a new-user pass)
        source, name = str(path), path.resolve().parent.name if path.name == "config.json" else path.stem
    else:
        key = name_or_path.strip().lower()
        res = _PKG / "models" / f"{key}.json"
        if not res.is_file():
            raise CatalogError("model", name_or_path, model_names(), close_names(key, model_names()))
        text, source, name = res.read_text(encoding="utf-8"), f"catalog/models/{key}.json", key
    raw = parse_json(text, source)  # ConfigError: not JSON, a key twice, nested too deep
    if path.is_file():
        raw = with_modelopt_file(raw, path)
    spec = parse_hf_config(raw, name, source)
    entry = _launch_raw().get(name, {}) if source.startswith("catalog/") else {}
    release = entry.get("release_dtype")
    release = checkpoint if checkpoint is not None and (release or spec.native_weight_dtype) == "bf16" else release
    if release and "release_quantized" in entry and release == entry.get("release_dtype"):
        scope = set(entry["release_quantized"])
        shares = tuple((c, 1.0 if c in scope else 0.0) for c in WEIGHT_COMPONENTS)
        spec = dataclasses.replace(spec, native_quantized=shares)
    if "release_mtp_layers" in entry and checkpoint is None:  # the release's own weights, not a derivative's
        spec = dataclasses.replace(spec, mtp_layers=int(entry["release_mtp_layers"]))
    if id_note:
        spec = dataclasses.replace(spec, approximations=(*spec.approximations, id_note))
    return dataclasses.replace(spec, native_weight_dtype=release) if release else spec


@lru_cache(maxsize=1)
def _engine_raw() -> dict:
    return _read_yaml("engines.yaml")


def profile_groups() -> tuple[list[str], list[str]]:
    """(engine names, GPU architectures) a calibration profile's group may name: ``engine`` or
    ``engine/architecture`` (``sglang/hopper``), as ``EfficiencyTable.resolve`` looks them up."""
    return sorted(_engine_raw()), sorted({load_gpu(key).architecture for key in gpu_names()})


@lru_cache(maxsize=8)
def load_engine(name: str) -> Engine:
    """An engine (``tokenplan.engines``) with its figures from ``engines.yaml``. Raises
    CatalogError for an unknown engine."""
    raw = _engine_raw()
    key = name.strip().lower()
    if key not in raw:
        raise CatalogError("engine", name, raw, close_names(key, sorted(raw)))
    return from_catalog(key, raw[key])


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


@lru_cache(maxsize=2)
def _by_model_type(key: str) -> dict[str, object]:
    return by_model_type(_launch_raw(), _PKG / "models", key)


@lru_cache(maxsize=1)
def _launch_raw() -> dict:
    return _read_yaml("launch.yaml")["models"]


@lru_cache(maxsize=1)
def _hf_ids() -> dict[str, str]:
    """Hugging Face repository → catalog name (``launch.yaml``'s ``repo``)."""
    return {name: str(entry["repo"]) for name, entry in _launch_raw().items()}


# A Hugging Face repository id: owner/name, each starting with a letter or digit (the Hub's rule;
# "./qwen3.6-27b" and "/abs/qwen3.6-27b" are paths)
_HF_ID = re.compile(r"[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*", re.IGNORECASE)


def model_for_hf_id(hf_id: str) -> str | None:
    """The catalog model a Hugging Face id names (``Qwen/Qwen3.6-27B`` → ``qwen3.6-27b``), or
    None: the repository a catalog entry launches from (any case), else a repository whose
    name, lower-cased, without one prefix of ``aliases.yaml`` (``Meta-``) where it has one and
    without one release suffix (``-FP8``, ``-Instruct``…), is a catalog name. Raises nothing."""
    wanted = hf_id.strip().rstrip("/").lower()
    if not _HF_ID.fullmatch(wanted):  # ./name, /abs/name, ~/name, a\name: a path, not an id
        return None
    for name, repo in _hf_ids().items():
        if repo.lower() == wanted:
            return name
    if wanted.count("/") != 1:
        return None
    aliases, names = _read_yaml("aliases.yaml"), set(model_names())
    base = wanted.rsplit("/", 1)[-1]
    for start in [base] + [base[len(p) :] for p in aliases.get("model_prefixes", []) if base.startswith(p)]:
        for candidate in [start] + [start[: -len(s)] for s in aliases["model_suffixes"] if start.endswith(s)]:
            if candidate in names:
                return candidate
    return None


def checkpoint_format_of_hf_id(hf_id: str) -> str | None:
    """``fp8`` where a Hugging Face id's name ends in an FP8 release suffix of ``aliases.yaml``
    (``Qwen/Qwen3.6-27B-FP8``, ``…-Instruct-FP8``, ``…-FP8-dynamic``: the publishers' FP8
    checkpoints of a BF16 model), else None. Raises nothing."""
    base = hf_id.strip().rstrip("/").lower().rsplit("/", 1)[-1]
    suffixes = _read_yaml("aliases.yaml")["model_suffixes"]
    return "fp8" if any(base.endswith(s) and "fp8" in s for s in suffixes) else None


def _local_config(name: str) -> Path | None:
    """The config.json ``name`` points at — the file, or a folder's ``config.json`` — with ``~``
    expanded (a quoted ``~/q`` or ``--model=~/q`` reaches us unexpanded), or None: nothing there,
    a folder without one (an empty ``Qwen/Qwen3.6-27B`` folder is not the model's id read as a
    path), or a catalog name an empty folder shadows (:func:`_catalog_name_over_folder`)."""
    path = Path(name).expanduser()
    if path.is_dir():
        path = path / "config.json"
    return path if path.is_file() and not _catalog_name_over_folder(name) else None


def _catalog_name_over_folder(name: str) -> bool:
    """A catalog name that a folder of the same name without a config.json shadows in the working
    directory (an empty ``./qwen3-8b`` refused ``--model qwen3-8b``): the name is read as the
    catalog's."""
    folder = Path(name)
    return folder.is_dir() and not (folder / "config.json").exists() and name.strip().lower() in model_names()


def launch_info(model: str, model_name: str) -> tuple[str, object, bool]:
    """(where launch commands load ``model`` from, reasoning parser name or {engine: name},
    whether the engines must be told to run the repository's own code: ``trust_remote_code`` in
    ``launch.yaml``): for a shipped model its Hugging Face repository; a local config.json (or
    its folder) its folder as an absolute path, with the parser and remote-code flag its
    ``model_type``'s shipped models share (:mod:`tokenplan.catalog.local_launch`; the engines
    read a bare name as a repository id; :func:`load_model` reads paths the same way).
    ``model_name``: the spec's name."""
    local = _local_config(model)
    if local is not None:  # the same reading load_model makes: a folder without a config.json is not one
        # its model_type's parser and remote-code flag where every shipped model of that type agrees
        parser = local_value(local, _by_model_type("reasoning_parser"))
        remote = bool(local_value(local, _by_model_type("trust_remote_code")))
        return str(local.parent.resolve()), parser, remote
    entry = _launch_raw().get(model_name)
    if entry is None:
        return model_name, None, False
    # a Hugging Face id the user named (an FP8 checkpoint of the model, say) is what to load
    repo = model.strip().rstrip("/") if model_for_hf_id(model) == model_name else entry["repo"]
    return str(repo), entry.get("reasoning_parser"), bool(entry.get("trust_remote_code", False))


def base_repo_of(model: str, model_name: str) -> str | None:
    """The catalog's BF16 release repository behind ``model`` where ``model`` is a Hugging Face
    id of a checkpoint in another format (``Qwen/Qwen3.6-27B-FP8`` → ``Qwen/Qwen3.6-27B``: the
    format :func:`load_model` plans as released), else None. ``model_name``: the spec's name."""
    entry = _launch_raw().get(model_name)
    if entry is None or _local_config(model) is not None or model_for_hf_id(model) != model_name:
        return None
    released = load_model(model_name).native_weight_dtype
    return str(entry["repo"]) if load_model(model).native_weight_dtype != released else None
