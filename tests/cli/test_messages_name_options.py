"""One-line errors name what the user typed (newuser finding 11): the option that is missing
rather than ``config/gpu '/'``, ``out ''``, ``fit '--fit'`` or ``concurrency None``; the CLI's
``--request-timeout`` rather than ``deadline_s``; ``--current tp=3`` against ``--gpu`` rather than
a ``num_gpus`` the user never gave; one ``osl-sigma``/``isl-sigma`` message and range; and a GPU
count that is not a whole number as such, not as an unknown GPU."""

from __future__ import annotations

import sys

import pytest

from tokenplan.cli import main


def _error(monkeypatch, capsys, tmp_path, *args: str) -> str:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["tokenplan", *args])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1
    return lines[0]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["calibrate", "--from-bench", "x.json", "-o", "p.json"],
            "error: --model and --gpu are missing (allowed: --model MODEL and --gpu GPU with --from-bench)",
        ),
        (
            ["calibrate", "--from-bench", "x.json", "-o", "p.json", "--gpu", "h100-sxm"],
            "error: --model is missing (allowed: --model MODEL and --gpu GPU with --from-bench)",
        ),
        (
            ["calibrate", "--from-run", "r", "-o", "p.json", "--model", "llama-3.1-8b"],
            "error: --gpu is missing (allowed: --model MODEL and --gpu GPU with --from-run)",
        ),
        (
            ["calibrate", "mini.csv", "--json"],
            "error: -o is missing (allowed: -o PROFILE.json: where to write the calibration profile)",
        ),
        (  # new-user finding: no file at all was answered "-o is missing"
            ["calibrate"],
            "error: FILES is missing (allowed: measurement CSV files, --from-bench BENCH.json or --from-run RUN_DIR)",
        ),
        (  # --cv shapes the refit's folds; an update has none (it was ignored)
            ["calibrate", "mini.csv", "-o", "p.json", "--no-cv"],
            "error: --refit is missing (allowed: --refit with --cv/--no-cv: an update of the shipped fit has no folds)",
        ),
        (
            [
                "bench",
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--fit",
                "-o",
                "p.json",
                "--gpu",
                "h100-sxm",
            ],
            "error: --config is missing (allowed: -o PROFILE.json, --config MODEL and --gpu GPU with --fit)",
        ),
        (
            ["plan", "--gpu", "4xrtx-pro-6000", "--current", "tp=3", "--measured-tok-s", "1600"],
            # 4 GPUs = 1×3 + 1: TP3 does not divide them
            "error: --current 'tp=3' is not allowed (allowed: a setup whose TP × PP (3) divides the 4 GPUs of "
            "--gpu 4xrtx-pro-6000)",
        ),
        (
            # the profile's folder is checked before the fit, with what is allowed
            ["calibrate", "mini.csv", "-o", "no-such-dir/p.json"],
            "error: -o 'no-such-dir/p.json' is not allowed (allowed: a profile JSON file path in an existing, "
            "writable directory; no-such-dir does not exist)",
        ),
        (  # a break-it pass: 1e-300 requests/s slept 1e300 s between arrivals
            ["bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--request-rate", "1e-300"],
            "error: --request-rate '1e-300' is not allowed (allowed: rates ≥ 0.001 requests/s, or inf)",
        ),
        (  # a break-it pass: it named the API's field, "max_concurrency '1,2'", for --concurrency
            [
                "bench",
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--request-rate",
                "1",
                "--concurrency",
                "1,2",
            ],
            "error: --concurrency '1,2' is not allowed (allowed: one value with --request-rate (the most requests in "
            "flight))",
        ),
        (  # new-user finding: it said "isl/osl '0/256' is not allowed"
            ["bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--isl", "0"],
            "error: --isl 0 is not allowed (allowed: a token count ≥ 1 (or --dataset FILE))",
        ),
        (["plan", "--osl-sigma", "100"], "error: --osl-sigma 100 is not allowed (allowed: a lognormal σ from 0 to 5)"),
        (["plan", "--isl-sigma", "-1"], "error: --isl-sigma -1 is not allowed (allowed: a lognormal σ from 0 to 5)"),
        (
            ["plan", "--gpu", "-8xb200"],
            "error: --gpu '-8xb200' is not allowed (allowed: COUNTxKEY with COUNT an integer from 1 to 1,048,576 (e.g. 8xb200), "
            "or KEY alone (one node))",
        ),
        (
            ["plan", "--gpu", "8.5xb200"],
            "error: --gpu '8.5xb200' is not allowed (allowed: COUNTxKEY with COUNT an integer from 1 to 1,048,576 (e.g. 8xb200), "
            "or KEY alone (one node))",
        ),
    ],
)
def test_the_error_names_the_option_the_user_typed(monkeypatch, capsys, tmp_path, args, line):
    assert _error(monkeypatch, capsys, tmp_path, *args) == line


