"""Values that make no sense are refused with one line naming the field, the value and what is
allowed (issue 11): plan/predict options, calibration files, config.json and job YAML files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tokenplan.api.predict import predict
from tokenplan.api.resolve import PredictRequest
from tokenplan.catalog import load_model
from tokenplan.cli.options import parse_prices
from tokenplan.errors import ConfigError, InputError
from tokenplan.files.calibration import read_calibration
from tokenplan.files.job import read_job_file
from tokenplan.job.workload import LengthDist


def test_a_gpu_priced_twice_at_different_prices_is_refused() -> None:
    # newuser finding 13: --price b200=4.5 --price b200=9 kept the last with no word
    with pytest.raises(InputError) as info:
        parse_prices(["b200=4.5", "B200=9"])
    assert (
        str(info.value) == "price 'B200=9' is not allowed (allowed: one price per GPU (b200 is already priced at 4.5))"
    )
    assert parse_prices(["b200=4.5", "b200=4.5", "h200=3"]) == {"b200": 4.5, "h200": 3.0}  # the same twice is one


def test_two_names_of_one_gpu_priced_apart_are_refused_on_the_command_line_and_in_a_job_file(tmp_path: Path) -> None:
    # a break-it pass: --price b200=5 --price b200_sxm=7 (an alias) and a job file's
    # prices: {b200: 5, B200: 6} planned at the last price, exit 0
    from tokenplan.api.plan import plan, plan_request

    with pytest.raises(InputError) as info:
        plan(plan_request(gpus=("8xb200",), prices={"b200": 5.0, "b200_sxm": 7.0}))
    assert str(info.value) == (
        "price 'b200_sxm=7' is not allowed (allowed: one price per GPU (b200 is already priced at 5 as b200))"
    )
    job = tmp_path / "job.yaml"
    job.write_text("prices: {b200: 5, B200: 6}\n")
    with pytest.raises(ConfigError) as refused:
        plan_request(str(job))
    assert str(refused.value).endswith(
        "job.yaml: prices: 'B200=6' is not allowed (allowed: one price per GPU (b200 is already priced at 5 as b200))"
    )
    job.write_text("prices: {b200: 5, B200: 5}\n")  # the same price twice is one price
    assert plan_request(str(job)).prices == {"b200": 5.0, "B200": 5.0}


@pytest.mark.parametrize("item", ["b200=1e308", "b200=nan", "b200=inf", "b200=-1", "b200=0"])
def test_a_price_outside_what_any_gpu_costs_is_refused(item: str) -> None:
    with pytest.raises(InputError, match=r"price .* is not allowed \(allowed: GPU=USD per GPU-hour with 0 < USD"):
        parse_prices([item])


def test_memory_fraction_above_one_is_refused() -> None:
    with pytest.raises(InputError, match=r"memory_fraction 2.0 is not allowed \(allowed: a share of GPU memory"):
        predict(PredictRequest(model="qwen3.6-27b", gpu="b200", memory_fraction=2.0))


@pytest.mark.parametrize("sigma", [float("nan"), float("inf"), -0.1, 50.0])
def test_a_length_sigma_that_is_not_a_number_in_range_is_refused(sigma: float) -> None:
    with pytest.raises(InputError, match="length sigma"):
        LengthDist(1000.0, sigma, None)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"default": {}, "defualt": {"hbm_fraction": 0.5}}', "defualt: unknown key"),
        ('{"default": {"hbm_fraction": -0.5}}', "default.hbm_fraction: -0.5 is not allowed"),
        ('{"default": {"hbm_fraction": NaN}}', "default.hbm_fraction: nan is not allowed"),
        ('{"groups": {"sglang": {"step_overhead_s": -1e-3}}}', "groups.sglang.step_overhead_s"),
    ],
)
def test_a_calibration_file_with_an_unknown_key_or_a_bad_factor_is_refused(
    tmp_path: Path, text: str, where: str
) -> None:
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=where):
        read_calibration(str(path))


def test_the_shipped_calibration_passes_the_same_checks() -> None:
    from tokenplan.catalog import shipped_efficiency

    assert shipped_efficiency().default.hbm_fraction > 0


def test_a_config_json_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b'{"model_type": "\xff"}')  # offset: 16 bytes before the 0xff
    with pytest.raises(ConfigError, match=r"config.json: byte 16: not UTF-8"):
        load_model(str(tmp_path / "config.json"))


def test_a_job_yaml_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_bytes(b"model: qwen3.6-27b\nsamples: 10\x85\n")
    # "model: qwen3.6-27b\n" is 19 bytes and "samples: 10" 11: the bad byte is at offset 30.
    with pytest.raises(ConfigError, match=r"job.yaml: byte 30: not UTF-8 text"):
        read_job_file(str(tmp_path / "job.yaml"))


def test_a_yaml_alias_bomb_is_refused_within_a_second(tmp_path: Path) -> None:
    # 9 levels of 9 aliases: 9^9 = 387,420,489 strings once expanded (> 1 GB of lists).
    items, prev = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'], "a"
    for name in "bcdefghi":
        items.append(f"&{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    (tmp_path / "job.yaml").write_text("gpus: [" + ", ".join(items) + "]\n")
    started = time.process_time()
    with pytest.raises(ConfigError, match="more than 10 aliases"):
        read_job_file(str(tmp_path / "job.yaml"))
    assert time.process_time() - started < 1.0  # CPU time, not wall: the machine may be loaded


def test_pydantic_constraints_are_said_as_what_is_allowed() -> None:
    from typing import Literal

    from pydantic import BaseModel, Field, ValidationError

    from tokenplan.errors import allowed_from_validation

    class M(BaseModel):
        t: float = Field(default=0.0, ge=0)
        n: int = Field(default=1, gt=0, le=10)
        mode: Literal["a", "b"] = "a"

    def allowed(**kw: object) -> str:
        with pytest.raises(ValidationError) as exc:
            M(**kw)
        return allowed_from_validation(exc.value.errors()[0])

    assert allowed(t=-1) == "a number ≥ 0"
    assert allowed(n=0) == "a number > 0"
    assert allowed(n=11) == "a number ≤ 10"
    assert allowed(n="x") == "an integer"
    assert allowed(t="x") == "a number"
    assert allowed(mode="c") == "one of 'a' or 'b'"


@pytest.mark.parametrize("value", [0.0, -5.0, 0.5, float("nan")])
def test_predict_words_a_bad_isl_as_plan_does(value):
    # a new-user pass: predict refused 0 and −5 with "a finite number > 0" but 0.5 with plan's
    # "a number of tokens from 1 to 16,777,216" (MAX_REQUEST_TOKENS = 2^24); one wording now
    with pytest.raises(InputError, match=r"allowed: a number of tokens from 1 to 16,777,216"):
        predict(PredictRequest(model="qwen3-8b", gpu="h100-sxm", isl=value))
