"""The weight format a checkpoint ships in, read from its ``config.json``'s ``quantization_config``.

A pre-quantized checkpoint is served as released: the engines read its quantization config and
load its weights as they are stored (an AWQ or FP8 checkpoint cannot be served as BF16, and a
``--quantization fp8`` beside an AWQ checkpoint is a method mismatch the engine refuses). So the
format decides the weights' bytes, the GEMM class, and that no ``--quantization`` flag is written.

Formats read (each method's config keys as Hugging Face transformers and vLLM read them):

- ``mxfp4`` (gpt-oss) → ``mxfp4``.
- ``fp8`` (transformers ``FineGrainedFP8Config`` / vLLM ``Fp8Config``: per-tensor or
  ``weight_block_size``) and ``fbgemm_fp8`` → ``fp8``.
- ``modelopt`` / ``modelopt_fp4`` (NVIDIA ModelOpt: ``quant_algo`` ``FP8`` or ``NVFP4``, at the
  top or under ``quantization``) → ``fp8`` or ``nvfp4``; ``MIXED_PRECISION`` with its
  ``quantized_layers`` map → the format of its 4-bit layers, else its 8-bit ones, each layer
  then sized in its own (:mod:`tokenplan.arch.quant_mixed`).
- ``compressed-tensors`` (llm-compressor): the ``format`` (``float-quantized`` → ``fp8``,
  ``nvfp4-pack-quantized`` → ``nvfp4``, ``mxfp4-pack-quantized`` → ``mxfp4``), else (also for
  ``pack-quantized`` and ``int-quantized``, which hold several) the first config group's
  ``weights`` (``num_bits`` 8 ``float`` → ``fp8``; 4 ``int`` without input activations → ``w4a16``;
  8 ``int`` with input activations → ``int8``).
- ``awq``, ``gptq`` and their Marlin variants with ``bits`` 4 → ``w4a16`` (4-bit integer weights,
  16-bit activations: vLLM's and SGLang's Marlin kernels).
- ``bitsandbytes`` with ``load_in_4bit`` → ``w4a16``'s bytes (NF4: 4 bits per weight), with a note
  that its kernels are not the Marlin ones the format's speed assumes.

Any other method (or an unread variant: 8-bit GPTQ, 8-bit weight-only) keeps BF16 sizing with a
note naming it, so the figure is never silently the unquantized model's.

Which layers are quantized: the method's list of modules it leaves unquantized
(compressed-tensors' ``ignore``, ModelOpt's ``ignore`` / ``exclude_modules``, FP8's
``ignored_layers`` / ``modules_to_not_convert``, …), read by :mod:`tokenplan.arch.quant_scope`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeGuard

from tokenplan.errors import ConfigError

_FP8_METHODS = ("fp8", "fbgemm_fp8")
_INT4_METHODS = ("awq", "gptq", "awq_marlin", "gptq_marlin", "marlin")
_COMPRESSED_FORMATS = {
    "float-quantized": "fp8",
    "naive-quantized": None,  # the group's weights say which
    "nvfp4-pack-quantized": "nvfp4",
    "mxfp4-pack-quantized": "mxfp4",
    "pack-quantized": None,  # 4- or 8-bit weights packed in int32: the group's num_bits says which
    "int-quantized": None,  # W8A8 or weight-only W8A16: the group's input activations say which
}


class QuantBlock(NamedTuple):
    """A config's quantization block and where it sits.

    Attributes:
        key: its dotted path in the config (``quantization_config``,
            ``text_config.quantization_config``, ``compression_config``), for messages.
        value: the block (None where there is none).
    """

    key: str
    value: object


def quantization_block(cfg: Mapping[str, Any], raw: Mapping[str, Any]) -> QuantBlock:
    """A config's quantization block: ``quantization_config`` of the text config, else of the top
    level (a multimodal checkpoint may keep it there), else compressed-tensors' older
    ``compression_config`` key (vLLM ``_normalize_quantization_config`` reads it where
    ``quantization_config`` is absent); ``value`` None where there is none. A ModelOpt checkpoint
    that keeps its block in ``hf_quant_config.json`` beside config.json has it put here by the
    loader (``tokenplan.catalog.load_model``).

    Args:
        cfg: the text config (``text_config`` merged over the top level).
        raw: the whole config.
    """
    text = raw.get("text_config")
    for key in ("quantization_config", "compression_config"):
        for where, prefix in ((cfg, "text_config." if isinstance(text, Mapping) and key in text else ""), (raw, "")):
            if where.get(key):
                return QuantBlock(prefix + key, where[key])
    return QuantBlock("quantization_config", None)


def quant_method(quant: Mapping[str, Any]) -> str:
    """The block's ``quant_method``, lower-case with ``-`` for ``_``; a ModelOpt
    ``hf_quant_config.json`` block names none, and reads as ``modelopt`` by its ``producer``
    (vLLM ``_normalize_quantization_config``: ``producer.name`` ``modelopt``)."""
    method = str(quant.get("quant_method") or "").lower().replace("_", "-")
    producer = quant.get("producer")
    if not method and isinstance(producer, Mapping) and str(producer.get("name") or "").lower() == "modelopt":
        return "modelopt"
    return method


def native_kv_format(quant: object) -> str | None:
    """The KV-cache format a ModelOpt block states for its checkpoint: ``fp8`` where
    ``kv_cache_quant_algo`` (top level or under ``quantization``) is ``FP8`` or ``kv_cache_scheme``
    is 8-bit float, else None. Both engines' ``--kv-cache-dtype auto`` take it: SGLang
    ``configure_kv_cache_dtype`` ("auto" with the quant config's ``kv_cache_quant_algo`` FP8 →
    ``float8_e4m3fn``), vLLM ``resolve_kv_cache_dtype_string`` (ModelOpt's
    ``kv_cache_quant_algo`` / ``kv_cache_scheme``, ``get_kv_cache_quant_algo_string``)."""
    if not isinstance(quant, Mapping) or not quant_method(quant).startswith("modelopt"):
        return None
    inner = quant.get("quantization")
    places = [inner, quant] if isinstance(inner, Mapping) else [quant]
    for where in places:
        algo, scheme = where.get("kv_cache_quant_algo"), where.get("kv_cache_scheme")
        if isinstance(algo, str) and algo.upper() == "FP8":
            return "fp8"
        if isinstance(scheme, Mapping) and scheme.get("num_bits") == 8 and scheme.get("type") == "float":
            return "fp8"
    return None


# ModelOpt's per-layer algorithms (vLLM modelopt.py QUANT_ALGOS; W4A16_NVFP4: NVFP4 weights with
# 16-bit activations, the same bytes) → the format whose bytes each stores
_MIXED_ALGO_FORMAT = {
    **dict.fromkeys(("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"), "fp8"),
    **dict.fromkeys(("NVFP4", "W4A16_NVFP4"), "nvfp4"),
    "MXFP8": "mxfp8",
    **dict.fromkeys(("W4A16_AWQ", "W4A8_AWQ", "INT4_AWQ"), "w4a16"),
    "UNQUANTIZED": "bf16",
}


def is_mixed_precision(quant: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``quant`` is a ModelOpt block whose ``quant_algo`` (at the top or under
    ``quantization``) is ``MIXED_PRECISION``: each layer in its own format."""
    if not isinstance(quant, Mapping) or not quant_method(quant).startswith("modelopt"):
        return False
    inner = quant.get("quantization")
    places = [p for p in (quant, inner) if isinstance(p, Mapping)]
    return any(str(p.get("quant_algo") or "").upper() == "MIXED_PRECISION" for p in places)


