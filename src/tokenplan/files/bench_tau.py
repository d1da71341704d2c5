"""τ for ``plan --spec METHOD:K:FILE``: the acceptance a ``tokenplan bench --save`` file measured.

The bench JSON's ``acceptance`` (``tokenplan.bench.acceptance_sweep.sweep_acceptance``) holds τ over the
sweep, the per-position acceptance where the server exposes it (vLLM, TensorRT-LLM) and τ per
context bucket where the answers carried their verification counts (SGLang ``spec_verify_ct``).
A ``vllm bench serve --save-result`` JSON is read too: its ``spec_decode_acceptance_length`` and
``spec_decode_per_position_acceptance_rates`` (``vllm/benchmarks/serve.py``, vllm-project/vllm@009e6d4;
JSON lines of several runs are pooled, each run weighted by its ``spec_decode_num_drafts``).
The τ a plan takes, in this order:

1. per-position acceptance ``a_0, a_1, …`` measured at ``m`` positions: τ(K) = 1 + a_0 + … +
   a_(K−1) for the plan's K ≤ m (position i is accepted in a fraction a_i of the drafts, vLLM's
   definition, so a chain of K drafts yields that many tokens per step); K > m is refused, as the
   bench did not measure the positions beyond m;
2. else τ of the context bucket whose mean decode context is nearest the job's (by ratio), the
   acceptance on traces as long as the job's;
3. else τ over the sweep.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from tokenplan.errors import ConfigError, InputError
from tokenplan.files.reports import load_bench_json


def bench_tau(path: str, draft_tokens: int, context_tokens: float) -> tuple[float, str]:
    """``(τ, note)`` for a speculative setting with ``draft_tokens`` drafts (K) from the bench file
    at ``path``, for a job decoding at ``context_tokens`` of context on average (tokens); the note
    says where τ came from.

    Raises:
        InputError: the file does not exist, measured no acceptance, or fewer draft positions than K.
        ConfigError: the file is not a bench JSON (see :func:`~tokenplan.files.reports.load_bench_json`),
            or its ``acceptance`` is malformed.
    """
    if not Path(path).is_file():
        where = "is a directory" if Path(path).is_dir() else "does not exist"
        raise InputError(
            "spec",
            path,
            f"METHOD:K:TAU with TAU a number, or the path of an existing `tokenplan bench --save` JSON file; "
            f"{path} {where}",
        )
    acc = _vllm_result(path)
    if acc is None:
        _refuse_other_json(path)
        acc = load_bench_json(path).get("acceptance")
    if not acc:
        raise InputError(
            "spec",
            path,
            "a bench JSON that measured speculative acceptance (this one holds none: "
            "the server reported none, or the file predates bench reading it)",
        )
    if not isinstance(acc, dict) or not _number(acc.get("tau")):
        raise ConfigError(path, "acceptance.tau", f"expected a number, got {acc!r:.80}")
    per_pos = acc.get("per_position") or []
    buckets = [
        b
        for b in acc.get("context_buckets") or ()
        if isinstance(b, dict)
        and _number(b.get("tau"))
        and _number(b.get("mean_decode_context_tokens"))
        and b["mean_decode_context_tokens"] > 0
    ]
    name = Path(path).name
    if per_pos:
        if not all(_number(p) for p in per_pos):
            raise ConfigError(path, "acceptance.per_position", f"expected numbers, got {per_pos!r:.80}")
        if draft_tokens > len(per_pos):
            raise InputError(
                "spec draft tokens", draft_tokens, f"K at most {len(per_pos)}, the draft positions {name} measured"
            )
        tau = 1.0 + sum(per_pos[:draft_tokens])
        rates = ", ".join(f"{p:.2f}" for p in per_pos[:draft_tokens])
        return tau, (
            f"τ {tau:.2f} for k={draft_tokens} from {name}: 1 + its per-position acceptance {rates} "
            f"({acc.get('source')}, over the whole sweep; the job decodes at ~{context_tokens:,.0f} "
            "tokens of context)."
        )
    if buckets:
        best = min(buckets, key=lambda b: abs(math.log(b["mean_decode_context_tokens"] / max(context_tokens, 1.0))))
        return best["tau"], (
            f"τ {best['tau']:.2f} from {name}: its {best['bucket']} context bucket "
            f"({best['requests']} requests decoded at ~{best['mean_decode_context_tokens']:,.0f} "
            f"tokens), the nearest to the job's ~{context_tokens:,.0f}."
        )
    return acc["tau"], (
        f"τ {acc['tau']:.2f} from {name}: over the whole sweep ({acc.get('source')}; "
        "no per-position or per-context figures in the file)."
    )


def _refuse_other_json(path: str) -> None:
    """Refuse a JSON object that is no bench file at all (a plan JSON said ``num_gpus: missing``);
    a bench file with a bad key goes on to :func:`load_bench_json`, which names the key."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return  # load_bench_json says what is wrong
    if isinstance(data, dict) and "levels" not in data:
        raise InputError(
            "spec",
            path,
            "METHOD:K:TAU with TAU a number, or a `tokenplan bench --save` or `vllm bench serve` result file; "
            f"{Path(path).name} is neither (its keys: {', '.join(sorted(map(str, data))[:6])})",
        )


def _vllm_result(path: str) -> dict | None:
    """The acceptance of a ``vllm bench serve`` result file (one JSON object, or JSON lines pooled
    by drafts) as a bench ``acceptance`` dict, or None when the file is not one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        runs = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if "\n" in text.strip()
            else [json.loads(text)]
        )
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # load_bench_json says what is wrong
    if not runs or not all(isinstance(r, dict) and _number(r.get("spec_decode_acceptance_length")) for r in runs):
        return None
    drafts = [r.get("spec_decode_num_drafts") if _number(r.get("spec_decode_num_drafts")) else 1 for r in runs]
    tau = 1 + sum((r["spec_decode_acceptance_length"] - 1) * d for r, d in zip(runs, drafts)) / sum(drafts)
    rates = [r.get("spec_decode_per_position_acceptance_rates") or [] for r in runs]
    per_pos = (
        [sum(rs[i] * d for rs, d in zip(rates, drafts)) / sum(drafts) for i in range(len(rates[0]))]
        if len({len(rs) for rs in rates}) == 1
        else []
    )
    return {"tau": tau, "source": "vllm bench serve", "per_position": per_pos, "context_buckets": []}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def resolve_spec(text: str, isl_mean: float, osl_mean: float) -> tuple[str, str | None]:
    """A ``--spec`` text whose TAU names a bench file (``mtp:3:bench.json``) → the same setting
    with that file's τ (:func:`bench_tau`, read at the job's mean decode context ``isl_mean +
    osl_mean / 2`` tokens: an answer's context runs from its prompt to prompt + output) and the
    note saying where it came from; any other text unchanged, with no note (``parse_spec`` judges it).

    Raises:
        InputError, ConfigError: see :func:`bench_tau`.
    """
    parts = text.strip().split(":", 2)
    if len(parts) < 3:
        return text, None
    try:
        float(parts[2])
        return text, None
    except ValueError:
        pass
    try:
        k = int(parts[1])
    except ValueError:
        return text, None  # a malformed K: parse_spec says so
    try:
        tau, note = bench_tau(parts[2].strip(), k, isl_mean + osl_mean / 2)
    except InputError as refused:  # named as the option the text came in: --spec mtp:4:bench.json
        allowed = str(refused).partition("(allowed: ")[2]
        raise InputError("spec", text, allowed[:-1] if allowed.endswith(")") else allowed or None) from None
    return f"{parts[0]}:{k}:{tau!r}", note