def test_calibrate_from_run_without_concurrency_names_the_option(monkeypatch, capsys, tmp_path):
    # a finished run directory whose summary.json states no requests_in_flight needs --concurrency
    # for its one measured point
    from tokenplan.calibration.bench_fit import RunTotals, Served, run_measurement
    from tokenplan.errors import MissingOptionError

    totals = RunTotals("run:m", "summary.json", 10, 1000, 100.0, 50.0, 64.0)
    with pytest.raises(MissingOptionError) as info:
        run_measurement(totals, Served("sglang", "llama-3.1-8b", "h100-sxm", 1), None, None)
    assert str(info.value) == (
        "--concurrency is missing (allowed: the run's total requests in flight, as --concurrency N: its "
        "summary.json states none (a run of an earlier release, or one resumed at another concurrency))"
    )


@pytest.mark.parametrize("burstiness", ["inf", "1e308"])
def test_bench_refuses_a_burstiness_without_a_finite_gamma_scale(monkeypatch, capsys, tmp_path, burstiness):
    # It was a traceback (gammavariate: alpha and beta must be > 0.0) after the server's probes.
    line = _error(
        monkeypatch, capsys, tmp_path, "bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
        "--request-rate", "10", "--burstiness", burstiness,
    )  # fmt: skip
    shown = {"inf": "inf", "1e308": "1e+308"}[burstiness]
    assert (
        line == f"error: --burstiness {shown} is not allowed (allowed: a number > 0 and ≤ 1e+06 (1 = Poisson arrivals))"
    )


def test_generate_names_request_timeout_as_typed(monkeypatch, capsys, tmp_path):
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    line = _error(
        monkeypatch, capsys, tmp_path, "generate", "in.jsonl", "--out", "run", "--endpoint",
        "http://127.0.0.1:9/v1", "--model", "m", "--dry-run", "--request-timeout", "0",
    )  # fmt: skip
    assert line == "error: --request-timeout 0 is not allowed (allowed: a number > 0)"


def test_a_price_for_a_gpu_not_planned_is_noted():
    # newuser finding 13: plan --gpu 8xb200 --price h200=1 dropped the price without a word
    from tokenplan.api.plan import PlanRequest, plan

    answer = plan(PlanRequest(gpus=("8xb200",), prices={"h200": 1.0}, specs=("none",))).to_json()["answer"]
    assert answer[0] == "--price for h200 not used: no --gpu option is h200 (the plan compares b200)"
    priced = plan(PlanRequest(gpus=("8xb200",), prices={"b200": 4.5}, specs=("none",))).to_json()["answer"]
    assert not any("not used" in line for line in priced)


def test_a_price_for_an_unknown_gpu_suggests_as_gpu_does(monkeypatch, capsys, tmp_path):
    # new-user finding: --price h100=3 said only 'h100' is not allowed, where --gpu h100 suggests
    line = _error(monkeypatch, capsys, tmp_path, "plan", "--price", "h100=3")
    assert line == (
        "error: --price 'h100' is not in the catalog; did you mean h100-nvl, h100-pcie, h100-sxm, h200? "
        "(allowed: a100-80gb, b200, b300, gb200, gb300, h100-nvl, h100-pcie, h100-sxm, h20, h200, l40s, mi300x, "
        "mi325x, mi355x, rtx-5090, rtx-pro-6000)"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # click kept the last of two --gpu with no word: predict --gpu b200 --gpu h200 predicted h200
        (
            ["predict", "--model", "qwen3.6-27b", "--gpu", "b200", "--gpu", "h200"],
            "error: --gpu 'h200' is not allowed (allowed: one GPU (tokenplan plan compares several); "
            "--gpu 'b200' is given already) (try 'tokenplan predict --help')",
        ),
        (
            ["memory", "--model", "qwen3.6-27b", "--gpu", "b200", "--spec=mtp:1", "--spec", "none"],
            "error: --spec 'none' is not allowed (allowed: one setting (tokenplan plan compares several); "
            "--spec 'mtp:1' is given already) (try 'tokenplan memory --help')",
        ),
    ],
)
def test_an_option_plan_repeats_is_taken_once_by_predict_and_memory(monkeypatch, capsys, tmp_path, args, line):
    assert _error(monkeypatch, capsys, tmp_path, *args) == line


def test_the_same_value_twice_is_one_value():
    from tokenplan.cli.params import given_values

    argv = ["--gpu", "b200", "--tp", "2", "--gpu=b200", "--", "--gpu", "h200"]
    assert given_values(argv, "--gpu") == ["b200", "b200"]  # after --, nothing counts