def mixed_layers(quant: object, source: str | None = None, key: str = "quantization_config") -> dict[str, str] | None:
    """A ModelOpt MIXED_PRECISION block's ``quantized_layers`` (module name, a trailing dot
    dropped → upper-case ``quant_algo``; at the top or under ``quantization``, as vLLM
    ``ModelOptMixedPrecisionConfig._from_config`` reads it), or None where the block is not
    MIXED_PRECISION or carries no map (older checkpoints keep it in ``hf_quant_config.json``:
    ``tokenplan.catalog.modelopt_file``).

    Args:
        source, key: the config's path and the block's dotted path; given, a malformed map raises
            (else it reads as none).

    Raises:
        ConfigError: (with ``source``) a map that is not an object, or an entry that is not an
            object with a ``quant_algo`` text.
    """
    if not is_mixed_precision(quant):
        return None
    inner = quant.get("quantization")
    places = [p for p in (quant, inner) if isinstance(p, Mapping)]
    layers = next((p["quantized_layers"] for p in places if p.get("quantized_layers") is not None), None)
    if not layers:
        return None
    field = f"{key}.quantized_layers"
    if not isinstance(layers, Mapping):
        if source is None:
            return None
        raise ConfigError(source, field, f"{type(layers).__name__} is not an object of module → {{quant_algo}}")
    out = {}
    for name, entry in layers.items():
        algo = entry.get("quant_algo") if isinstance(entry, Mapping) else None
        if not isinstance(algo, str) or not algo:
            if source is None:
                return None
            raise ConfigError(source, f"{field}.{name}", f"{entry!r:.60} is not an object with a quant_algo")
        out[str(name).rstrip(".")] = algo.upper()
    return out


