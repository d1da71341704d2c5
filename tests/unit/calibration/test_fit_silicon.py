"""calibrate: the silicon level (``*/architecture``) carries what a chip does to every engine."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from tokenplan.api.resolve import resolve_case
from tokenplan.calibration.fit import FitOptions, fit
from tokenplan.calibration.levels import efficiency_for, parameters, table_from_values
from tokenplan.calibration.validate import Case, predict_case
from tokenplan.measurement import Measurement
from tokenplan.perf.efficiency import Efficiency


def _case(line: int, engine: str, gpu: str, conc: int) -> Case:
    # two models, alternating by line: a factor is fitted only where rows of two models inform it
    m = Measurement(
        line,
        str(line),
        engine,
        "llama-3.1-8b" if line % 2 else "qwen3-8b",
        gpu,
        1,
        1,
        1,
        1,
        False,
        "bf16",
        "auto",
        512.0,
        1024.0,
        float(conc),
        output_tok_s_per_gpu=1.0,
    )
    case = resolve_case(m)
    assert isinstance(case, Case)
    return case


def test_the_ratio_scales_the_engine_value_and_a_fitted_group_overrides_it():
    values = {
        ("default", "hbm_fraction"): 0.80,
        ("vllm", "hbm_fraction"): 0.76,
        ("*/cdna3", "hbm_fraction"): 0.5,
        ("sglang/cdna3", "hbm_fraction"): 0.43,
    }
    vllm = _case(2, "vllm", "mi300x", 8)
    sglang = _case(3, "sglang", "mi300x", 8)
    # vLLM on MI300X has no group of its own: its engine value times the chip's ratio, 0.76 × 0.5 = 0.38
    assert efficiency_for(values, vllm, Efficiency()).hbm_fraction == pytest.approx(0.38)
    # SGLang on MI300X has its own group: the group's value stands
    assert efficiency_for(values, sglang, Efficiency()).hbm_fraction == pytest.approx(0.43)
    # a ratio that would leave the factor's bounds is clipped to them: 0.76 × 0.25 = 0.19 → 0.3
    low = dict(values) | {("*/cdna3", "hbm_fraction"): 0.25}
    assert efficiency_for(low, vllm, Efficiency()).hbm_fraction == pytest.approx(0.3)
    # a factor the chip does not set (GEMM kernels are the engine's choice) is not scaled
    assert efficiency_for(values, vllm, Efficiency()).gemm_kernel_factor == Efficiency().gemm_kernel_factor


def test_the_table_gives_an_engine_never_measured_on_a_chip_the_chips_ratio():
    cases = [_case(2, "vllm", "h200", 8), _case(3, "trtllm", "mi300x", 8)]
    values = {("default", "hbm_fraction"): 0.80, ("*/cdna3", "hbm_fraction"): 0.5}
    table = table_from_values(values, cases, Efficiency())
    # vLLM was measured only on H200, yet its MI300X group is 0.80 × 0.5 = 0.40
    assert table.resolve("vllm", "cdna3").hbm_fraction == pytest.approx(0.40)
    assert table.resolve("vllm", "hopper").hbm_fraction == pytest.approx(0.80)


def test_the_silicon_level_is_fitted_only_where_the_chip_has_enough_rows():
    cases = [_case(2 + i, "sglang", "mi300x", 2 ** (i % 6)) for i in range(5)]
    assert not any(level.startswith("*/") for level, _ in parameters(cases, min_rows=6))
    levels = {level for level, _ in parameters(cases, min_rows=5)}
    assert "*/cdna3" in levels


def test_rows_of_one_engine_teach_another_engine_the_chips_bandwidth():
    # Synthetic truth: every engine streams weights at 0.80 of HBM on H200 and at 0.45 on
    # MI300X. SGLang has eight MI300X rows, vLLM only two (too few for a group of its own at
    # min_rows 8). Without a silicon level vLLM on MI300X would keep its H200 value, 0.80;
    # with it, the two rows and SGLang's group both pull the chip's ratio toward 0.45/0.80.
    rng = random.Random(11)
    truth = {"hopper": Efficiency(hbm_fraction=0.80), "cdna3": Efficiency(hbm_fraction=0.45)}
    cases, line = [], 2
    for engine, gpu, n in (("sglang", "h200", 8), ("vllm", "h200", 8), ("sglang", "mi300x", 8), ("vllm", "mi300x", 2)):
        for i in range(n):
            c = _case(line, engine, gpu, 2 ** (i % 8))
            measured = predict_case(c, truth[c.architecture]).output_tok_s_per_gpu * math.exp(rng.gauss(0.0, 0.02))
            cases.append(replace(c, measurement=replace(c.measurement, output_tok_s_per_gpu=measured)))
            line += 1
    result = fit(cases, Efficiency(), FitOptions(min_rows=8, max_nfev=30))
    vllm_mi300x = result.table.resolve("vllm", "cdna3").hbm_fraction
    # The priors shrink the ratio toward 1 (two rows against a prior of width 0.5 in log), so
    # the fit does not reach 0.45; it must at least close more than half of the log distance
    # from the engine's own value: |log(0.80/0.45)| = 0.575, so |log(v/0.45)| < 0.29.
    assert abs(math.log(vllm_mi300x / 0.45)) < 0.5 * math.log(0.80 / 0.45)


def test_a_chip_never_measured_takes_its_vendors_ratio_and_its_own_ratio_wins_where_fitted():
    # MI355X (cdna4) measured, MI300X (cdna3) not: the ROCm stack's ratio (*:amd) stands in
    values = {("default", "hbm_fraction"): 0.80, ("*:amd", "hbm_fraction"): 0.6, ("*/cdna4", "hbm_fraction"): 0.9}
    table = table_from_values(values, [_case(2, "sglang", "mi355x", 8)], Efficiency())
    assert table.resolve("sglang", "cdna3").hbm_fraction == pytest.approx(0.80 * 0.6)  # 0.48
    assert table.resolve("sglang", "cdna4").hbm_fraction == pytest.approx(0.80 * 0.9)  # 0.72
    # an NVIDIA chip takes neither AMD ratio
    assert table.resolve("sglang", "hopper").hbm_fraction == pytest.approx(0.80)


def test_a_catalog_entry_whose_vendor_contradicts_its_architecture_is_refused():
    from pydantic import ValidationError

    from tokenplan.catalog import gpu_entry

    entry = gpu_entry("mi300x").model_dump()
    entry["vendor"] = "nvidia"
    with pytest.raises(ValidationError, match="cdna3 is amd's"):
        type(gpu_entry("mi300x")).model_validate(entry)


def test_the_profile_records_the_fitted_ratios_by_name():
    from tokenplan.calibration.summary import profile_of

    cases = [_case(2 + i, "sglang", "mi300x", 2 ** (i % 6)) for i in range(5)]
    result = fit(cases, Efficiency(), FitOptions(min_rows=5, max_nfev=2))
    ratios = profile_of(result, "test").to_json()["ratios"]
    # five MI300X rows: the cdna3 and amd levels each carry the three silicon factors
    assert set(ratios) == {
        f"{level}.{name}"
        for level in ("*/cdna3", "*:amd")
        for name in ("hbm_fraction", "attention_fraction", "layer_latency_s")
    }
    fitted = {f"{f.level}.{f.name}": f.value for f in result.factors}
    assert all(ratios[k] == fitted[k] for k in ratios)
