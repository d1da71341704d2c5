"""Server launch commands for a chosen configuration, spelled as the engines' current flags.

SGLang (``python -m sglang.launch_server``; server_args / arg_groups, engine-facts S1–S14):
``--tp-size``, ``--dp-size``, ``--ep-size``, ``--enable-dp-attention``, ``--pp-size``,
``--quantization``, ``--kv-cache-dtype fp8_e4m3``, ``--mem-fraction-static``,
``--max-running-requests``, ``--speculative-algorithm NEXTN --speculative-num-steps K
--speculative-eagle-topk 1 --speculative-num-draft-tokens K+1``, ``--reasoning-parser``.
vLLM (``vllm serve``; engine args, engine-facts V1–V11): ``--tensor-parallel-size``,
``--data-parallel-size``, ``--pipeline-parallel-size``, ``--enable-expert-parallel``,
``--quantization``, ``--kv-cache-dtype fp8``, ``--gpu-memory-utilization``, ``--max-num-seqs``,
``--speculative-config '{"method":"mtp","num_speculative_tokens":K}'``, ``--reasoning-parser``.
"""

from __future__ import annotations

import json
import math

from tokenplan.job.evaluate import Evaluation
from tokenplan.units import Dtype

_SGLANG_QUANT = {Dtype.FP8: "fp8", Dtype.NVFP4: "modelopt_fp4", Dtype.MXFP4: "mxfp4", Dtype.W4A16: "awq"}
_VLLM_QUANT = {Dtype.FP8: "fp8", Dtype.NVFP4: "modelopt_fp4", Dtype.MXFP4: "mxfp4", Dtype.W4A16: "awq"}


def _parser(parsers: object, engine: str) -> str | None:
    if isinstance(parsers, dict):
        return parsers.get(engine)
    return parsers if isinstance(parsers, str) else None


def running_limit(ev: Evaluation) -> int:
    """Running requests per replica the plan assumes (the batch limit)."""
    return int(ev.steady.limits.limit)


# Requests kept in flight beyond the running limit: enough that a finished request is replaced
# within the same scheduler step (the engine admits from its queue between steps), without a
# long queue that only adds TTFT. 10 % of the batch, at least 8 for small batches.
QUEUE_HEADROOM_FRACTION = 0.10
QUEUE_HEADROOM_MIN = 8


def client_concurrency(ev: Evaluation) -> int:
    """Requests to keep in flight per server endpoint: the batch of every replica that server
    runs (all DP replicas behind one server, or one replica where each has its own server) plus
    10 % (at least 8) so that a finished request is replaced at once."""
    total = running_limit(ev) * (1 if servers_per_replica(ev) else ev.config.layout.dp)
    return total + max(QUEUE_HEADROOM_MIN, math.ceil(QUEUE_HEADROOM_FRACTION * total))


def servers_per_replica(ev: Evaluation) -> bool:
    """True when each replica needs a server of its own: with EP or attention DP the engines'
    ``--dp-size`` / ``--data-parallel-size`` mean attention ranks inside one expert group
    (SGLang ``--enable-dp-attention``; vLLM ``--enable-expert-parallel`` spans TP × DP), not
    independent replicas."""
    lay = ev.config.layout
    return lay.dp > 1 and (lay.ep > 1 or lay.attention_dp)


def _with_note(ev: Evaluation, args: list[str]) -> str:
    """Join the arguments into one shell command, after a comment line when each replica needs
    its own server."""
    command = " \\\n  ".join(args)
    if not servers_per_replica(ev):
        return command
    dp = ev.config.layout.dp
    return (f"# one server per replica: start {dp} of these on disjoint GPUs (CUDA_VISIBLE_DEVICES)\n"
            f"# and give each to tokenplan generate with its own --endpoint\n{command}")


