"""files/calibration.py reads a profile once: its factors and its ``fitted_on`` record, which
``api`` uses for the range warnings instead of reading the JSON again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.api.resolve import read_profile
from tokenplan.errors import ConfigError
from tokenplan.files.calibration import read_calibration, read_calibration_file

FITTED = {
    "engine": "vllm",
    "gpu": "h100-sxm",
    "model": "llama-3.1-8b",
    "source": "bench.json",
    "levels": 3,
    "concurrency_min": 1.0,
    "concurrency_max": 8.0,
}


def _profile(tmp_path: Path, **extra: object) -> str:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"default": {"hbm_fraction": 0.8}, "provenance": "test", **extra}), encoding="utf-8")
    return str(path)


def test_the_fitted_on_record_comes_with_the_table(tmp_path: Path) -> None:
    read = read_calibration_file(_profile(tmp_path, fitted_on=FITTED))
    assert read.fitted_on == FITTED
    assert read.table.default.hbm_fraction == 0.8
    assert read_calibration(_profile(tmp_path)).default.hbm_fraction == 0.8


def test_a_profile_without_fitted_on_gives_no_range_warning(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    assert read_calibration_file(path).fitted_on is None
    assert read_profile(path).range_warnings({"engine": "sglang", "concurrency": 1000.0}) == []


def test_range_warnings_use_the_read_record(tmp_path: Path) -> None:
    path = _profile(tmp_path, fitted_on=FITTED)
    # engine differs (vllm vs sglang); concurrency 100 > 2 × the fitted maximum 8 = 16.
    warnings = read_profile(path).range_warnings({"engine": "sglang", "gpu": "h100-sxm", "concurrency": 100.0})
    assert warnings == [
        "calibration profile was fitted on engine vllm, used here for sglang",
        "concurrency 100 is far outside the calibration profile's fitted range 1–8: its factors are extrapolated",
    ]


def _update(tmp_path: Path, groups: dict) -> str:
    path = tmp_path / "update.json"
    path.write_text(json.dumps({"layered_on": "shipped", "groups": groups, "fitted_on": FITTED}), encoding="utf-8")
    return str(path)


def test_an_update_says_where_it_does_not_apply_rather_than_that_it_is_extrapolated(tmp_path: Path) -> None:
    # A profile fitted on vLLM on an H100 moves vllm/hopper only. On a B200 (vllm/blackwell) the
    # figures are the shipped fit's, so "fitted on gpu h100-sxm, used here for b200 … extrapolated"
    # (what was said) misleads: one warning names what it moves and that these are the shipped fit's.
    path = _update(tmp_path, {"vllm/hopper": {"step_overhead_s": 0.004}})
    b200 = {"engine": "vllm", "gpu": "b200", "architecture": "blackwell", "model": "llama-3.1-8b", "concurrency": 4.0}
    assert read_profile(path).range_warnings(b200) == [
        f"calibration profile {path} moves vllm/hopper, not vllm on b200 (vllm/blackwell): these figures are the shipped fit's"
    ]
    # on SGLang on the H100 too (another engine's group); on vLLM on the H100 it applies: no warning
    sglang = {**b200, "engine": "sglang", "gpu": "h100-sxm", "architecture": "hopper"}
    assert "moves vllm/hopper, not sglang on h100-sxm (sglang/hopper)" in read_profile(path).range_warnings(sglang)[0]
    assert read_profile(path).range_warnings({**b200, "gpu": "h100-sxm", "architecture": "hopper"}) == []
    # a bare engine group reaches every architecture of that engine: the fitted-on check runs
    engine_wide = _update(tmp_path, {"vllm": {"step_overhead_s": 0.004}})
    assert read_profile(engine_wide).range_warnings(b200) == [
        "calibration profile was fitted on gpu h100-sxm, used here for b200"
    ]
    # a group with no factor moves nothing (an update that kept the shipped fit)
    kept = _update(tmp_path, {"vllm/hopper": {}})
    assert "moves no factor, not vllm on b200" in read_profile(kept).range_warnings(b200)[0]


def test_a_malformed_profile_is_one_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_profile(str(path)).range_warnings({})


def test_an_empty_profile_is_refused_rather_than_read_as_the_defaults(tmp_path: Path) -> None:
    # {} parsed to the built-in defaults and moved the default plan from 0.55 to 0.39 days unannounced
    path = tmp_path / "empty.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match="default: required key is missing"):
        read_calibration_file(str(path))


# newuser finding 6: hbm_fraction 1e-300 planned 0 tok/s over 300-digit days, and 1e9 doubled the
# throughput, both with exit 0. A factor is read within its physical range (PROFILE_BOUNDS: the
# fit's EFFICIENCY_BOUNDS, widened to the ideal: fractions up to 1, overheads down to 0).
@pytest.mark.parametrize(
    ("profile", "line"),
    [
        # hbm_fraction: fit bounds 0.3–0.95 (a third of peak for untuned GEMV; a plain copy ~92 %),
        # read up to 1.0, the datasheet bandwidth itself
        (
            {"default": {"hbm_fraction": 1e-300}},
            "default.hbm_fraction: 1e-300 is not allowed (allowed: a number from 0.3 to 1)",
        ),
        (
            {"default": {"hbm_fraction": 1e9}},
            "default.hbm_fraction: 1e+09 is not allowed (allowed: a number from 0.3 to 1)",
        ),
        # step_overhead_s: at most 50 ms (ten batch-1 decode steps of an 8B model on an H100)
        (
            {"layered_on": "shipped", "groups": {"sglang/hopper": {"step_overhead_s": 5}}},
            "groups.sglang/hopper.step_overhead_s: 5 is not allowed (allowed: a number from 0 to 0.05)",
        ),
        # kernel factors: ±30 % around the measured kernels' median
        (
            {"groups": {"vllm": {"gemm_kernel_factor": 0.5}}},
            "groups.vllm.gemm_kernel_factor: 0.5 is not allowed (allowed: a number from 0.7 to 1.3)",
        ),
        # a non-number names its key and value (it said "default: every factor must be a number")
        (
            {"default": {"comm_fraction": "fast"}},
            "default.comm_fraction: 'fast' is not allowed (allowed: a number from 0.05 to 1)",
        ),
    ],
)
def test_a_factor_outside_its_physical_range_is_one_line(tmp_path: Path, profile: dict, line: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_calibration_file(str(path))
    assert str(info.value) == f"{path}: {line}"


def test_the_ideal_and_the_bounds_themselves_are_read(tmp_path: Path) -> None:
    # every inefficiency off (a roofline) and a fit that ended on its bounds are both profiles
    path = tmp_path / "p.json"
    ideal = {"hbm_fraction": 1.0, "step_overhead_s": 0.0, "prefill_wave_fraction": 0.0}
    on_bounds = {"hbm_fraction": 0.95 * (1 + 1e-9), "gemm_kernel_factor": 0.7, "ttft_overhead_s": 0.2}
    path.write_text(json.dumps({"default": ideal, "groups": {"sglang": on_bounds}}), encoding="utf-8")
    table = read_calibration_file(str(path)).table
    assert table.default.hbm_fraction == 1.0 and table.by_group["sglang"].ttft_overhead_s == 0.2


@pytest.mark.parametrize("group", ["nonsense/group", "sglang/h100", "tgi"])
def test_a_group_no_plan_looks_up_is_refused(tmp_path: Path, group: str) -> None:
    # newuser finding 13: groups: {"nonsense/group": …} was read and silently never used
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"layered_on": "shipped", "groups": {group: {"hbm_fraction": 0.8}}}), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_calibration_file(str(path))
    assert str(info.value).startswith(f"{path}: groups.{group}: not a group a plan looks up (allowed: ENGINE or ")
    assert "sglang, trtllm, vllm" in str(info.value) and "hopper" in str(info.value)
    full = tmp_path / "full.json"
    full.write_text(json.dumps({"default": {}, "groups": {group: {}}}), encoding="utf-8")
    with pytest.raises(ConfigError, match="not a group a plan looks up"):
        read_calibration_file(str(full))


def test_a_profile_may_state_schema_version_1(tmp_path: Path) -> None:
    # newuser finding 14: a profile carrying schema_version, as every other file does, was refused
    # as an "unknown key"; 1 reads, another version is refused by name
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "default": {"hbm_fraction": 0.8}}), encoding="utf-8")
    assert read_calibration_file(str(path)).table.default.hbm_fraction == 0.8
    path.write_text(json.dumps({"schema_version": 2, "layered_on": "shipped", "groups": {}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"schema_version: 2 is not allowed"):
        read_calibration_file(str(path))


def test_a_profile_that_did_not_reproduce_its_own_measurements_says_so_where_it_is_used(tmp_path: Path) -> None:
    # calibrate wrote this profile with a warning (median |pred/meas − 1| = 2.36: it predicts
    # 3.36× the measured tok/s) and predict then showed its figures with the usual ±20 % band and
    # no word. 2.36 > POOR_FIT 0.5 → one warning, "236 %"; 0.5 itself (not above) → none.
    poor = _update(tmp_path, {"vllm/hopper": {"step_overhead_s": 0.004}})
    data = json.loads(Path(poor).read_text())
    data["fitted_on"] = {**FITTED, "median_abs_error": 2.36}
    Path(poor).write_text(json.dumps(data))
    h100 = {"engine": "vllm", "gpu": "h100-sxm", "architecture": "hopper", "model": "llama-3.1-8b", "concurrency": 4.0}
    (warning,) = read_profile(poor).range_warnings(h100)
    assert warning.startswith("the calibration profile reproduces the measurements it was fitted on poorly")
    assert "output tok/s per GPU 236 %" in warning
    data["fitted_on"]["median_abs_error"] = 0.5
    Path(poor).write_text(json.dumps(data))
    assert read_profile(poor).range_warnings(h100) == []


def test_a_fitted_on_record_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    # fitted_on "x" was read as no record at all: the profile then gave no warning on another
    # model, GPU or engine. One line names the key, the value and what is allowed.
    for make in (lambda: _profile(tmp_path, fitted_on="x"), lambda: _update_with(tmp_path, fitted_on=["x"])):
        with pytest.raises(ConfigError, match=r"fitted_on: .* is not allowed \(allowed: an object"):
            read_calibration_file(make())


def _update_with(tmp_path: Path, **extra: object) -> str:
    path = tmp_path / "update2.json"
    path.write_text(json.dumps({"layered_on": "shipped", "groups": {"vllm/hopper": {}}, **extra}), encoding="utf-8")
    return str(path)
