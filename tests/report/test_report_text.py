"""The text blocks moved out of the CLI into ``tokenplan.report`` (issue 13), by hand on small
inputs: each expected string is written out from the format the function documents."""

from __future__ import annotations

import dataclasses
import io

from rich.console import Console

from tokenplan.bench_schema import BenchFit, BenchLevel, LevelErrors, UpdateProfile
from tokenplan.calibration.summary import CalibrationProfile, CalibrationSummary, FittedFactor, Optimizer
from tokenplan.calibration.update import CalibrationUpdate, MovedFactor, UpdatedGroup
from tokenplan.report.bench import level_line
from tokenplan.report.calibration import at_bound_line, show_calibration
from tokenplan.report.fit import show_fit, show_update
from tokenplan.report.generate import DryRun, dry_run_text, duration_text


def _printed(show, *args, **kwargs) -> list[str]:  # noqa: ANN001 - a report.show_* function
    out = io.StringIO()
    show(Console(file=out, width=120), *args, **kwargs)
    return out.getvalue().splitlines()


def _level(**figures: object) -> BenchLevel:
    return BenchLevel.from_json({"duration_s": 1.0, **figures})


def test_level_line_names_the_level_and_says_when_throughput_was_not_measured() -> None:
    assert level_line(_level(concurrency=16, output_tok_s=12345.6, requests=64, errors=1)) == (
        "concurrency 16: 12,346 output tok/s, 64 requests, 1 errors"
    )  # 12,345.6 rounds up
    assert level_line(_level(concurrency=1, output_tok_s=None, requests=16, errors=0)) == (
        "concurrency 1: – (not measured) output tok/s, 16 requests, 0 errors"
    )


def test_an_open_loop_level_is_named_by_its_rate_not_by_the_requests_it_sent() -> None:
    # --request-rate 20,40 --num-prompts 20: both levels stored "concurrency" 20 and read
    # "concurrency 20" twice; 20 requests at 20 req/s over 1.2 s = 16.6 req/s × 4 tokens = 66 tok/s
    free = _level(concurrency=20, request_rate=20.0, output_tok_s=66.4, requests=20, errors=0)
    assert level_line(free) == "rate 20 req/s: 66 output tok/s, 20 requests, 0 errors"
    capped = _level(concurrency=8, request_rate=2.5, max_concurrency=8, output_tok_s=130.3, requests=20, errors=0)
    assert level_line(capped) == "rate 2.5 req/s, ≤ 8 in flight: 130 output tok/s, 20 requests, 0 errors"
    # rate inf (all at once) is a closed loop of its requests, named by its concurrency as before
    assert level_line(_level(concurrency=16, request_rate="inf", output_tok_s=1.0, requests=16, errors=0)).startswith(
        "concurrency 16: "
    )


def test_durations_switch_to_hours_past_59_minutes() -> None:
    assert duration_text(75.9) == "1m15s"  # 75 s = 1 min 15 s (whole seconds)
    assert duration_text(3725) == "1h02m"  # 3725 s = 1 h 2 min 5 s; seconds dropped past an hour
    assert duration_text(None) == "—"


def test_dry_run_text_without_a_tokenizer_says_the_prompts_were_not_counted() -> None:
    record = {
        "rows": 1200,
        "rejected_rows": 3,
        "units": 2400,
        "requests": 2400,
        "prompt_tokens_mean": None,
        "prompt_tokens_sigma": None,
        "prompt_tokens_max": None,
        "tokenizer": None,
        "sampling": {},
        "plan_command": "tokenplan plan --samples 2400 --max-tokens 4096",
    }
    assert dry_run_text(DryRun.from_json(record), 2).splitlines() == [
        "rows          1,200 usable, 3 rejected",
        "units         2,400 (2 per row)   requests 2,400",
        "prompt tokens not counted (no tokenizer: --tokenizer PATH, or a local --model directory)",
        "plan for them tokenplan plan --samples 2400 --max-tokens 4096",
    ]
    counted = dict(
        record, prompt_tokens_mean=812.4, prompt_tokens_sigma=0.731, prompt_tokens_max=9000, tokenizer="tok/"
    )
    assert dry_run_text(DryRun.from_json(counted), 2).splitlines()[2] == (
        "prompt tokens mean 812, σ 0.73 (ln), longest 9,000  (tokenizer tok/)"
    )


