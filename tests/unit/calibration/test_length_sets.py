"""Rows that name their prompt set (``length_distribution`` = ``sharegpt``) run with that set's lengths."""

from __future__ import annotations

import math

import pytest
from tests.support.our_numbers import EFF, ours

from tokenplan.api.resolve import resolve_case
from tokenplan.catalog.length_sets import length_set, length_set_names
from tokenplan.files.measurements import read_measurements
from tokenplan.job.timeline import job_time
from tokenplan.job.workload import LengthDist, fixed, set_lengths
from tokenplan.measurement import SkippedRow
from tokenplan.perf.step import step_time

HEADER = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,concurrency,"
    "num_requests,spec_decode,output_tok_s_per_gpu,derived,trust,source_url,length_distribution,notes\n"
)
ROW = (
    "{id},vllm,llama-3.1-8b,h100-sxm,1,1,1,1,1,false,bf16,bf16,217,201,1000,1000,none,1131.5,,medium,x,{dist},{notes}\n"
)


def _read(tmp_path, *dists: str, notes: str = ""):
    path = tmp_path / "dev.csv"
    path.write_text(HEADER + "".join(ROW.format(id=i, dist=d, notes=notes) for i, d in enumerate(dists)))
    return read_measurements(str(path)).rows


def test_the_length_distribution_column_gives_the_rows_length_set(tmp_path):
    rows = _read(tmp_path, "sharegpt", "ShareGPT", "uniform:0.8", "fixed", "")
    assert [r.length_set for r in rows] == ["sharegpt", "sharegpt", None, None, None]
    assert [r.length_low_fraction for r in rows] == [None, None, 0.8, None, None]


def test_notes_no_longer_carry_the_length_distribution(tmp_path):
    # issue 28 point 6: a benchmark command in the free-text notes is documentation, not data
    (row,) = _read(tmp_path, "", notes='"vllm bench serve --dataset-name sharegpt; random U[0.8L,L]"')
    assert (row.length_set, row.length_low_fraction) == (None, None)


def test_a_length_distribution_that_is_none_of_the_forms_is_a_one_line_skip(tmp_path):
    path = tmp_path / "dev.csv"
    path.write_text(HEADER + ROW.format(id="u", dist="uniform:1.5", notes="") + ROW.format(id="n", dist="5%", notes=""))
    data = read_measurements(str(path))
    assert data.rows == ()
    assert [s.reason for s in data.skipped] == [
        "malformed: column length_distribution value 'uniform:1.5' is not one of fixed, uniform:F (0 < F < 1, "
        "lengths drawn from [F·L, L]) or a prompt set's name such as sharegpt (or blank)",
        "malformed: column length_distribution value '5%' is not one of fixed, uniform:F (0 < F < 1, "
        "lengths drawn from [F·L, L]) or a prompt set's name such as sharegpt (or blank)",
    ]


def test_a_sharegpt_row_keeps_its_mean_and_spreads_as_sharegpt(tmp_path):
    (row,) = _read(tmp_path, "sharegpt")
    case = resolve_case(row)
    # The row's means stay the means (the capped mean is solved for); the catalog gives σ and caps.
    assert case.isl.mean == pytest.approx(217, rel=1e-6) and case.osl.mean == pytest.approx(201, rel=1e-6)
    assert (case.isl.sigma, case.isl.cap_tokens) == (1.586, 1024)
    assert (case.osl.sigma, case.osl.cap_tokens) == (0.661, 2044)
    # Running mean output ≈ E[L]·exp(σ²) = 201 × e^0.4369 = 201 × 1.5480 = 311.2 (the cap at
    # 2,044 = 12.6 × the median 201/e^0.2185 = 161.6 trims almost nothing: z = ln 12.65 / 0.661 = 3.84).
    assert case.osl.running_mean == pytest.approx(311.2, rel=5e-3)


def test_an_unknown_set_skips_its_row_naming_the_known_ones(tmp_path):
    # a set whose lengths the catalog does not know (catalog/length_sets.yaml holds sharegpt) is not
    # fixed lengths: read as such it would move the row's prediction with no word (new-user pass)
    (row,) = _read(tmp_path, "sonnet")
    assert length_set("sonnet") is None
    skipped = resolve_case(row)
    assert isinstance(skipped, SkippedRow)
    assert skipped.reason == ("length_distribution 'sonnet' is not fixed, uniform:F or a known prompt set (sharegpt)")


def test_a_mean_at_the_cap_keeps_fixed_lengths():
    assert set_lengths(2044, 0.661, 2044) == LengthDist(2044)


