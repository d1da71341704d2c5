"""Server launch commands for a chosen configuration, and the client concurrency that keeps them busy.

Each engine writes its own command (``Engine.launch_command`` in ``tokenplan.engines``: SGLang
``python -m sglang.launch_server``, vLLM ``vllm serve``, TensorRT-LLM ``trtllm-serve``), with that
engine's own memory setting: the planned engine's from the plan, another engine's its default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tokenplan.engines.base import Engine, Launch, replicas_per_server
from tokenplan.job.evaluate import Evaluation


def running_limit(ev: Evaluation) -> int:
    """Running requests per replica the plan assumes (the batch limit)."""
    return int(ev.steady.limits.limit)


# Requests kept in flight beyond the running limit: enough that a finished request is replaced
# within the same scheduler step (the engine admits from its queue between steps), without a
# long queue that only adds TTFT. 10 % of the batch, at least 8 for small batches.
QUEUE_HEADROOM_FRACTION = 0.10
QUEUE_HEADROOM_MIN = 8


# A host of PCIe cards: NVIDIA's RTX PRO Servers hold up to eight RTX PRO 6000 Blackwell Server
# Edition cards (nvidia.com/en-us/data-center/rtx-pro-server/), as 8-GPU L40S servers do.
# Boards and trays bring their own count (Gpu.node_gpus: 8 on HGX, 4 on a GB200 NVL72 tray).
PCIE_HOST_GPUS = 8


def host_gpus(ev: Evaluation) -> int:
    """GPUs one host holds: the GPU's rental unit where it is a board or tray, else a host of
    ``PCIE_HOST_GPUS`` PCIe cards."""
    node = ev.deployment.gpu.node_gpus
    return node if node > 1 else PCIE_HOST_GPUS


def client_concurrency(ev: Evaluation) -> int:
    """Requests to keep in flight per server endpoint: the batch of every replica that server
    runs (the DP replicas one host holds behind one server, or one replica where each has its
    own server, ``Engine.servers_per_replica``) plus 10 % (at least 8) so that a finished
    request is replaced at once. A replica's batch is its running limit, or the smaller batch the job
    gives it when it has fewer requests than the replicas hold."""
    separate = ev.config.engine.servers_per_replica(ev.config.layout)
    # the batch the plan runs: the running limit, or fewer where the job has fewer requests
    # than the replicas hold (100,000 B200 for 914,000 prompts run 9 each, not 48)
    per_replica = min(running_limit(ev), math.ceil(ev.steady.batch))
    total = per_replica * replicas_per_server(ev.config.layout, host_gpus(ev), separate)
    return total + max(QUEUE_HEADROOM_MIN, math.ceil(QUEUE_HEADROOM_FRACTION * total))


def launch_for(ev: Evaluation, repo: str, native_dtype: str, parsers: object) -> Launch:
    """What a launch command is written from, for the evaluated configuration ``ev``.

    Args:
        ev: the chosen configuration. repo: the Hugging Face repository. native_dtype: the
            checkpoint's weight format (value). parsers: reasoning-parser name or {engine: name}.
    """
    c = ev.config
    return Launch(repo=repo, native_dtype=native_dtype, parsers=parsers, layout=c.layout, weight_dtype=c.weight_dtype,
                  kv_dtype=c.kv_dtype, spec_method=c.spec.method if c.spec else None,
                  draft_tokens=c.spec.draft_tokens if c.spec else 0, ssm_dtype=c.ssm_dtype,
                  hybrid=ev.deployment.spec.is_hybrid, lift_running_cap=c.lift_running_cap,
                  max_running_set=c.max_running is not None, running_limit=running_limit(ev), settings=ev.settings,
                  planned_engine=c.engine.name, host_gpus=host_gpus(ev))


def launch_commands(ev: Evaluation, repo: str, native_dtype: str, parsers: object,
                    engines: Mapping[str, Engine]) -> dict[str, str]:
    """Every engine's launch command that runs on the GPU vendor, the planned engine first.

    Args:
        ev: the chosen configuration. repo: the Hugging Face repository. native_dtype: the
            checkpoint's weight format. parsers: reasoning-parser name or {engine: name}.
        engines: the engines to write commands for, by name, in order (besides the planned one).

    Returns:
        engine name → shell command. Raises nothing.
    """
    planned = ev.config.engine
    launch = launch_for(ev, repo, native_dtype, parsers)
    order = [planned] + [e for name, e in engines.items() if name != planned.name]
    return {e.name: e.launch_command(launch) for e in order if ev.deployment.gpu.vendor in e.vendors}