def mixed_format(algo: str) -> str | None:
    """The weight format a ModelOpt per-layer ``quant_algo`` stores (``fp8``, ``nvfp4``, ``mxfp8``,
    ``w4a16``, ``bf16``), or None for one not read."""
    return _MIXED_ALGO_FORMAT.get(algo)


def native_format(quant: object) -> tuple[str, list[str]]:
    """(the checkpoint's weight format, notes) from a ``quantization_config`` value.

    Args:
        quant: the config's ``quantization_config`` (None or absent: a 16-bit checkpoint).

    Returns:
        A :class:`~tokenplan.units.Dtype` value (``bf16``, ``fp8``, ``int8``, ``nvfp4``,
        ``mxfp4``, ``w4a16``) and notes for a method read only approximately or not at all.
    """
    if quant is None or (isinstance(quant, Mapping) and not quant):
        return "bf16", []
    if not isinstance(quant, Mapping):
        return _unread(f"{quant!r} (not an object)")
    method = quant_method(quant)
    if method == "mxfp4":
        return "mxfp4", []
    if method.replace("-", "_") in _FP8_METHODS:
        return "fp8", []
    if method in ("modelopt", "modelopt-fp4"):
        algo = str(quant.get("quant_algo") or _nested(quant, "quantization", "quant_algo") or "").upper()
        if algo in ("FP8", "NVFP4"):
            return algo.lower(), []
        mixed = mixed_layers(quant)
        if mixed:  # each layer's own format (arch.quant_mixed); named by its 4-bit or else 8-bit layers,
            # which hold the bulk of a release that quantizes its MLPs harder than its attention
            formats = {mixed_format(a) for a in mixed.values()}
            return next((f for f in ("nvfp4", "w4a16", "fp8", "mxfp8") if f in formats), "bf16"), []
        return _unread(f"modelopt quant_algo {algo or 'not set'!r}")
    if method == "compressed-tensors":
        return _compressed(quant)
    if method.replace("-", "_") in _INT4_METHODS:
        bits = quant.get("bits", quant.get("w_bit"))
        if bits == 4:
            return "w4a16", []
        return _unread(f"{method} with {bits!r} bits")
    if method == "bitsandbytes":
        if quant.get("load_in_4bit") is True:
            return "w4a16", [
                "quantization_config bitsandbytes 4-bit: weights sized at 4 bits each (NF4); its "
                "kernels are slower than the Marlin ones the w4a16 figures assume"
            ]
        return _unread("bitsandbytes without load_in_4bit")
    return _unread(f"quant_method {method or 'not set'!r}")


def _nested(quant: Mapping[str, Any], key: str, inner: str) -> object:
    value = quant.get(key)
    return value.get(inner) if isinstance(value, Mapping) else None


def _compressed(quant: Mapping[str, Any]) -> tuple[str, list[str]]:
    """compressed-tensors: :func:`_compressed_format`, and a note where ``config_groups`` quantize
    different layers differently (a mixed recipe, e.g. W8A8 attention and W4A16 MLPs): every
    quantized layer is then sized in the one format read."""
    fmt, notes = _compressed_format(quant)
    groups = quant.get("config_groups")
    if (
        isinstance(groups, Mapping)
        and len({repr(g.get("weights")) for g in groups.values() if isinstance(g, Mapping)}) > 1
    ):
        notes = notes + [
            f"quantization_config config_groups quantize {len(groups)} sets of layers differently: every "
            f"quantized layer is sized as {fmt} (mixed recipes are not read layer by layer)"
        ]
    return fmt, notes


def _compressed_format(quant: Mapping[str, Any]) -> tuple[str, list[str]]:
    """compressed-tensors: the ``format`` where it names one, else the first group's weights."""
    fmt = _COMPRESSED_FORMATS.get(str(quant.get("format") or "").lower())
    if fmt is not None:
        return fmt, []
    groups = quant.get("config_groups")
    group = next(iter(groups.values()), None) if isinstance(groups, Mapping) and groups else None
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if isinstance(weights, Mapping):
        bits, kind = weights.get("num_bits"), weights.get("type")
        activations = group.get("input_activations") if isinstance(group, Mapping) else None
        if bits == 8 and kind == "float":
            return "fp8", []
        if bits == 4 and kind == "int" and not activations:
            return "w4a16", []
        if bits == 8 and kind == "int" and activations:
            return "int8", []
        return _unread(f"compressed-tensors weights of {bits!r} bits, type {kind!r}")
    return _unread(f"compressed-tensors format {quant.get('format')!r} without config_groups weights")


def _unread(what: str) -> tuple[str, list[str]]:
    return "bf16", [
        f"quantization_config {what} is not read: the weights are sized as bf16 (2 bytes each) "
        "unless --weight-dtype names the served format"
    ]
