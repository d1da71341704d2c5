"""api/resolve.py: a request becomes one frozen Scenario — every name looked up once, the
calibration profile parsed once — and ``predict`` and ``plan`` start from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import tokenplan.files.calibration as calibration_file
from tokenplan.api.resolve import PredictRequest, resolve

# An update of the shipped fit that moves one factor of one group (the shape calibrate writes).
UPDATE = {
    "layered_on": "shipped",
    "groups": {"vllm/hopper": {"hbm_fraction": 0.7}},
    "provenance": "test update",
}


def _profile(tmp_path: Path) -> str:
    path = tmp_path / "update.json"
    path.write_text(json.dumps(UPDATE), encoding="utf-8")
    return str(path)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every parse of a calibration profile, wherever it is asked for."""
    seen: list[str] = []
    real = calibration_file.read_calibration_file

    def counted(path: str) -> calibration_file.CalibrationFile:
        seen.append(path)
        return real(path)

    # resolve imports it from files.calibration when a profile is named (not on plan's start-up path)
    monkeypatch.setattr(calibration_file, "read_calibration_file", counted)
    return seen


def test_the_scenario_holds_the_profiles_factors_for_its_engine_and_architecture(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    vllm = resolve(PredictRequest("llama-3.1-8b", "h100-sxm", engine="vllm", calibration=path))
    # the profile's own value for vllm on Hopper (the H100's architecture), not the shipped one
    assert vllm.gpu.architecture == "hopper" and vllm.efficiency.hbm_fraction == 0.7
    assert vllm.profile.path == path and vllm.profile.moves  # one line says what the profile moves
    sglang = resolve(PredictRequest("llama-3.1-8b", "h100-sxm", engine="sglang", calibration=path))
    shipped = resolve(PredictRequest("llama-3.1-8b", "h100-sxm", engine="sglang"))
    assert sglang.efficiency == shipped.efficiency  # a group the profile does not name stays shipped
    assert shipped.profile.moves == ()


def test_the_scenario_is_frozen_and_its_concurrency_is_per_replica() -> None:
    s = resolve(PredictRequest("llama-3.1-8b", "h100-sxm", num_gpus=8, tp=2, concurrency=64))
    # 8 GPUs in TP2 groups: DP = 8 / 2 = 4 replicas; 64 requests in flight / 4 = 16 per replica
    assert s.config.layout.dp == 4 and s.concurrency == 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.concurrency = 1.0  # type: ignore[misc]


def test_predict_parses_the_profile_once(tmp_path: Path, reads: list[str]) -> None:
    from tokenplan.api.predict import predict

    path = _profile(tmp_path)
    predict(PredictRequest("llama-3.1-8b", "h100-sxm", engine="vllm", concurrency=8, calibration=path))
    assert reads == [path]


def test_plan_parses_the_profile_once_even_when_it_plans_again_for_current(tmp_path: Path, reads: list[str]) -> None:
    from tokenplan.api.plan import PlanRequest, plan

    path = _profile(tmp_path)
    req = PlanRequest(
        gpus=("8xb200",),
        specs=("none", "mtp:3"),
        calibration=path,
        current="engine=sglang,tp=2,spec=mtp:3",
        measured_tok_s=12_000,  # below the prediction, above what tau = 1 gives: it implies an acceptance
    )
    result = plan(req)
    # the measurement implies an acceptance, so the whole plan was searched again at it
    assert result.current is not None and result.current.implied_tau is not None
    assert any("acceptance your measurement implies" in line for line in result.answer)
    assert reads == [path]


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        # through the Python API a non-text version was a raw TypeError in the version parser
        ("engine_version", 13, "text naming the engine release"),
        # True is an int to Python, not an interval
        ("scheduler_recv_interval", True, "a whole number of iterations ≥ 1"),
    ],
)
def test_a_bad_engine_version_or_recv_interval_is_one_input_error(field: str, value: object, allowed: str) -> None:
    from tokenplan.errors import InputError

    with pytest.raises(InputError) as caught:
        resolve(PredictRequest(model="llama-3.1-8b", gpu="h200", **{field: value}))
    assert str(caught.value).startswith(f"{field} {value} is not allowed")
    assert allowed in str(caught.value)
