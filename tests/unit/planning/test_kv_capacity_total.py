"""A plan option's ``kv_capacity_tokens`` is over all its replicas, as ``predict``'s is (a
break-it pass found the same key per replica in ``plan --json`` and over all replicas in
``predict --json``)."""

from __future__ import annotations

import pytest

from tokenplan.api.plan import PlanRequest, plan


def test_eight_replicas_hold_eight_times_one_replicas_kv_tokens():
    # TP1 fixed, no speculation: 8× B200 runs TP1×DP8, 1× B200 runs TP1×DP1, the same replica (the
    # same formats, cap and batch), so the option's KV tokens are 8 × the single GPU's
    one = plan(PlanRequest(gpus=("1xb200",), tp=1, specs=("none",))).to_json()["options"][0]
    eight = plan(PlanRequest(gpus=("8xb200",), tp=1, specs=("none",))).to_json()["options"][0]
    assert (one["layout"], eight["layout"]) == ("TP1", "TP1×DP8")
    assert one["best"].split(" ", 1)[1] == eight["best"].split(" ", 1)[1]  # same formats and cap
    assert one["batch_per_replica"] == eight["batch_per_replica"]
    assert eight["kv_capacity_tokens"] == pytest.approx(8 * one["kv_capacity_tokens"], rel=1e-12)
