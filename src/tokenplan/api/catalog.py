"""``catalog``: the shipped GPUs and models — the Python API behind ``tokenplan catalog``."""

from __future__ import annotations

from tokenplan.catalog import load_gpu, load_model
from tokenplan.job.evaluate import kv_and_state


def catalog_gpus() -> list[dict]:
    """Every catalog GPU as a dict (units in key names: GiB, TB/s, TFLOPS, GB/s per direction)."""
    from tokenplan.catalog import gpu_names

    rows = []
    for key in gpu_names():
        g = load_gpu(key)
        rows.append({
            "key": key, "name": g.name, "architecture": g.architecture, "compute_capability": g.compute_capability,
            "memory_gib": g.memory_bytes / 2**30, "hbm_tb_s": g.hbm_bytes_per_s / 1e12,
            "dense_tflops": {k: v / 1e12 for k, v in g.dense_flops_per_s.items()},
            "scaleup": g.scaleup.kind.value, "scaleup_gb_s": g.scaleup.bytes_per_s / 1e9,
            "native_dtypes": sorted(d.value for d in g.native_dtypes),
            "sources": _gpu_sources(key),
            "price": None if g.price is None else {"low": g.price.low_usd_per_hour, "high": g.price.high_usd_per_hour,
                                                   "typical": g.price.typical_usd_per_hour, "as_of": g.price.as_of},
        })
    return rows


def _gpu_sources(key: str) -> dict[str, str]:
    """Where each figure group of a catalog GPU comes from."""
    from tokenplan.catalog import gpu_entry

    e = gpu_entry(key)
    out = {"memory": e.memory.source, "bandwidth": e.bandwidth.source, "compute": e.compute.source,
           "native_dtypes": e.native_dtypes.source, "scaleup": e.scaleup.source, "host_link": e.host_link.source}
    if e.price is not None:
        out["price"] = e.price.source
    return out


def catalog_models() -> list[dict]:
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
        rows.append({"name": name, "architecture": m.architecture, "family": m.family, "params_b": p.total / 1e9,
                     "active_params_b": p.active_matmul / 1e9, "kv_bytes_per_token": kv,
                     "state_bytes_per_sequence": state, "mtp_layers": m.mtp_layers,
                     "approximations": list(m.approximations)})
    return rows
