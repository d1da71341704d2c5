"""``catalog``: the shipped GPUs and models — the Python API behind ``tokenplan catalog``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tokenplan.catalog import load_gpu, load_model
from tokenplan.job.evaluate import kv_and_state
from tokenplan.results import JsonResult


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


def catalog_gpus() -> list[CatalogGpu]:
    """Every catalog GPU (:class:`CatalogGpu`), in catalog order."""
    from tokenplan.catalog import gpu_names

    rows = []
    for key in gpu_names():
        g = load_gpu(key)
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
                sources=_gpu_sources(key),
                price=None
                if g.price is None
                else GpuPrice(
                    g.price.low_usd_per_hour, g.price.high_usd_per_hour, g.price.typical_usd_per_hour, g.price.as_of
                ),
            )
        )
    return rows


def _gpu_sources(key: str) -> dict[str, str]:
    """Where each figure group of a catalog GPU comes from."""
    from tokenplan.catalog import gpu_entry

    e = gpu_entry(key)
    out = {
        "memory": e.memory.source,
        "bandwidth": e.bandwidth.source,
        "compute": e.compute.source,
        "native_dtypes": e.native_dtypes.source,
        "scaleup": e.scaleup.source,
        "host_link": e.host_link.source,
    }
    if e.price is not None:
        out["price"] = e.price.source
    return out


def catalog_models() -> list[CatalogModel]:
    """Every shipped model with its family, parameter counts, exact KV/state sizes and the parts
    tokenplan models only approximately."""
    from tokenplan.arch.params import param_counts
    from tokenplan.catalog import model_names
    from tokenplan.units import Dtype

    rows = []
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
            )
        )
    return rows
