"""The ``memory`` command's table: one GPU's pools as the engine sizes them at start-up, then what
it allocates at the running limit (``MemoryResult``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.table import Table

from tokenplan.report.tables import ENGINE_NAMES
from tokenplan.units import GiB, kv_tokens_text

if TYPE_CHECKING:  # the type only: importing it at run time would load the planner for a table
    from tokenplan.job.results import MemoryResult


# What fills one GPU at the running limit: MemoryResult.allocation's terms, with their labels.
ALLOCATION_LABELS = (
    ("  weights", "weights"),
    ("  KV cache", "kv_cache"),
    ("  draft KV cache", "draft_kv"),
    ("  state slots", "state"),
    ("  speculative state", "spec_state"),
    ("  reserve (activations, graphs, headroom)", "reserve"),
)


def memory_table(m: MemoryResult) -> Table:
    """Per-GPU memory breakdown: the pools the engine sizes at start-up, then what it allocates at
    the running limit (terms that sum to the GPU's memory). Where KV and linear-attention state
    share one pool (SGLang without its radix cache, vLLM), the pool is one row and the KV capacity
    is what the running requests' state leaves of it; the start-up reserve holds what the
    allocation lists apart (SGLang's draft KV pool, padded state rows)."""
    shared, drafter = m.state_slots is None and m.state_bytes_per_sequence > 0, m.draft_weight_bytes_per_gpu
    engine = f" · {ENGINE_NAMES.get(m.engine, m.engine)}" if m.engine else ""
    t = Table(title=f"memory per GPU · {m.gpu} · {m.layout}{engine}", show_header=False)
    t.add_column("part")
    t.add_column("value", justify="right")
    rows = [
        ("GPU memory", m.gpu_bytes),
        ("weights" + (f" (drafter {drafter / GiB:,.2f} GiB)" if drafter else ""), m.weight_bytes_per_gpu),
        ("engine reserve (at start-up)", m.reserve_bytes),
        ("KV cache and state pool (shared)" if shared else "KV cache pool", m.kv_pool_bytes),
    ]
    if not shared and m.state_bytes_per_sequence > 0:  # a model without recurrent state has none
        rows.append(("state pool", m.state_pool_bytes))
    if m.spec_state_pool_bytes:  # SGLang takes it before the split: the start-up rows add up with it
        rows.append(("speculative state pool (for the running cap)", m.spec_state_pool_bytes))
    for label, size in rows:
        t.add_row(label, f"{size / GiB:,.2f} GiB")
    t.add_row(f"at {m.running_requests:,.0f} running requests, the engine allocates:", "")
    for label, term in ALLOCATION_LABELS:
        if term == "state" and not shared and m.allocation[term] > m.state_pool_bytes:
            # SGLang's padded slot 0 (S18) comes from the start-up reserve: say why it is above the pool
            label += " (the pool + its padded slot 0, from the reserve)"
        t.add_row(label, f"{m.allocation[term] / GiB:,.2f} GiB")
    draft_kv, pool = m.draft_kv_bytes_per_token_per_gpu, m.pool_bytes_per_token_per_gpu
    # the pool's cost of a token where it differs from the model's KV (SGLang's sliding pool sized with it)
    sized = pool and abs(pool - m.kv_bytes_per_token_per_gpu - draft_kv * m.draft_kv_shared) > 0.5
    t.add_row(
        "KV bytes per token (model)",
        f"{m.kv_bytes_per_token:,.0f} B"
        + (f" + draft {draft_kv:,.0f} B per GPU" if draft_kv else "")
        + (f"; the pool takes {pool:,.0f} B per GPU a token" if sized else ""),
    )
    t.add_row("state per sequence (model)", f"{m.state_bytes_per_sequence / 2**20:,.1f} MiB")
    # per replica (its TP × PP GPUs together); predict's and plan's figure is over all replicas
    capacity = "KV capacity per replica" + (f" beside {m.running_requests:,.0f} requests' state" if shared else "")
    t.add_row(capacity, kv_tokens_text(m.kv_capacity_tokens))
    t.add_row(f"sequences of ISL+OSL = {m.context_tokens:,.0f} tokens", f"{math.floor(m.max_sequences):,}")
    # TensorRT-LLM admits a request only with its prompt + max_tokens free: that, not the mean, is what it holds
    held = "its prompt + max_tokens, reserved at admission" if m.reserves_whole_output else "a running request's mean"
    t.add_row(
        f"running limit (each at {m.running_context_tokens:,.0f} tokens, {held})",
        f"{m.running_requests:,.0f} ({m.running_limited_by})",
    )
    return t
