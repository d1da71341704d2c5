"""One GPU's memory as an engine splits it (:class:`MemoryBreakdown`, built by
:func:`tokenplan.perf.memory.memory_breakdown`): weights, reserve, the KV and state pools, and
what running requests take of them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenplan.records import quick_init


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Per-GPU memory of one deployment (bytes) and what it holds.

    Attributes:
        gpu_bytes: device memory.
        weight_bytes_per_gpu: model weights on one GPU (MTP/draft weights included when used).
        reserve_bytes: engine reserve (activations, CUDA graphs, communication, fraction headroom).
        kv_pool_bytes: memory for the KV cache on one GPU.
        state_pool_bytes: memory for linear-attention state on one GPU (hybrid models).
        kv_bytes_per_token_per_gpu: KV bytes one token adds on one GPU (full-attention layers).
        sliding_bytes_per_token_per_gpu: the same for sliding-window layers (capped at the window).
        state_bytes_per_sequence_per_gpu: recurrent state one sequence holds on one GPU.
        sequence_shards: ranks that split the sequences (TP with attention DP, else 1).
        kv_capacity_tokens: tokens the replica's KV cache holds (all sequences together).
        state_slots: sequences the state pool holds (None when the model has no state).
        spec_state_copies: extra copies of the state each running request holds under
            speculative decoding (SGLang k + 1, vLLM k; ````Engine.spec_state_copies``).
        spec_state_pool_bytes: with a separate state pool (SGLang's ratio split), the bytes
            reserved for those copies before the split (``mamba_cache_per_req ×
            max_running_requests × speculative_num_draft_tokens``, S3); 0 otherwise.
        padding_state_bytes: state rows an engine allocates beyond the requests (SGLang's slot 0
            of the state pool and of each speculative cache, S18), taken from the reserve.
        draft_kv_bytes_per_token_per_gpu: KV bytes per token of the draft's attention layers
            (MTP layers, or an EAGLE/DFlash drafter's, ``arch.draft``); 0 without speculation.
        draft_kv_shared: the draft's layers take their KV from the target's pool, one more set
            of layers per token (vLLM: the drafter's attention layers join the KV cache spec,
            ``v1/spec_decode/eagle.py`` ``load_model``; DFlash "context KVs are pre-inserted into the
            KV cache", ``models/qwen3_dflash.py``; TRT-LLM: ``get_pp_layers`` appends
            ``get_num_spec_layers`` to the KV cache manager); False: a pool of their own at the
            target's token count, taken from the reserve (SGLang's draft worker,
            ``draft_runner_cache_size``, S3).
        draft_weight_bytes_per_gpu: an EAGLE/DFlash drafter's weights on one GPU, part of
            ``weight_bytes_per_gpu`` (MTP layers are the target's own: 0).
        spec_commit_state_transfers: whole-state transfers per running request per verify step
            beyond the verify kernel's own: 2 (read the accepted intermediate state, write it into
            the request's slot) where the engine copies it back (SGLang, S20), else 0.
        swa_full_tokens_ratio: sliding-window pool tokens per full-attention token where the
            engine sizes that pool with the KV pool (SGLang ``--swa-full-tokens-ratio``); None where
            a sliding layer holds only its window per request.
    """

    gpu_bytes: float
    weight_bytes_per_gpu: float
    reserve_bytes: float
    kv_pool_bytes: float
    state_pool_bytes: float
    kv_bytes_per_token_per_gpu: float
    sliding_bytes_per_token_per_gpu: float
    state_bytes_per_sequence_per_gpu: float
    sequence_shards: int
    kv_capacity_tokens: float
    state_slots: float | None
    sliding_window: int
    spec_state_copies: int = 0
    spec_state_pool_bytes: float = 0.0
    padding_state_bytes: float = 0.0
    draft_kv_bytes_per_token_per_gpu: float = 0.0
    spec_commit_state_transfers: int = 0
    swa_full_tokens_ratio: float | None = None
    draft_kv_shared: bool = False
    draft_weight_bytes_per_gpu: float = 0.0

    @property
    def pool_kv_bytes_per_token_per_gpu(self) -> float:
        """Full-attention KV bytes one token takes of the KV pool (bytes): the target's layers,
        and the draft's where they share the pool (:attr:`draft_kv_shared`)."""
        draft = self.draft_kv_bytes_per_token_per_gpu if self.draft_kv_shared else 0.0
        return self.kv_bytes_per_token_per_gpu + draft

    @property
    def pool_bytes_per_token_per_gpu(self) -> float:
        """Pool bytes one more full-attention token takes (bytes): its full-attention KV, and
        where the engine sizes a sliding-window pool in proportion (``swa_full_tokens_ratio``,
        SGLang) that share of the sliding layers' KV too."""
        ratio = self.swa_full_tokens_ratio
        return self.pool_kv_bytes_per_token_per_gpu + (ratio * self.sliding_bytes_per_token_per_gpu if ratio else 0.0)

    @property
    def sizing_bytes_per_token_per_gpu(self) -> float:
        """The bytes per token a launch sizes its pool by (bytes): :attr:`pool_bytes_per_token_per_gpu`
        where the sliding pool is sized in proportion, else the full and the sliding layers' KV
        (the sliding part at most this: a request past the window holds no more of it)."""
        if self.swa_full_tokens_ratio:
            return self.pool_bytes_per_token_per_gpu
        return self.pool_kv_bytes_per_token_per_gpu + self.sliding_bytes_per_token_per_gpu

    @property
    def fits(self) -> bool:
        """True when weights and reserve leave room for at least one sequence's cache."""
        return self.kv_pool_bytes > 0

    @property
    def state_bytes_per_running_sequence(self) -> float:
        """State one running sequence holds on one GPU with its speculative copies (bytes)."""
        return self.state_bytes_per_sequence_per_gpu * (1 + self.spec_state_copies)

    def allocation(self, running: float) -> dict[str, float]:
        """What the engine allocates on one GPU when ``running`` requests per replica may run
        (bytes per term; the terms sum to ``gpu_bytes``).

        Terms: ``weights``; ``kv_cache`` (the KV pool; where state and KV share one pool, what
        is left of it after ``running`` requests' state; the target's layers' share of it where
        the draft's layers share the pool); ``draft_kv`` (the draft's layers' KV: their own pool
        at the target's token count, or their share of the one pool); ``state`` (recurrent state slots, the padded slot
        included); ``spec_state`` (speculative intermediate states, ``running`` requests + the
        padded slot, k + 1 copies each under SGLang); ``reserve`` (what is left: activations,
        CUDA graphs, communication buffers and the fraction's headroom).

        Args:
            running: running requests per replica (the launch's ``--max-running-requests``).

        Returns:
            dict of term → bytes per GPU. A negative ``kv_cache`` or ``reserve`` means the
            launch cannot allocate (see :meth:`allocates`). Raises nothing.
        """
        per_gpu = running / self.sequence_shards
        s, copies = self.state_bytes_per_sequence_per_gpu, self.spec_state_copies
        pad = self.padding_state_bytes / (1 + copies) if s > 0 else 0.0  # one padded row per tensor
        if self.state_slots is None:
            state = per_gpu * s + pad
            spec_state = per_gpu * s * copies + pad * copies
            kv = self.kv_pool_bytes - per_gpu * self.state_bytes_per_running_sequence
        else:
            state = self.state_pool_bytes + pad
            spec_state = (per_gpu * s + pad) * copies
            kv = self.kv_pool_bytes
        d, k = self.draft_kv_bytes_per_token_per_gpu, self.kv_bytes_per_token_per_gpu
        draft = max(kv, 0.0) * (d / (k + d) if self.draft_kv_shared else d / k) if k > 0 else 0.0
        kv -= draft if self.draft_kv_shared else 0.0
        used = self.weight_bytes_per_gpu + kv + draft + state + spec_state
        return {
            "weights": self.weight_bytes_per_gpu,
            "kv_cache": kv,
            "draft_kv": draft,
            "state": state,
            "spec_state": spec_state,
            "reserve": self.gpu_bytes - used,
        }

    def kv_tokens_beside(self, running: float) -> float:
        """KV tokens per replica the pool holds beside ``running`` requests' state: where state
        and KV share one pool (``state_slots`` None) what the state leaves
        (``allocation(running)["kv_cache"]``), else the KV pool's whole capacity."""
        if self.state_slots is not None or self.state_bytes_per_sequence_per_gpu <= 0:
            return self.kv_capacity_tokens
        per_token = self.pool_bytes_per_token_per_gpu
        left = max(self.pool_left(running), 0.0)
        return left / per_token * self.sequence_shards if per_token > 0 else float("inf")

    def pool_left(self, running: float) -> float:
        """KV pool bytes per GPU left for tokens beside ``running`` requests' state (bytes; the
        draft's share included where it shares the pool; negative when the state overruns it)."""
        a = self.allocation(running)
        return a["kv_cache"] + (a["draft_kv"] if self.draft_kv_shared else 0.0)

    def kv_tokens_reported(self, running: float) -> float | None:
        """:meth:`kv_tokens_beside` as results report it: None where no token takes pool bytes
        (no full-attention layer: every layer is linear attention, or slides without a sliding
        pool sized in proportion), so the cache holds no count of tokens. Infinity is not JSON: a
        plan of such a model wrote ``Infinity`` that ``tokenplan report --plan`` then refused."""
        tokens = self.kv_tokens_beside(running)
        return tokens if math.isfinite(tokens) else None

    def allocates(self, running: float) -> bool:
        """True when a launch with ``running`` requests per replica allocates: its KV pool is
        positive and its terms leave a non-negative reserve within the GPU's memory."""
        a = self.allocation(running)
        return a["kv_cache"] > 0 and a["reserve"] >= 0

    def max_sequences(self, context_tokens: float) -> float:
        """Sequences of ``context_tokens`` that fit at once in the replica (KV and state). Where a
        sequence takes only tokens of the pool, over its whole tokens (``kv_capacity_tokens``: each
        rank holds whole tokens); where state or a per-request sliding window shares it, over its bytes."""
        per_token = self.pool_bytes_per_token_per_gpu
        tokens = self.kv_capacity_tokens / self.sequence_shards
        only_tokens = (self.swa_full_tokens_ratio or self.sliding_bytes_per_token_per_gpu <= 0) and (
            self.state_slots is not None or self.state_bytes_per_running_sequence <= 0
        )
        pool = tokens * per_token if only_tokens and per_token > 0 and math.isfinite(tokens) else self.kv_pool_bytes
        if self.swa_full_tokens_ratio:  # the sliding pool is sized with the full one (SGLang)
            per_seq_kv = self.pool_bytes_per_token_per_gpu * context_tokens
        else:  # sliding layers hold their window per request
            per_seq_kv = (
                self.pool_kv_bytes_per_token_per_gpu * context_tokens
                + self.sliding_bytes_per_token_per_gpu * min(context_tokens, self.sliding_window)
            )
        if self.state_slots is None:
            per_seq = per_seq_kv + self.state_bytes_per_running_sequence
            seqs = pool / per_seq if per_seq > 0 else float("inf")
            return seqs * self.sequence_shards
        by_kv = pool / per_seq_kv if per_seq_kv > 0 else float("inf")
        return min(by_kv * self.sequence_shards, self.state_slots)


quick_init(MemoryBreakdown)  # a quicker __init__, same signature (tokenplan.records)
