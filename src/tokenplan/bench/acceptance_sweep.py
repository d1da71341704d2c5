"""A whole sweep's speculative-decoding acceptance, pooled from its levels'
(:func:`~tokenplan.bench.acceptance.level_acceptance`), and what its reader should know about it."""

from __future__ import annotations

from collections.abc import Sequence

from tokenplan.bench.acceptance import CONTEXT_BUCKETS, bucket_head, verify_totals


def sweep_acceptance(levels: Sequence[dict]) -> dict | None:
    """The whole sweep's acceptance from its levels' (``level["acceptance"]``): counters pooled
    over levels (Σ accepted / Σ drafts; per position likewise), else the answers' verification
    counts pooled (Σ completion tokens / Σ verification steps, per context bucket too), else the
    mean of the levels' gauge τ. None when no level measured any.

    Returns ``{"tau", "source", "per_position", "context_buckets", "levels"}`` (``levels``: how
    many levels measured it; buckets as in :func:`request_acceptance`, pooled)."""
    accs = [lv["acceptance"] for lv in levels if lv.get("acceptance")]
    if not accs:
        return None
    counted = [a["server"] for a in accs if a.get("server") and a["server"]["source"] == "counters"]
    per_pos: list[float] = []
    if counted and len(counted) == len(accs):
        drafts = sum(s["drafts"] for s in counted)
        tau, source = 1.0 + sum(s["accepted_tokens"] for s in counted) / drafts, "server counters"
        if len({len(s["per_position"]) for s in counted}) == 1:
            per_pos = [
                sum(s["per_position"][i] * s["drafts"] for s in counted) / drafts
                for i in range(len(counted[0]["per_position"]))
            ]
    elif all(a.get("requests") for a in accs):
        tau = verify_totals(
            [(r["requests"], r["completion_tokens"], r["verify_steps"]) for r in (a["requests"] for a in accs)]
        )["tau"]
        source = "requests"
    else:
        tau, source = sum(a["tau"] for a in accs) / len(accs), "level mean"
    return {
        "tau": tau,
        "source": source,
        "per_position": per_pos,
        "context_buckets": _pooled_buckets([a["requests"] for a in accs if a.get("requests")]),
        "levels": len(accs),
    }


def _pooled_buckets(parts: Sequence[dict]) -> list[dict]:
    """The context buckets of several :func:`request_acceptance` dicts pooled: requests summed,
    means weighted by requests, τ = Σ tokens / Σ verification steps."""
    out = []
    for name, lo, hi in CONTEXT_BUCKETS:
        same = [b for p in parts for b in p["context_buckets"] if b["bucket"] == name]
        if not same:
            continue
        n = sum(b["requests"] for b in same)
        out.append(
            {
                **bucket_head(name, lo, hi),
                **verify_totals([(b["requests"], b["completion_tokens"], b["verify_steps"]) for b in same]),
                **{
                    key: sum(b[key] * b["requests"] for b in same) / n
                    for key in ("mean_context_tokens", "mean_decode_context_tokens")
                },
            }
        )
    return out


def acceptance_notes(levels: Sequence[dict]) -> list[str]:
    """What the reader of a sweep's acceptance should know: τ that came from a gauge (no
    per-position figures), and τ without context buckets (no per-request counts)."""
    accs = [lv["acceptance"] for lv in levels if lv.get("acceptance")]
    notes = []
    if any(a["source"] == "server gauge" for a in accs):
        notes.append(
            "τ from the server's acceptance-length gauge (the mean of its readings during each level; "
            "SGLang's covers its last logging interval): no per-position figures"
        )
    if accs and not any(a.get("requests") for a in accs):
        notes.append(
            "the answers carried no verification counts (meta_info.spec_verify_ct), so τ has no context "
            "buckets: each level's τ belongs to its mean decode context (context_tokens); SGLang returns "
            "them on whole answers only: rerun with --no-stream"
        )
    return notes
