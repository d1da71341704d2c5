"""The KV-cache format ``--kv-cache-dtype auto`` gives a model on an engine."""

from __future__ import annotations

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import Engine
from tokenplan.units import Dtype


def auto_kv(engine: Engine, model: ModelSpec, weight: Dtype) -> Dtype:
    """The KV-cache format ``--kv-cache-dtype auto`` gives ``model`` served with ``weight``
    weights on ``engine``: the checkpoint's own, where its quantization block states one and the
    weights are served as released (``ModelSpec.native_kv_dtype``: SGLang, vLLM and
    TensorRT-LLM each take a ModelOpt checkpoint's ``kv_cache_quant_algo``), else the engine's
    default (:meth:`~tokenplan.engines.base.Engine.auto_kv_dtype`)."""
    if model.native_kv_dtype is not None and weight.value == model.native_weight_dtype:
        return Dtype(model.native_kv_dtype)
    return engine.auto_kv_dtype(weight)
