"""How an engine shards the non-expert weights when attention runs data-parallel.

vLLM deploys each data-parallel rank as its own engine core at tensor parallelism 1 ("each DP
rank is deployed as a separate core engine process", vllm ``docs/serving/data_parallel_deployment.md``;
``vllm serve --tensor-parallel-size 1 --data-parallel-size N --enable-expert-parallel``), so every
weight but the routed experts — attention, dense FFN layers, shared experts, embedding and
lm_head — is whole on each GPU, and only the experts are split over the DP × TP expert-parallel
group (``docs/serving/expert_parallel_deployment.md``). SGLang's ``--enable-dp-attention`` keeps
the dense FFN layers and shared experts tensor-parallel over the whole group (its
``moe_dense_tp_size`` default) and the embedding vocabulary-parallel; TensorRT-LLM's attention
DP likewise keeps its MLPs tensor-parallel.
"""

from __future__ import annotations


def dense_whole_under_attention_dp(engine: str) -> bool:
    """True where ``engine`` (a catalog name) holds every non-expert weight whole on each GPU
    under attention DP (vLLM); False where its dense layers stay TP-sharded (SGLang, TensorRT-LLM)."""
    return engine == "vllm"