def test_sharegpt_sigma_is_the_one_of_the_cited_mean_and_median():
    # catalog/length_sets.yaml cites, after vLLM's ShareGPT filter (prompt ≤ 1,024, prompt +
    # output ≤ 2,048, both ≥ 4), prompt mean 119.58 / median 34 and answer mean 348.41 / median
    # 280. A lognormal has mean = median·exp(σ²/2), so σ = √(2 ln(mean/median)):
    #   prompt: ln(119.58/34) = ln 3.51706 = 1.25763 → √2.51526 = 1.58596
    #   answer: ln(348.41/280) = ln 1.24432 = 0.21858 → √0.43716 = 0.66118
    sharegpt = length_set("ShareGPT")
    assert "sharegpt" in length_set_names()
    assert sharegpt.input.sigma == pytest.approx(math.sqrt(2 * math.log(119.58 / 34)), abs=5e-4)
    assert sharegpt.output.sigma == pytest.approx(math.sqrt(2 * math.log(348.41 / 280)), abs=5e-4)
    assert sharegpt.input.sigma == pytest.approx(1.58596, abs=5e-4)
    assert sharegpt.output.sigma == pytest.approx(0.66118, abs=5e-4)
    # vLLM's is_valid_sequence: prompt ≤ 1,024; output ≤ 2,048 − the shortest prompt kept (4).
    assert (sharegpt.input.cap_tokens, sharegpt.output.cap_tokens) == (1024, 2048 - 4)


def test_survival_runs_past_the_even_grid_to_the_cap_or_the_far_tail():
    capped = LengthDist(201, 0.661, 2044)
    assert capped.survival[-1] == (2044, 0.0) and capped.survival[-2][0] > capped.max
    # Uncapped, the last point is the 1 − 10⁻⁶ quantile: P(L > s) = 10⁻⁶ there.
    assert LengthDist(1000, 1.0).survival[-1][1] == pytest.approx(1e-6, rel=1e-6)
    assert len(fixed(1000).survival) == 33  # fixed lengths: the even grid alone


def _constant_step_h100():
    """One H100 replica whose decode step is the same at every batch and context (our numbers)."""
    from tokenplan.api.resolve import PredictRequest, resolve

    ev = resolve(PredictRequest("llama-3.1-8b", "h100-sxm", isl=512, osl=1000, concurrency=2)).evaluate()
    return ev, ours(ev.deployment), EFF


def test_a_burst_with_spread_outputs_lasts_as_long_as_its_longest_output():
    ev, d, eff = _constant_step_h100()
    assert ev.steady.batch >= 2  # two requests are a burst: both run from the start
    # Step: 9e9 B / (4e12 × 0.8) = 2.8125 ms + 1 ms fixed = 3.8125 ms at batch 1 and 2 alike (no
    # KV, no per-sequence cost; the FLOPs, 2 × 2 × 8.5e9 / 5e14 = 0.07 ms, hide under the reads).
    one = step_time(d, eff, 1, 512).total_s
    assert one == pytest.approx(3.8125e-3) and step_time(d, eff, 2, 5000).total_s == pytest.approx(one)
    # Two requests of 1,000 tokens each: 1,000 steps at batch 2.
    both_fixed = job_time(d, eff, ev.settings, ev.steady, fixed(512), fixed(1000), 2).drain_s
    assert both_fixed == pytest.approx(1000 * one, rel=0.01)
    # Two lognormal outputs of mean 1,000 and σ = 1: the burst decodes until the longer ends,
    # E[max(L1, L2)] = E[L] + E|L1 − L2|/2 = E[L]·(1 + G) with the lognormal's Gini coefficient
    # G = 2Φ(σ/√2) − 1, so E[max] = 2Φ(0.70711)·1,000 = 2 × 0.76025 × 1,000 = 1,520.5 steps:
    # 52 % longer than with every output at the mean.
    spread = job_time(d, eff, ev.settings, ev.steady, fixed(512), LengthDist(1000, 1.0), 2).drain_s
    assert spread == pytest.approx(1520.5 * one, rel=0.02)
    assert spread / both_fixed == pytest.approx(1.5205, rel=0.03)


def test_validate_says_which_rows_spread_as_a_prompt_set(tmp_path):
    from tokenplan.api.validate import validate

    _read(tmp_path, "sharegpt", "", "sonnet")
    out = validate(str(tmp_path / "dev.csv")).to_json()
    assert [r["lengths"] for r in out["rows"]] == ["sharegpt", "fixed"]
    assert [s["id"] for s in out["skipped"]] == ["2"]  # sonnet: no shape known, its row says so