def test_dry_run_text_names_the_rows_it_sets_aside() -> None:
    # new-user finding: --dry-run said "5 rejected" and nothing of which rows or why, and a dry run
    # writes no rejects.jsonl; it now names the first ones and counts the rest
    record = {
        "rows": 10,
        "rejected_rows": 3,
        "units": 10,
        "requests": 10,
        "prompt_tokens_mean": None,
        "prompt_tokens_sigma": None,
        "prompt_tokens_max": None,
        "tokenizer": None,
        "sampling": {},
        "plan_command": "tokenplan plan --samples 10 --max-tokens 4096",
        "rejects": ["in.jsonl line 2: invalid JSON: x", "in.jsonl line 5: messages: not a non-empty list"],
    }
    assert dry_run_text(DryRun.from_json(record), 1).splitlines()[2:5] == [
        "  rejected    in.jsonl line 2: invalid JSON: x",
        "  rejected    in.jsonl line 5: messages: not a non-empty list",
        "  rejected    … and 1 more (a run lists each in rejects.jsonl)",
    ]


def test_calibration_notes_name_bound_and_held_factors_and_the_files_written(tmp_path) -> None:  # noqa: ANN001
    d = CalibrationSummary(
        n=12,
        skipped=1,
        throughput_set_aside=2,
        converged=True,
        optimizer=Optimizer(status=2, message="", nfev=31),
        at_bound=("mfu",),
        held=("overlap",),
        factors=(FittedFactor(level="vllm", name="mfu", value=0.95, uncertainty=None, at_bound=True),),
        cross_validation={},
        profile=CalibrationProfile({}, {}, {}, {}, ("vllm.mfu",), ("overlap",), "test"),
    )
    assert at_bound_line(dataclasses.replace(d, at_bound=())) is None
    lines = _printed(show_calibration, d, tmp_path / "p.json")
    assert lines[-3:] == [
        "at a bound of EFFICIENCY_BOUNDS (the data asks for more than the bound allows, or cannot identify the "
        "factor; no σ): mfu",
        "held at their documented defaults (not identified by the data): overlap",
        f"wrote {tmp_path / 'p.json'}",
    ]
    assert any("mfu" in line and "0.95" in line and "–" in line and "at bound" in line for line in lines)
    assert "12 rows, 1 skipped, 2 with tok/s set aside" in " ".join(" ".join(lines).split())  # title may wrap


def test_the_fit_names_each_result_file_read_before_its_tables(tmp_path) -> None:  # noqa: ANN001
    fit = {
        "converged": False,
        "at_bound": [],
        "factors": {"hbm_fraction": {"value": 0.81234, "uncertainty": 0.012}},
        "levels": [
            {
                "concurrency": 4,
                "batch": 4,
                "predicted_tpot_s": 0.0125,
                "measured_tpot_s": None,
                "predicted_output_tok_s_per_gpu": 320.04,
                "measured_output_tok_s_per_gpu": 300.0,
            }
        ],
        "sources": [{"path": "a.jsonl", "format": "vllm", "levels": 1}],
    }
    lines = _printed(show_fit, BenchFit.from_json(fit), None, sources=True)
    assert lines[0] == "read a.jsonl: vllm, 1 level(s)"
    assert "fit: efficiency factors (not converged)" in lines[1]
    # 0.81234 to 4 significant digits is 0.8123, ± 0.012 to 2 is 0.012; 12.5 ms, TPOT not measured
    assert any("hbm_fraction" in line and "0.8123" in line and "0.012" in line for line in lines)
    assert any("12.50" in line and "–" in line and "320.0" in line and "300.0" in line for line in lines)
    assert not any(line.startswith("wrote") for line in lines)


