"""calibrate (issue 28): at most 60 fitted factors, each informed by rows of at least two models,
every GEMM kernel factor within 0.7–1.3, one kernel factor per number format, and a format no
fit row ran flagged outside the measured regime."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from tokenplan.api.calibrate import read_cases
from tokenplan.api.resolve import resolve_case
from tokenplan.calibration.bands import Band, BandTable, interval, outside_reason
from tokenplan.calibration.fit import FitOptions
from tokenplan.calibration.levels import MIN_MODELS, informing_models, parameters
from tokenplan.calibration.refit import SERVING_FIT_STRIDE, subsample
from tokenplan.calibration.validate import Case
from tokenplan.catalog import load_gpu
from tokenplan.measurement import Measurement
from tokenplan.perf.efficiency import EFFICIENCY_BOUNDS, GEMM_KERNEL_FACTORS, Efficiency, kernel_factor
from tokenplan.perf.gemm import gemm_fraction_at

FILES = ["data/ground-truth/dev.csv", "data/ground-truth/serving-dev.csv", "data/ground-truth/inferencex-dev.csv"]
MAX_FACTORS = 60  # issue 28, "Done when"


@pytest.fixture(scope="module")
def fit_cases() -> list[Case]:
    files_, _ = read_cases(FILES)
    return subsample(files_, SERVING_FIT_STRIDE)  # the rows the shipped refit fits on


def test_every_fitted_factor_is_listed_with_the_models_that_inform_it(fit_cases: list[Case]) -> None:
    options = FitOptions()
    params = parameters(fit_cases, options.min_rows, options.held)
    support = informing_models(fit_cases)
    listing = {f"{level}.{name}": sorted(support[(level, name)][0]) for level, name in params}
    print("\n".join(f"{k}: {len(v)} models: {', '.join(v)}" for k, v in listing.items()))  # the list (pytest -s)
    assert len(params) <= MAX_FACTORS
    assert {k: v for k, v in listing.items() if len(v) < MIN_MODELS} == {}
    assert all(support[p][1] >= options.min_rows for p in params if p[0] != "default")
    # No engine × architecture factor: SGLang on MI300X (issue 28: eight factors on DeepSeek-R1
    # rows alone) has none of its own ...
    assert not any("/" in level and not level.startswith("*") for level, _ in params)
    # ... and the MI300X silicon ratios rest on two models: SGLang's DeepSeek-R1 rows of
    # inferencex-dev.csv and vLLM's MiniMax-M3 rows on MI300X of dev.csv (ids 98 and 100).
    assert listing["*/cdna3.hbm_fraction"] == ["deepseek-r1", "minimax-m3"]
    # One kernel factor per number format per engine where two models' rows run it: TRT-LLM runs
    # FP4 for DeepSeek-R1 and Llama-3.3-70B among others (dev.csv ids 1-11, NVFP4 on B200).
    assert {"deepseek-r1", "llama-3.3-70b"} <= set(listing["trtllm.fp4_kernel_factor"])


def _case(line: int, model: str, engine: str = "vllm") -> Case:
    m = Measurement(
        line, str(line), engine, model, "h200", 1, 1, 1, 1, False, "bf16", "auto", 512.0, 1024.0, 8.0,
        output_tok_s_per_gpu=1.0,
    )  # fmt: skip
    case = resolve_case(m)
    assert isinstance(case, Case)
    return case


def test_a_factor_is_fitted_only_where_two_models_inform_it() -> None:
    one_model = [_case(i, "llama-3.1-8b") for i in range(4)]
    assert parameters(one_model, min_rows=2) == []  # nothing, not even the default level
    two_models = one_model + [_case(10 + i, "qwen3-8b") for i in range(4)]
    params = parameters(two_models, min_rows=2)
    assert ("vllm", "gemm_kernel_factor") in params  # 8 BF16 rows of two models on H200's BF16 curve
    assert ("vllm", "fp8_kernel_factor") not in params  # no row runs FP8
    assert ("default", "moe_kernel_factor") not in params  # both models are dense


def test_every_gemm_kernel_factor_is_bounded_to_0_7_to_1_3() -> None:
    assert {name: EFFICIENCY_BOUNDS[name] for name in GEMM_KERNEL_FACTORS} == dict.fromkeys(
        GEMM_KERNEL_FACTORS, (0.7, 1.3)
    )
    shipped = json.loads(files("tokenplan.catalog").joinpath("efficiency.json").read_text(encoding="utf-8"))
    for group, factors in {"default": shipped["default"], **shipped["groups"]}.items():
        for name in GEMM_KERNEL_FACTORS:
            assert 0.7 - 1e-9 <= factors.get(name, 1.0) <= 1.3 + 1e-9, (group, name, factors.get(name))


def test_each_number_format_reads_its_own_kernel_factor() -> None:
    eff = Efficiency(gemm_kernel_factor=0.9, fp8_kernel_factor=0.8, fp4_kernel_factor=0.75)
    assert [kernel_factor(eff, f) for f in ("bf16", "fp8_block", "fp8_tensor", "fp4")] == [0.9, 0.8, 0.8, 0.75]
    b200 = load_gpu("b200")
    fp4 = next(c for c in b200.gemm_curves if c.fmt == "fp4")
    # the same curve point, scaled by the FP4 factor only: 0.75 × the tables' own fraction
    assert gemm_fraction_at(fp4, eff, 2048.0, True) == pytest.approx(
        0.75 * gemm_fraction_at(fp4, Efficiency(), 2048.0, True)
    )


def test_an_engine_and_format_no_fit_row_ran_is_outside_the_measured_regime() -> None:
    table = BandTable(
        0.8,
        {"rate": {"all": Band(-0.1, 0.1, 100)}},
        extrapolation={"rate": Band(-0.3, 0.25, 50)},
        max_batch={"sglang/blackwell": 512.0},
        gpus=("b200",),
        formats=("sglang/blackwell/fp8", "sglang/hopper/fp4"),
    )
    assert outside_reason(table, "sglang", "blackwell", "b200", 64.0, "fp8") is None
    reason = outside_reason(table, "sglang", "blackwell", "b200", 64.0, "fp4")
    assert reason == "no fit row runs sglang on blackwell with fp4 weights"
    inside = interval(table, 1000.0, "rate", False, "sglang", "blackwell", "-", "b200", 64.0, weight_format="fp8")
    wide = interval(table, 1000.0, "rate", False, "sglang", "blackwell", "-", "b200", 64.0, weight_format="fp4")
    assert inside is not None and wide is not None and wide.outside == reason
    # regime band: 1000·e^(−0.1) … 1000·e^(0.1) = 904.8 … 1105.2; widened to the leave-one-GPU-out
    # band's wider tails: 1000·e^(−0.25) … 1000·e^(0.3) = 778.8 … 1349.9
    assert (inside.low, inside.high) == pytest.approx((904.84, 1105.17), abs=0.01)
    assert (wide.low, wide.high) == pytest.approx((778.80, 1349.86), abs=0.01)
