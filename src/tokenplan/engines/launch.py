"""What an engine's launch command is written from (:class:`Launch`: one planned configuration)
and the shell around it: one server per replica or per host, their GPUs and ports, quoting, and
the ``--endpoint`` list ``tokenplan generate`` takes. Each engine (``sglang.py``, ``vllm.py``,
``trtllm.py``) writes its own arguments (``Engine.launch_command``) and joins them here.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, NamedTuple, Protocol

from tokenplan.units import Dtype

if TYPE_CHECKING:
    from tokenplan.engines.settings import EngineSettings


class Parallelism(Protocol):
    """The GPU counts of a deployment an engine reads (``perf.layout.Layout`` has them)."""

    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def attention_dp(self) -> bool: ...
    @property
    def gpus_per_replica(self) -> int: ...


# What a fixed cap reached with the lifting flags adds to a configuration's label (MaxRunning.label).
PREFIX_CACHE_OFF = ", prefix cache off"


class MaxRunning(NamedTuple):
    """The running-request cap per replica, one setting from ``--max-running`` to the launch
    command (SGLang ``--max-running-requests``, vLLM ``--max-num-seqs``, TRT-LLM
    ``--max_batch_size``): the engine's default (``MaxRunning()``), lifted to what memory allows
    (``lifted``: SGLang's default 48 with speculative decoding raised, on a hybrid model with its
    radix cache off), or fixed at ``requests`` per replica (``--max-running N``; a measured run's
    ``max_running`` column)."""

    requests: int | None = None
    lifted: bool = False

    def label(self, prefix_cache_off: bool = False) -> str:
        """What a configuration's label adds: ``, running cap 64`` (fixed), ``, running cap
        raised`` (lifted), ``, running cap 406, prefix cache off`` (fixed and reached with the
        lifting flags where ``prefix_cache_off``: SGLang's ``--disable-radix-cache`` on a hybrid
        model, ``Engine.disables_radix_cache``; a dense model's lifted cap takes no such flag, and
        its label said "prefix cache off" beside a command without it); empty by default."""
        if self.requests is not None:
            return f", running cap {self.requests}" + (PREFIX_CACHE_OFF if self.lifted and prefix_cache_off else "")
        return ", running cap raised" if self.lifted else ""

    def describe(self) -> str:
        """``48`` (fixed), ``raised`` (lifted) or ``engine default``."""
        if self.requests is not None:
            return f"{self.requests}"
        return "raised" if self.lifted else "engine default"


class Sized(NamedTuple):
    """One engine's launch as the plan sized it (``planning.launch.launch_sizing``): the memory
    fraction and running requests per replica that hold the batch with headroom, the
    ``--max-model-len`` it writes where the model's whole context does not fit one rank's KV
    cache (vLLM's start-up check; None: the engine's default), and why the engine would not
    start with this launch (its command is then not written; None: it starts)."""

    engine: str
    fraction: float
    running: int
    max_model_len: int | None = None
    refusal: str | None = None


class Launch(NamedTuple):
    """What an engine's launch command is written from: one planned configuration.

    Attributes:
        repo: the Hugging Face repository; native_dtype: the checkpoint's weight format (value).
        parsers: the reasoning-parser name, or {engine name: name}, or None.
        layout: TP/PP/EP/DP and attention DP.
        weight_dtype, kv_dtype: the planned formats.
        spec_method: ``mtp``, ``eagle3``, … or None; draft_tokens: k (0 without speculation).
        ssm_dtype: the hybrid state dtype the plan sized (None = the config's).
        hybrid: the model has linear-attention state.
        max_running: the running-request cap as the plan sets it (``Config.max_running``: the
            engine's default, lifted, or fixed by the user with ``plan --max-running``).
        planned_running: running requests per replica the plan assumes (the batch limit).
        settings: the planned engine's resolved settings.
        planned_engine: the name of the engine the plan was made for; another engine's command
            keeps that engine's own memory default.
        host_gpus: GPUs one host holds (one server process cannot span hosts without multi-node
            flags, so data-parallel replicas beyond one host get a server per host).
        sizing: a :class:`Sized` for each engine whose KV pool the plan sized to hold the batch
            with headroom (``planning.launch.launch_sizing``); an engine not listed keeps the
            planned settings' fraction (planned engine) or its own default, and ``planned_running``.
        draft_model: the EAGLE/DFlash drafter's checkpoint (``--draft-model``); None: the
            commands write :data:`DRAFT_MODEL` and say to put it there.
        max_model_len: the longest request (tokens) the planned vLLM server is launched for,
            where the model's whole context does not fit one rank's KV cache
            (``Config.max_model_len``, ``job.deploy``); None: the engine's default.
        trust_remote_code: the repository's own code must run (a custom tokenizer or config
            class: Kimi-K2's ``tokenization_kimi.py``): each command writes its engine's flag.
    """

    repo: str
    native_dtype: str
    parsers: object
    layout: Parallelism
    weight_dtype: Dtype
    kv_dtype: Dtype
    spec_method: str | None
    draft_tokens: int
    ssm_dtype: str | None
    hybrid: bool
    max_running: MaxRunning
    planned_running: int
    settings: EngineSettings
    planned_engine: str
    host_gpus: int = 8
    sizing: tuple[Sized, ...] = ()
    draft_model: str | None = None
    max_model_len: int | None = None
    trust_remote_code: bool = False

    def remote_code(self, flag: str) -> list[str]:
        """``[flag]`` where the repository's own code must run (:attr:`trust_remote_code`), else []."""
        return [flag] if self.trust_remote_code else []

    def sized(self, engine: str, default_fraction: float) -> tuple[float, int]:
        """(memory fraction, running requests per replica) the launch of ``engine`` sets: its
        entry in ``sizing``, else the planned settings' fraction for the planned engine or
        ``default_fraction`` (the engine's own default) for another, with ``planned_running``. A
        fixed cap (``max_running.requests``: the user's, or the plan's own "running cap N") is
        what the planned engine's launch sets: the plan's memory was sized for it (SGLang reserves
        speculative state and its request table for the whole cap). Another engine's launch in
        ``--json`` sets the fixed cap or what its own largest fraction holds, whichever is less:
        the warning of :func:`~tokenplan.planning.launch.launch_caps` names that figure, and a
        printed cap above it contradicted the warning beside it (a break-it pass)."""
        fixed = self.max_running.requests
        for sized in self.sizing:
            if sized.engine == engine:
                if fixed is None:
                    return sized.fraction, sized.running
                return sized.fraction, fixed if engine == self.planned_engine else min(sized.running, fixed)
        planned = self.settings.memory_fraction if engine == self.planned_engine else default_fraction
        return planned, self.planned_running if fixed is None else fixed

    def context_tokens(self, engine: str) -> int | None:
        """The ``max_model_len`` the launch of ``engine`` writes: the plan's (``max_model_len``)
        for the planned engine, its :class:`Sized` entry's for another; None: the engine's default."""
        if engine == self.planned_engine:
            return self.max_model_len
        return next((sized.max_model_len for sized in self.sizing if sized.engine == engine), None)

    def replicas_per_server(self, separate_servers: bool) -> int:
        """DP replicas one server runs (:func:`replicas_per_server`)."""
        return replicas_per_server(self.layout, self.host_gpus, separate_servers)

    def parser(self, engine: str) -> str | None:
        """The reasoning parser ``engine`` registers for the model (launch.yaml), or None."""
        if isinstance(self.parsers, dict):
            return self.parsers.get(engine)
        return self.parsers if isinstance(self.parsers, str) else None


def replicas_per_server(layout: Parallelism, host_gpus: int, separate_servers: bool) -> int:
    """DP replicas one server runs: 1 where each replica needs its own server
    (``separate_servers``), else as many as one host of ``host_gpus`` GPUs holds (at least 1, at
    most all ``layout.dp`` of them)."""
    if separate_servers or layout.dp <= 1:
        return 1
    return max(1, min(layout.dp, host_gpus // (layout.tp * layout.pp)))


def quote(value: object) -> str:
    """``value`` as one shell word (``shlex.quote`` of its text): a model path with a space or a
    quote, or a parser name, reaches the engine as given."""
    return shlex.quote(str(value))


def endpoint_list(host: str, base_port: int, servers: int) -> str:
    """``--endpoint http://HOST:PORT/v1`` for ports ``base_port`` … ``base_port + servers − 1``,
    the form ``tokenplan generate --endpoint`` takes (one per server)."""
    return " ".join(f"--endpoint http://{host}:{base_port + i}/v1" for i in range(servers))


def checkpoint_note(launch: Launch) -> str | None:
    """A comment line for a launch whose weight format is not the checkpoint's and cannot be
    made from it at load time, else None. SGLang and vLLM quantize a BF16 checkpoint to FP8 as
    they load it (``--quantization fp8``, dynamic scales); NVFP4, MXFP4 and INT4 (AWQ) they load
    only from a checkpoint quantized offline (SGLang ``ModelOptFp4LinearMethod.create_weights``:
    "NVFP4 quantization was selected, dynamic quantization is not supported.",
    ``python/sglang/srt/layers/quantization/modelopt_quant.py``; vLLM's ``modelopt_fp4``,
    ``mxfp4`` and ``awq`` read the checkpoint's quantization config), so ``--model-path`` must
    name such a checkpoint, not the BF16 repository. FP8 is made at load time from a 16-bit
    checkpoint only: from an AWQ or MXFP4 one the engines refuse ``--quantization fp8`` as a
    method other than the checkpoint's own (a new-user pass), and neither makes 16-bit weights
    from a quantized checkpoint."""
    fmt, native = launch.weight_dtype.value, launch.native_dtype
    sixteen = ("bf16", "fp16")  # one is cast to the other as it loads (--dtype)
    if (
        fmt == native
        or (fmt in sixteen and native in sixteen)
        or (launch.weight_dtype is Dtype.FP8 and native in sixteen)
    ):
        return None
    if launch.weight_dtype in (Dtype.BF16, Dtype.FP16):
        return f"# {fmt} weights are not made from a {native} checkpoint: put the {fmt} release of {launch.repo} in its place below"
    return (
        f"# {fmt} weights are not made at load time from a {native} checkpoint: put a {fmt} checkpoint of "
        f"{launch.repo}, quantized offline (NVIDIA ModelOpt; AutoAWQ for w4a16), in its place below"
    )


def quantizes_at_load(launch: Launch) -> bool:
    """The engine quantizes the checkpoint as it loads (``--quantization fp8`` on a 16-bit one).
    Where the command instead names an offline-quantized checkpoint (:func:`checkpoint_note`) it
    writes no ``--quantization``: vLLM and SGLang read the method from that checkpoint's
    quantization config and refuse a flag that names another (a ModelOpt FP8 checkpoint declares
    ``modelopt``, not ``fp8``; an explicit ``awq`` also forces vLLM off its Marlin kernel)."""
    return launch.weight_dtype.value != launch.native_dtype and checkpoint_note(launch) is None


# The drafter a speculative method needs: MTP's head is in the target checkpoint (SGLang NEXTN,
# vLLM "mtp" and TRT-LLM MTP read it from the model), EAGLE, EAGLE-3 and DFlash load a separate
# checkpoint the plan does not know (SGLang ``--speculative-draft-model-path``, required for DFLASH
# by ``arg_groups/speculative_hook.py`` ``_handle_dflash``; vLLM ``SpeculativeConfig.model``, whose
# ``__post_init__`` raises "num_speculative_tokens was provided but without speculative model."
# for eagle/eagle3/dflash without it, ``vllm/config/speculative.py``; TRT-LLM
# ``speculative_model_dir``, an alias of ``DecodingBaseConfig.speculative_model``,
# ``tensorrt_llm/llmapi/llm_args.py``). Each launch writes this placeholder in its place.
DRAFT_MODEL = "DRAFT_MODEL"


def needs_drafter(method: str | None) -> bool:
    """A speculative method whose drafter is a checkpoint of its own (every one but MTP)."""
    return method is not None and method != "mtp"


def drafter_path(launch: Launch) -> str:
    """The drafter's checkpoint as a command writes it: ``launch.draft_model`` (shell-quoted),
    or the :data:`DRAFT_MODEL` placeholder."""
    return quote(launch.draft_model) if launch.draft_model else DRAFT_MODEL


def draft_note(launch: Launch) -> str | None:
    """A comment line for a launch whose speculative method loads a separate drafter
    (:func:`needs_drafter`) the plan was not given: put its checkpoint where the command says
    DRAFT_MODEL; else None."""
    if not needs_drafter(launch.spec_method) or launch.draft_model:
        return None
    return (
        f"# {DRAFT_MODEL}: put the drafter's checkpoint there ({launch.spec_method} draft model for "
        f"{launch.repo}: a local path or Hugging Face repository)"
    )


def replica_hosts(launch: Launch) -> int:
    """Hosts one replica spans: ⌈TP·PP / host GPUs⌉, 1 where it fits one host."""
    g = launch.layout.gpus_per_replica
    return -(-g // launch.host_gpus) if g > launch.host_gpus else 1


def serves_other_hosts(launch: Launch) -> bool:
    """True when the plan's GPUs span more than one host: its servers are then reached at
    ``http://HOST:PORT`` from elsewhere, so an engine that binds the loopback interface by
    default (SGLang's ``ServerArgs.host`` "127.0.0.1", trtllm-serve's ``--host`` "localhost") is
    told to listen on every interface (``--host 0.0.0.0``); vLLM binds them all already."""
    return launch.layout.gpus_per_replica * launch.layout.dp > launch.host_gpus


def node_ranks_note(hosts: int, first: str = "", others: str = "") -> str:
    """How a command with ``--node-rank $NODE_RANK`` is run on a replica's ``hosts`` hosts."""
    rest = "1" if hosts == 2 else f"1 … {hosts - 1}"
    return f"run the command below on each, NODE_RANK=0 on HOST0 (the first; its address{first}) and {rest} on the others{others}"


def join_command(
    launch: Launch,
    args: list[str],
    separate_servers: bool,
    port_flag: str = "--port",
    base_port: int = 8000,
    hosts_note: str = "",
) -> str:
    """Join the arguments into a shell command.

    Each replica its own server (``separate_servers`` with DP > 1): a loop that starts, on each
    host, one server per replica the host holds, on replica ``i``'s GPUs (``CUDA_VISIBLE_DEVICES``
    ``i·g`` … ``i·g + g − 1`` for ``g`` GPUs per replica) and port ``base_port + i``
    (``port_flag``), and a comment with the ``--endpoint`` list for ``tokenplan generate``
    (127.0.0.1 where one host holds every replica, else HOST for each host's address). A replica
    wider than a host (:func:`replica_hosts` > 1) is one server over its hosts: the engine puts its
    multi-node arguments in ``args`` and says in ``hosts_note`` how to start them on each host;
    the endpoint is HOST0's. Replicas that share a server but span more hosts than one: a server
    per host, each running the replicas its host holds.
    """
    dp, g = launch.layout.dp, launch.layout.gpus_per_replica
    if separate_servers and dp > 1 and g <= launch.host_gpus:
        per_host = min(dp, launch.host_gpus // g)
        hosts = -(-dp // per_host)  # ⌈dp / per_host⌉
        devices = "$i" if g == 1 else f"$(seq -s, $((i * {g})) $((i * {g} + {g - 1})))"
        body = " \\\n    ".join(
            [f"CUDA_VISIBLE_DEVICES={devices} {args[0]}", *args[1:], f"{port_flag} $(({base_port} + i)) &"]
        )
        last = dp - (hosts - 1) * per_host
        where = (
            ""
            if hosts == 1
            else (
                f" on each of {hosts} hosts"
                + (f" (the last runs {last}: seq 0 {last - 1})" if last != per_host else "")
            )
        )
        host = "127.0.0.1" if hosts == 1 else "HOST"
        every = "" if hosts == 1 else " from every host (HOST: its address)"
        return (
            f"# one server per replica, each on its own GPUs and port{where}:\n"
            f"for i in $(seq 0 {per_host - 1}); do\n  {body}\ndone\n"
            f"# tokenplan generate takes each server{every}: {endpoint_list(host, base_port, per_host)}"
        )
    command = " \\\n  ".join(args)
    span = replica_hosts(launch)
    if span > 1:  # the engine's own multi-node arguments are in args; hosts_note says how to run them
        more = (
            f"# start {dp} such replicas, each on {span} hosts of its own, and give each HOST0 to tokenplan "
            f"generate with its own --endpoint\n"
            if dp > 1
            else ""
        )
        return (
            f"# one replica spans {span} hosts of {launch.host_gpus} GPUs: {hosts_note}\n{more}{command}\n"
            f"# tokenplan generate takes the server on HOST0: {endpoint_list('HOST0', base_port, 1)}"
        )
    if separate_servers and dp > 1:
        return (
            f"# one server per replica: start {dp} of these on disjoint GPUs (CUDA_VISIBLE_DEVICES)\n"
            f"# and give each to tokenplan generate with its own --endpoint\n{command}"
        )
    per_server = launch.replicas_per_server(False)
    if per_server >= dp:
        return command
    servers = -(-dp // per_server)  # ⌈dp / per_server⌉
    last = dp - (servers - 1) * per_server
    tail = f" (the last running {last} replicas)" if last != per_server else ""
    return (
        f"# one server per host: start {servers} of these, each on its own {launch.host_gpus}-GPU host{tail},\n"
        f"# and give each to tokenplan generate with its own --endpoint\n{command}"
    )