def _update() -> CalibrationUpdate:
    moved = {
        "step_overhead_s": MovedFactor(shipped=0.008, calibrated=0.010, uncertainty=0.00123),
        "ttft_overhead_s": MovedFactor(shipped=0.05, calibrated=0.04, uncertainty=None),
    }
    group = UpdatedGroup(
        rows=7,
        kept="step+ttft",
        factors=moved,
        median_abs_error_shipped=LevelErrors(tpot=0.25, ttft=0.35),
        median_abs_error_calibrated=LevelErrors(tpot=0.031, ttft=None),
    )
    still = UpdatedGroup(3, "shipped", {}, LevelErrors(0.1, None), LevelErrors(0.1, None))
    profile = UpdateProfile("shipped", {}, {}, {}, "update of the shipped fit by `x`")
    return CalibrationUpdate(n=10, skipped=2, groups={"vllm/hopper": group, "sglang/blackwell": still}, profile=profile)


def test_an_update_shows_each_moved_factor_and_the_groups_error_before_and_after(tmp_path) -> None:  # noqa: ANN001
    lines = _printed(show_update, _update(), tmp_path / "p.json")
    assert lines[0] == "10 rows fitted, 2 skipped (tokenplan validate lists why)"
    assert "update of the shipped fit: vllm/hopper (7 rows)" in lines[1]
    step = next(line for line in lines if "step_overhead_s" in line)
    # 0.008 → 0.010 is +25.0 %; ±1σ 0.00123 to 2 significant digits is 0.0012
    assert [c.strip() for c in step.split("│")[1:-1]] == ["step_overhead_s", "0.008", "0.01", "+25.0 %", "0.0012"]
    ttft = next(line for line in lines if "ttft_overhead_s" in line)
    # 0.05 → 0.04 is −20.0 %; no σ
    assert [c.strip() for c in ttft.split("│")[1:-1]] == ["ttft_overhead_s", "0.05", "0.04", "-20.0 %", "–"]
    # fractions as percentages to one decimal: 0.25 → 25.0 %, 0.031 → 3.1 %, 0.35 → 35.0 %, no TTFT after → "–"
    # (the line is longer than the 120-column console: rich wraps it after a space)
    assert (
        "vllm/hopper median |error|: TPOT/throughput 25.0 % → 3.1 %, TTFT 35.0 % → – (kept: step+ttft); "
        "every other factor and group stays the shipped fit"
    ) in "".join(lines)
    # a group where nothing moved is one line with its rows (3), no table of headers alone
    assert (
        "sglang/blackwell (3 rows): nothing moved (the rows did not improve on the shipped fit, or cannot tell "
        "its factors apart)"
    ) in lines
    assert sum("update of the shipped fit:" in line for line in lines) == 1
    assert lines[-1] == f"wrote {tmp_path / 'p.json'}"


def test_an_update_writes_its_groups_under_the_keys_it_always_had() -> None:
    d = _update().to_json()
    # the keys calibrate --json always printed, after the schema_version every command's answer starts with
    assert list(d) == ["schema_version", "n", "skipped", "groups", "profile"]
    assert d["schema_version"] == 1
    group = d["groups"]["vllm/hopper"]
    assert list(group) == ["rows", "kept", "factors", "median_abs_error_shipped", "median_abs_error_calibrated"]
    # and, added after, whether a bound holds the factor (0.04 s lies inside ttft_overhead_s's bounds)
    assert group["factors"]["ttft_overhead_s"] == {
        "shipped": 0.05,
        "calibrated": 0.04,
        "uncertainty": None,
        "at_bound": False,
    }
    assert group["median_abs_error_calibrated"] == {"tpot": 0.031, "ttft": None}
    # an update profile has no fitted_on (only a fit to one server's sweep has): the key is left out
    assert list(d["profile"]) == ["layered_on", "groups", "prior", "uncertainty", "provenance"]
    assert CalibrationUpdate.from_json(d) == _update()


def test_the_dry_runs_plan_command_names_a_model_plan_can_read():
    from tokenplan.report.generate import _plannable

    # a catalog name and a Hugging Face id of a catalog model are kept as served
    assert _plannable("qwen3.6-27b") == "qwen3.6-27b"
    assert _plannable("Qwen/Qwen3.6-27B") == "Qwen/Qwen3.6-27B"
    # a served name plan cannot read becomes a placeholder for its config.json, not a failing name
    assert _plannable("tiny") == "CONFIG.json"
    assert _plannable(None) is None
