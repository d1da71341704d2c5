"""``predict`` costs TP across scale-up domains (its all-reduces over the scale-out NIC,
perf/comm.py ``group_link``) that ``plan`` does not search; it says so (newuser finding 9: TP32 on
H100s was predicted with no word that plan refuses it)."""

from __future__ import annotations

from tokenplan.api.predict import predict
from tokenplan.api.resolve import PredictRequest


def _warnings(tp: int) -> list[str]:
    result = predict(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", tp=tp, num_gpus=tp))
    return [w for w in result.warnings if "scale-up domain" in w]


def test_tp_beyond_one_nvlink_domain_is_predicted_with_a_warning():
    # an HGX H100 domain holds 8 GPUs: TP32 spans 32 / 8 = 4 of them, TP16 2
    assert _warnings(32) == [
        "TP32 spans 4 scale-up domains (8 GPUs on NVLink 4): its all-reduces cross the scale-out NIC, and plan "
        "does not search such layouts (PP or DP across domains)"
    ]
    assert _warnings(16)[0].startswith("TP16 spans 2 scale-up domains")


def test_tp_within_the_domain_has_no_such_warning():
    assert _warnings(8) == []
