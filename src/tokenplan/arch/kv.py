"""KV-cache bytes per token and recurrent-state bytes per sequence — exact, per layer kind.

- GQA (incl. MHA): ``(n_kv·d_k + n_kv·d_v) · bytes`` per full-attention layer per token.
  Llama-3.1-8B BF16: 2 × 32 layers × 8 heads × 128 × 2 B = 131,072 B/token.
- MLA (DeepSeek-V3 report, arXiv:2412.19437 §2.1.1): ``(r_kv + d_rope) · bytes`` per layer.
  DeepSeek-V3 BF16: (512 + 64) × 61 × 2 = 70,272 B/token.
- Sliding-window layers hold at most ``window`` tokens per sequence (gpt-oss: 128).
- Gated DeltaNet / Mamba-2 layers hold a fixed state per sequence: the SSM state
  ``n_v·d_k·d_v`` in its dtype (float32 by default in SGLang, vLLM and TRT-LLM for Qwen3.5,
  ``mamba_ssm_dtype`` in the config) plus the conv state ``conv_dim·(kernel−1)`` in BF16
  (SGLang ``mamba_utils.Mamba2StateShape``). Qwen3.6-27B: 48 × (48·128·128·4 + 10,240·3·2)
  = 48 × 3,207,168 = 153,944,064 B ≈ 146.8 MiB per sequence.
"""

from __future__ import annotations

from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.errors import InputError
from tokenplan.units import Dtype

# SSM state dtypes the engines accept for ``mamba_ssm_dtype`` / ``--mamba-ssm-dtype`` (IEEE
# float32 = 4 bytes, bfloat16/float16 = 2 bytes per element).
_STATE_BYTES = {"float32": 4.0, "fp32": 4.0, "bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "fp16": 2.0}
SSM_STATE_DTYPES = tuple(sorted(_STATE_BYTES))  # the names a launch may give --mamba-ssm-dtype here
CONV_STATE_BYTES_PER_ELEMENT = 2.0  # BF16 conv state: SGLang SGLANG_MAMBA_CONV_DTYPE default


def kv_bytes_per_token_per_layer(spec: ModelSpec, kv_dtype: Dtype, kv_heads_per_rank: float | None = None) -> float:
    """Bytes one token adds to one softmax-attention layer's cache (sparse indexer key included).

    Args:
        kv_heads_per_rank: GQA heads held by one GPU (defaults to all ``num_kv_heads``).
    """
    a = spec.attention
    if a is None:
        return 0.0
    if a.kind is AttentionKind.MLA:
        per_layer = (a.kv_lora_rank + a.qk_rope_head_dim) * kv_dtype.bytes_per_element
    else:
        heads = a.num_kv_heads if kv_heads_per_rank is None else kv_heads_per_rank
        per_layer = heads * (a.head_dim + a.v_head_dim) * kv_dtype.bytes_per_element
    return per_layer + a.index_bytes_per_token


def kv_bytes_per_token(spec: ModelSpec, kv_dtype: Dtype) -> float:
    """KV-cache bytes one token adds across all full-attention layers (whole model, bytes).

    Sliding-window layers are counted apart (:func:`sliding_kv_bytes_per_token`); linear
    layers add nothing per token.
    """
    return kv_bytes_per_token_per_layer(spec, kv_dtype) * spec.full_attention_layers


def sliding_kv_bytes_per_token(spec: ModelSpec, kv_dtype: Dtype) -> float:
    """KV bytes per token across the sliding-window layers, for the last ``sliding_window`` tokens."""
    return kv_bytes_per_token_per_layer(spec, kv_dtype) * spec.sliding_layers


def state_bytes_per_sequence(spec: ModelSpec, ssm_dtype: str | None = None) -> float:
    """Fixed recurrent state one sequence holds across all linear-attention layers (bytes).

    Args:
        spec: the model.
        ssm_dtype: override of the SSM state dtype (``float32``/``bfloat16``/``float16``);
            default is the config's.

    Returns:
        Bytes per sequence (0 for models without linear-attention layers).

    Raises:
        InputError: the SSM dtype (given or from the config) is not one of ``_STATE_BYTES``.
    """
    lin = spec.linear
    if lin is None:
        return 0.0
    dtype = (ssm_dtype or lin.state_dtype).strip().lower()
    if dtype not in _STATE_BYTES:
        raise InputError("ssm_dtype", ssm_dtype or lin.state_dtype, sorted(_STATE_BYTES))
    ssm = lin.num_v_heads * lin.k_head_dim * lin.v_head_dim * _STATE_BYTES[dtype]
    conv = lin.conv_dim * (lin.conv_kernel - 1) * CONV_STATE_BYTES_PER_ELEMENT
    return (ssm + conv) * spec.linear_layers