def sglang_command(ev: Evaluation, repo: str, native_dtype: str, parsers: object) -> str:
    """``python -m sglang.launch_server ...`` for the configuration."""
    c, lay = ev.config, ev.config.layout
    args = ["python -m sglang.launch_server", f"--model-path {repo}", f"--tp-size {lay.tp}"]
    if lay.attention_dp:  # attention DP across the TP ranks of one replica (SGLang DP-attention)
        args.append(f"--dp-size {lay.tp} --enable-dp-attention")
    elif lay.dp > 1 and not servers_per_replica(ev):
        args.append(f"--dp-size {lay.dp}")
    if lay.pp > 1:
        args.append(f"--pp-size {lay.pp}")
    if lay.ep > 1:
        args.append(f"--ep-size {lay.ep}")
    if c.weight_dtype.value != native_dtype and c.weight_dtype in _SGLANG_QUANT:
        args.append(f"--quantization {_SGLANG_QUANT[c.weight_dtype]}")
    if c.kv_dtype is Dtype.FP8:
        args.append("--kv-cache-dtype fp8_e4m3")
    args.append(f"--mem-fraction-static {ev.settings.memory_fraction:.3f}")
    if ev.settings.tight:  # a checkpoint the default reserve leaves no room for (engine-facts S19)
        args.append(f"--chunked-prefill-size {ev.settings.chunk_tokens} --cuda-graph-max-bs {ev.settings.graph_max_bs}")
    if c.spec is not None:
        k = c.spec.draft_tokens
        algo = "NEXTN" if c.spec.method == "mtp" else c.spec.method.upper()
        args.append(f"--speculative-algorithm {algo} --speculative-num-steps {k} "
                    f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}")
    if c.ssm_dtype is not None and ev.deployment.spec.is_hybrid:
        args.append(f"--mamba-ssm-dtype {c.ssm_dtype}")  # S10; the memory model sized the state in it
    if c.lift_running_cap and ev.deployment.spec.is_hybrid:
        # --disable-radix-cache with an explicit --max-running-requests gives one state slot per
        # running request (S3); the plan's limit already holds each request's k + 1 speculative
        # state copies (S18), so these flags allocate (tests/unit/planning/test_plan_allocates.py).
        args.append("--disable-radix-cache")
    if c.lift_running_cap or c.max_running is not None:
        args.append(f"--max-running-requests {running_limit(ev)}")
    parser = _parser(parsers, "sglang")
    if parser:
        args.append(f"--reasoning-parser {parser}")
    return _with_note(ev, args)


def vllm_command(ev: Evaluation, repo: str, native_dtype: str, parsers: object) -> str:
    """``vllm serve ...`` for the configuration (vLLM keeps its own memory rule: the command
    sets ``--max-num-seqs`` to the plan's batch limit)."""
    c, lay = ev.config, ev.config.layout
    ranks = 1
    if lay.attention_dp:  # vLLM's DP attention: TP 1 per rank, DP ranks share one EP group
        ranks = lay.tp
        args = ["vllm serve " + repo, "--tensor-parallel-size 1", f"--data-parallel-size {lay.tp}"]
    else:
        args = ["vllm serve " + repo, f"--tensor-parallel-size {lay.tp}"]
        if lay.dp > 1 and not servers_per_replica(ev):
            args.append(f"--data-parallel-size {lay.dp}")
    if lay.pp > 1:
        args.append(f"--pipeline-parallel-size {lay.pp}")
    if lay.ep > 1 or lay.attention_dp:
        args.append("--enable-expert-parallel")
    if c.weight_dtype.value != native_dtype and c.weight_dtype in _VLLM_QUANT:
        args.append(f"--quantization {_VLLM_QUANT[c.weight_dtype]}")
    if c.kv_dtype is Dtype.FP8:
        args.append("--kv-cache-dtype fp8")
    args.append("--gpu-memory-utilization 0.92")
    args.append(f"--max-num-seqs {math.ceil(running_limit(ev) / ranks)}")  # per engine rank
    if c.spec is not None:
        spec = {"method": "mtp" if c.spec.method == "mtp" else c.spec.method,
                "num_speculative_tokens": c.spec.draft_tokens}
        args.append(f"--speculative-config '{json.dumps(spec, separators=(',', ':'))}'")
    parser = _parser(parsers, "vllm")
    if parser:
        args.append(f"--reasoning-parser {parser}")
    return _with_note(ev, args)
