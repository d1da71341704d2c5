"""``tokenplan catalog``'s listing: every shipped GPU with the source of each figure group, every
shipped model with its sizes, and a GPU's family variants (``h100-sxm`` → ``h100-nvl``, ``h100-pcie``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tokenplan.arch.params import param_counts
from tokenplan.catalog import _PKG, gpu_entry, gpu_names, load_gpu, load_model, model_names
from tokenplan.job.evaluate import kv_and_state
from tokenplan.results import JsonResult
from tokenplan.units import Dtype


@dataclass(frozen=True)
class GpuPrice(JsonResult):
    """A GPU's rental price range, US dollars per GPU-hour, and when it was read."""

    low: float
    high: float
    typical: float
    as_of: str


@dataclass(frozen=True)
class CatalogGpu(JsonResult):
    """One catalog GPU (units in the names: GiB, TB/s, TFLOPS, GB/s per direction) and where
    each figure group comes from (``sources``: group → citation)."""

    key: str
    name: str
    architecture: str
    compute_capability: str
    memory_gib: float
    hbm_tb_s: float
    dense_tflops: Mapping[str, float]
    scaleup: str
    scaleup_gb_s: float
    native_dtypes: tuple[str, ...]
    sources: Mapping[str, str]
    price: GpuPrice | None


@dataclass(frozen=True)
class CatalogModel(JsonResult):
    """One shipped model: family, parameters (billions), exact KV bytes per token and state
    bytes per sequence (BF16), MTP layers and the parts tokenplan models only approximately."""

    name: str
    architecture: str
    family: str
    params_b: float
    active_params_b: float
    kv_bytes_per_token: float
    state_bytes_per_sequence: float
    mtp_layers: int
    approximations: tuple[str, ...]
    source: str  # the Hugging Face repository its config.json comes from, with the table's note


def model_sources() -> dict[str, str]:
    """Catalog model name → where its ``config.json`` comes from: ``huggingface.co/REPO`` and the
    note of ``catalog/models/SOURCES.md``'s table (the file that records each copy). A model the
    table does not list gets "not recorded" (a test keeps every shipped model listed)."""
    out = {}
    for line in (_PKG / "models" / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].endswith(".json"):
            note = f" ({cells[2]})" if cells[2] else ""
            out[cells[0].removesuffix(".json")] = f"huggingface.co/{cells[1]}{note}"
    return out


def catalog_gpus() -> list[CatalogGpu]:
    """Every catalog GPU (:class:`CatalogGpu`), in catalog order."""
    rows = []
    for key in gpu_names():
        g, e = load_gpu(key), gpu_entry(key)
        p = g.price
        sources = {
            "memory": e.memory.source,
            "bandwidth": e.bandwidth.source,
            "compute": e.compute.source,
            "native_dtypes": e.native_dtypes.source,
            "scaleup": e.scaleup.source,
            "host_link": e.host_link.source,
        } | ({"price": e.price.source} if e.price is not None else {})
        rows.append(
            CatalogGpu(
                key=key,
                name=g.name,
                architecture=g.architecture,
                compute_capability=g.compute_capability,
                memory_gib=g.memory_bytes / 2**30,
                hbm_tb_s=g.hbm_bytes_per_s / 1e12,
                dense_tflops={k: v / 1e12 for k, v in g.dense_flops_per_s.items()},
                scaleup=g.scaleup.kind.value,
                scaleup_gb_s=g.scaleup.bytes_per_s / 1e9,
                native_dtypes=tuple(sorted(d.value for d in g.native_dtypes)),
                sources=sources,
                price=None
                if p is None
                else GpuPrice(p.low_usd_per_hour, p.high_usd_per_hour, p.typical_usd_per_hour, p.as_of),
            )
        )
    return rows


def catalog_models() -> list[CatalogModel]:
    """Every shipped model with its family, parameter counts, exact KV/state sizes and the parts
    tokenplan models only approximately."""
    rows, sources = [], model_sources()
    for name in model_names():
        m = load_model(name)
        p = param_counts(m)
        kv, state = kv_and_state(m, Dtype.BF16)
        rows.append(
            CatalogModel(
                name=name,
                architecture=m.architecture,
                family=m.family,
                params_b=p.total / 1e9,
                active_params_b=p.active_matmul / 1e9,
                kv_bytes_per_token=kv,
                state_bytes_per_sequence=state,
                mtp_layers=m.mtp_layers,
                approximations=tuple(m.approximations),
                source=sources.get(name, "not recorded"),
            )
        )
    return rows


def family_variants(gpu: str) -> list[str]:
    """Catalog GPU keys of ``gpu``'s family other than ``gpu`` itself (``h100-sxm`` →
    ``h100-nvl``, ``h100-pcie``: keys that share the part before the first ``-``), sorted; []
    for a key without a family suffix."""
    if "-" not in gpu:
        return []
    family = gpu.split("-")[0]
    return sorted(k for k in gpu_names() if k != gpu and "-" in k and k.split("-")[0] == family)
