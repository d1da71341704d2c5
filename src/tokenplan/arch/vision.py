"""The parameters of a multimodal checkpoint's vision tower, read from its ``vision_config``."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, TypedDict

from tokenplan.errors import ConfigError

# The vision_config counts the tower is costed from, and the least each may be: a layer count or
# the position table may be 0 (no tower, no table), a width or a patch size not.
_VISION_MINIMUM = {
    "depth": 0,
    "num_hidden_layers": 0,
    "num_position_embeddings": 0,
    "hidden_size": 1,
    "intermediate_size": 1,
    "out_hidden_size": 1,
    "spatial_merge_size": 1,
    "patch_size": 1,
    "temporal_patch_size": 1,
    "in_channels": 1,
}


def checked_vision_config(raw: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    """The ``vision_config`` object ({} when absent or null) with each count the tower is costed
    from an integer at least its :data:`_VISION_MINIMUM` where set. Text there ("abc") was a
    ValueError traceback, and a negative depth or a quoted one ("12") was read silently, taking
    weights off or putting them on; a ``vision_config`` that is not an object dropped the tower.

    Raises:
        ConfigError: naming ``vision_config.KEY``, the value and what is allowed.
    """
    vision = raw.get("vision_config")
    if vision is None:
        return {}
    if not isinstance(vision, Mapping):
        raise ConfigError(source, "vision_config", f"{vision!r} is not allowed (allowed: a JSON object)")
    for key, least in _VISION_MINIMUM.items():
        value = vision.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, builtins.int) or value < least):
            raise ConfigError(
                source, f"vision_config.{key}", f"{value!r} is not allowed (allowed: an integer ≥ {least})"
            )
    return vision


class VisionParams(TypedDict, total=False):
    """The ``ModelSpec`` fields :func:`vision_params` fills (parameters)."""

    vision_sharded_params: int
    vision_replicated_params: int


def vision_params(vision: Mapping[str, Any]) -> VisionParams:
    """The vision tower's parameters of a Qwen3-VL-style ``vision_config`` (``depth``,
    ``hidden_size`` h, ``intermediate_size`` I, ``out_hidden_size``, ``spatial_merge_size`` m,
    ``patch_size`` p, ``temporal_patch_size`` t, ``in_channels`` c, ``num_position_embeddings``),
    as ``vision_sharded_params`` / ``vision_replicated_params``; {} when a field is missing.

    Per block: qkv 3h² and proj h² (+ 3h, h biases), MLP fc1 h·I and fc2 I·h (+ I, h biases),
    two LayerNorms 4h; patch merger: LayerNorm 2h, fc1 (m²h)² and fc2 m²h·out (+ biases); the
    patch embedding c·t·p²·h + h and the position embedding npos·h (vLLM
    ``model_executor/models/qwen3_vl.py`` ``Qwen3_VisionTransformer``). Qwen3.5-35B-A3B (27 ×
    1,152, I 4,304, out 2,048): 441,741,312 sharded + 4,829,936 replicated = 446,571,248.
    """
    try:
        depth, h, inter = int(vision["depth"]), int(vision["hidden_size"]), int(vision["intermediate_size"])
        out, m = int(vision["out_hidden_size"]), int(vision.get("spatial_merge_size", 2))
        patch = int(vision["in_channels"]) * int(vision["temporal_patch_size"]) * int(vision["patch_size"]) ** 2 * h + h
        npos = int(vision.get("num_position_embeddings", 0) or 0)
    except (KeyError, TypeError, ValueError):
        return {}
    merged = m * m * h
    sharded = depth * (4 * h * h + 2 * h * inter) + merged * merged + merged * out
    replicated = depth * (3 * h + h + inter + h + 4 * h) + 2 * h + merged + out + patch + npos * h
    return {"vision_sharded_params": sharded, "vision_replicated_params": replicated}
