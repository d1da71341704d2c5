"""The fast calibration path (prediction memo, skipped budget-spending Jacobian, forked
Jacobian evaluations) against the reference path, and the grouped folds of the error bands."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenplan.api.resolve import resolve_file
from tokenplan.calibration.bands import Residual
from tokenplan.calibration.fit import FitOptions, fit
from tokenplan.calibration.forkmap import ForkMap
from tokenplan.calibration.heldout import FoldResidual, coverage_by_file, grouped_folds
from tokenplan.calibration.memo import PredictionMemo, traced
from tokenplan.calibration.validate import predict_case
from tokenplan.files.measurements import read_measurements
from tokenplan.perf.efficiency import Efficiency

DATA = Path(__file__).resolve().parents[3] / "data" / "ground-truth"


@pytest.fixture(scope="module")
def subset():
    """A few rows of each ground-truth file: throughput-only (dev.csv), serving, and
    InferenceX rows (throughput and latencies, finite jobs: the job timeline runs)."""
    out = []
    for name, stride in (("dev.csv", 9), ("serving-dev.csv", 400), ("inferencex-dev.csv", 120)):
        cases, _ = resolve_file(read_measurements(str(DATA / name)))
        out += cases[::stride]
    return out


# Small groups may leave their parent (min_rows 3), so the engine and engine × architecture
# levels and their sparsity are exercised, not only the default factors.
SMALL = FitOptions(min_rows=3, max_nfev=3)


def _factors(result):
    return [(f.level, f.name, f.value) for f in result.factors]


def test_the_fast_path_gives_the_reference_factors_bit_for_bit(subset):
    slow = fit(subset, options=replace(SMALL, memo=False))
    memo = PredictionMemo()
    fast = fit(subset, options=SMALL, memo=memo)
    assert _factors(fast) == _factors(slow) and fast.cost == slow.cost and fast.nfev == slow.nfev
    # the same Jacobian at the solution, hence the same covariance
    assert [f.uncertainty for f in fast.factors] == pytest.approx([f.uncertainty for f in slow.factors], nan_ok=True)
    assert memo.hits > 0 and memo.misses > 0  # rows were reused, and computed
    forked = fit(subset, options=SMALL, workers=2)  # Jacobian evaluations over a forked child
    assert _factors(forked) == _factors(slow)


def test_a_refit_without_its_last_jacobian_ends_at_the_same_factors(subset):
    full = fit(subset, options=SMALL)
    train = subset[1:]
    reference = fit(train, options=replace(SMALL, max_nfev=2, memo=False), start_x=full.x)
    skipped = fit(train, options=replace(SMALL, max_nfev=2), start_x=full.x, final_jacobian=False)
    assert _factors(skipped) == _factors(reference)
    # no Jacobian at the end: no uncertainty, and the budget is what stopped it
    assert all(math.isnan(f.uncertainty) for f in skipped.factors)
    assert skipped.status == 0 and not skipped.converged and "Jacobian not computed" in skipped.message


def test_the_memo_reuses_a_prediction_only_while_every_factor_read_agrees(subset):
    case = subset[0]
    _, reads = traced(eff := Efficiency())
    predict_case(case, _)
    unread = sorted(set(Efficiency.__dataclass_fields__) - reads)
    assert unread, "the row reads every factor: pick a row that does not"
    memo = PredictionMemo()
    first = memo.predict(case, eff)
    other = replace(eff, **{unread[0]: getattr(eff, unread[0]) * 0.5})
    assert memo.predict(case, other) is first and (memo.hits, memo.misses) == (1, 1)
    # a factor it reads: computed again, and what predict_case gives
    moved = replace(eff, hbm_fraction=eff.hbm_fraction * 0.5)
    assert "hbm_fraction" in reads
    assert memo.predict(case, moved) == predict_case(case, moved) and memo.misses == 2


def test_fork_map_keeps_the_order_and_recomputes_what_a_failed_child_did_not_return():
    parent = os.getpid()
    assert ForkMap(2)(lambda x: x * 2, range(5)) == [0, 2, 4, 6, 8]

    def dies_in_a_child(x):
        if os.getpid() != parent:
            os._exit(3)
        return x + 1

    assert ForkMap(3)(dies_in_a_child, range(7)) == [1, 2, 3, 4, 5, 6, 7]


def _case(model: str, gpu: str, engine: str = "sglang"):
    return SimpleNamespace(measurement=SimpleNamespace(model=model, gpu=gpu), engine=engine)


def test_grouped_folds_keep_each_configuration_whole_and_balance_rows():
    # Configurations A (5 rows), B (3), C (3), D (1), largest first, each into the fold with the
    # fewest rows: A → 0 (5, 0); B → 1 (5, 3); C → 1 (5, 6); D → 0 (6, 6).
    rows = [_case("a", "h100")] * 5 + [_case("b", "h100")] * 3 + [_case("a", "b200")] * 3 + [_case("a", "h100", "vllm")]
    assert grouped_folds(rows, 2) == [0] * 5 + [1] * 3 + [1] * 3 + [0]


def test_coverage_per_file_and_quantity_uses_the_other_folds():
    # Fold 0 and 1: 20 residuals at 0 each from dev.csv (throughput); fold 2: 20 at 1.0 from
    # serving-dev.csv (tpot). Fold 2's band from folds 0–1 is [0, 0]: none inside. For folds 0
    # and 1, the others hold 20 zeros and 20 ones: k = ⌈41·0.9⌉ = 37 → [4th, 37th] = [0, 1]: all in.
    def r(x: float, quantity: str, source: str) -> Residual:
        return Residual("sglang", "hopper", "llama-3.1", "h100-sxm", 4.0, "rate", x, "none", quantity, source)

    held = (
        [FoldResidual(0, r(0.0, "throughput", "dev.csv"))] * 20
        + [FoldResidual(1, r(0.0, "throughput", "dev.csv"))] * 20
        + [FoldResidual(2, r(1.0, "tpot", "serving-dev.csv"))] * 20
    )
    assert coverage_by_file(held) == {"dev.csv": {"throughput": 1.0}, "serving-dev.csv": {"tpot": 0.0}}


HEADER = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,"
    "concurrency,num_requests,spec_decode,output_tok_s_per_gpu,derived,trust,source_url\n"
)


def test_calibrate_with_bands_reports_coverage_per_file_and_quantity(tmp_path):
    from tokenplan.api.calibrate import calibrate

    # three configurations (model × GPU × engine), two rows each, of two models (a refit whose
    # rows identify no factor, those of one model, is refused: api.calibrate.calibrate)
    rows = [
        ("trtllm", "llama-3.1-8b", "h100-sxm", 8, 900),
        ("trtllm", "llama-3.1-8b", "h100-sxm", 64, 4000),
        ("trtllm", "qwen3-8b", "h200", 8, 1000),
        ("trtllm", "qwen3-8b", "h200", 64, 4600),
        ("vllm", "llama-3.1-8b", "h100-sxm", 8, 800),
        ("vllm", "llama-3.1-8b", "h100-sxm", 64, 3500),
    ]
    f = tmp_path / "m.csv"
    f.write_text(
        HEADER
        + "".join(
            f"r{i},{e},{m},{g},1,1,1,1,1,false,bf16,bf16,128,256,{c},,none,{v},,high,x\n"
            for i, (e, m, g, c, v) in enumerate(rows)
        )
    )
    result = calibrate([str(f)], bands=True, workers=2)
    table = result.bands
    assert set(table.coverage_by_file) == {"m.csv"} and set(table.coverage_by_file["m.csv"]) == {"throughput"}
    assert "whole configurations" in table.provenance
    # every row predicted once by a fold that held out its configuration: 6 rate residuals
    assert table.bands["rate"]["all"].n == 6


def test_configuration_band_weighs_each_configuration_as_one():
    from tokenplan.calibration.bands import Band, configuration_band, conformal_band

    # 19 configurations of one residual each (0, 1, …, 18) and one, "a", of ten at 100: K = 20,
    # each single residual weighs 1 and each of a's 0.1. Tails at t = RATE_TAIL = 0.92: the high
    # bound is the first residual whose cumulative weight reaches 0.92·20 = 18.4 → 18 (the 19th
    # single); the low one reaches 0.08·20 = 1.6 → 1 (the 2nd).
    values = [float(i) for i in range(19)] + [100.0] * 10
    configurations = [f"c{i}" for i in range(19)] + ["a"] * 10
    assert configuration_band(values, configurations) == Band(1.0, 18.0, 29)
    # unweighted, a's ten rows set the top: n = 29, k = ⌈30·0.9⌉ = 27 → the 27th smallest is 100
    assert conformal_band(values).high_q == 100.0


def test_a_regime_of_few_configurations_pools_up():
    from tokenplan.calibration.bands import quantile_bands

    # 25 residuals of one fine regime from 3 configurations: enough points (20) but fewer than 5
    # configurations, so only the levels that are no more specific than "all" get a band.
    rs = [
        Residual(
            "sglang",
            "hopper",
            "llama-3.1",
            "h100-sxm",
            4.0,
            "rate",
            0.01 * i,
            "none",
            "throughput",
            "f.csv",
            f"m{i % 3}/h100-sxm/sglang",
        )
        for i in range(25)
    ]
    assert list(quantile_bands(rs)["rate"]) == ["all"]
