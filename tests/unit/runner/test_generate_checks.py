"""``generate``'s up-front checks (:func:`check_request`): API-key variable, plan model, --export
and --out, all before anything is sent, in that order, the run directory created last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.api.generate import GenerateRequest, check_request
from tokenplan.errors import ConfigError, InputError
from tokenplan.files.plan_hint import plan_model_mismatch, read_plan
from tokenplan.files.reports import load_plan
from tokenplan.runner.limits import MAX_CONCURRENCY


@pytest.mark.parametrize(
    ("plan_model", "model", "mismatch"),
    [
        ("qwen3.6-27b", "qwen3.6-27b", False),
        ("qwen3.6-27b", "Qwen/Qwen3.6-27B", False),  # last path component, any case
        ("qwen3.6-27b", "/models/Qwen/Qwen3.6-27B-FP8/", False),  # the served name contains the catalog one
        ("qwen3.6-27b-fp8", "qwen3.6-27b", False),  # and the other way round
        ("qwen3.6-27b", "llama-3.1-8b", True),
        ("qwen3.6-27b", "Qwen/Qwen3.6-35B-A3B", True),
        (None, "anything", False),  # a plan without a model says nothing
    ],
)
def test_plan_model_mismatch_compares_last_components_and_containment(plan_model, model, mismatch) -> None:
    assert plan_model_mismatch(plan_model, model) is mismatch


def _request(tmp_path: Path, **options) -> GenerateRequest:
    data = tmp_path / "in.jsonl"
    if not data.exists():
        data.write_text('{"prompt": "x"}\n')
    return GenerateRequest.build(
        **{
            "inputs": [str(data)],
            "out_dir": tmp_path / "run",
            "endpoints": ["http://127.0.0.1:9/v1"],
            "model": "llama-3.1-8b",
            **options,
        }
    )


def test_a_named_api_key_variable_must_be_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_UNSET", raising=False)
    monkeypatch.setenv("EMPTY_KEY", "")
    for name in ("NOPE_UNSET", "EMPTY_KEY"):
        with pytest.raises(
            InputError,
            match=rf"^--api-key-env '{name}' is not allowed \(allowed: the name of a "
            rf"set, non-empty environment variable .*\${name} is unset or empty",
        ):
            check_request(_request(tmp_path, api_key_env=name))
    assert not (tmp_path / "run").exists()  # refused before the run directory is made
    monkeypatch.setenv("MY_KEY", "sk-1")
    assert check_request(_request(tmp_path, api_key_env="MY_KEY")).api_key == "sk-1"


def test_the_default_key_variable_may_be_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert check_request(_request(tmp_path)).api_key is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-2")
    assert check_request(_request(tmp_path)).api_key == "sk-2"


def test_a_plan_for_another_model_warns_and_its_concurrency_is_still_read(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "model": "qwen3.6-27b",
                "recommended": {"concurrency_per_endpoint": 48, "output_tok_s_total": 1000.0, "num_replicas": 2},
            }
        )
    )
    hint, notes = read_plan(plan, MAX_CONCURRENCY)
    assert (hint.model, hint.concurrency_per_endpoint, notes) == ("qwen3.6-27b", 48, [])
    checked = check_request(_request(tmp_path, plan=plan))
    assert checked.warnings == [
        f"the plan {plan} was made for model 'qwen3.6-27b', but --model is "
        "'llama-3.1-8b': its concurrency and throughput may not fit this model",
        # max_tokens is Llama-3.1-8B's 131,072-token context at temperature 0 (no generation_config)
        "temperature 0 (greedy decoding) with max_tokens 131,072: an answer that repeats itself runs to that "
        "cap (models that think by default, such as Qwen3, warn against greedy decoding); set --temperature "
        "(Qwen3 recommends 0.6) or --max-tokens",
    ]
    assert checked.plan.concurrency_per_endpoint == 48  # warned, not refused
    same = check_request(_request(tmp_path, plan=plan, model="Qwen/Qwen3.6-27B-FP8"))
    assert not any("was made for model" in w for w in same.warnings)  # its context's greedy warning aside


def test_a_json_file_that_is_no_plan_is_refused_and_a_plan_without_a_choice_is_said(tmp_path: Path) -> None:
    # break-it finding (stop 40): `generate --plan` on `{}` ran with the defaults and a note, exit 0.
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    with pytest.raises(ConfigError, match=r"has neither 'recommended' nor 'job': not the output of `tokenplan plan"):
        read_plan(plan, MAX_CONCURRENCY)
    # `plan --json` where no configuration runs (DeepSeek-R1 on one L40S) prints "recommended": null
    plan.write_text(json.dumps({"model": "deepseek-r1", "job": {}, "recommended": None}))
    hint, notes = read_plan(plan, MAX_CONCURRENCY)
    assert hint.concurrency_per_endpoint is None
    assert notes == [f"{plan}: 'recommended' is null: the plan found no configuration that runs; using the defaults"]


def test_a_job_yaml_given_as_plan_says_what_plan_file_is_wanted(tmp_path: Path) -> None:
    # new-user pass: `plan --job job.yaml --json > plan.json` sits beside `generate --plan`, and the
    # job YAML given as --plan was answered "line 1: not valid JSON (Expecting value)" alone
    job = tmp_path / "job.yaml"
    job.write_text("model: qwen3.6-27b\nsamples: 914000\n")
    expected = (
        f"{job}: line 1: not valid JSON (Expecting value); allowed: the output of `tokenplan plan --json` "
        "(e.g. tokenplan plan --job job.yaml --json > plan.json)"
    )
    with pytest.raises(ConfigError) as caught:
        read_plan(job, MAX_CONCURRENCY)
    assert str(caught.value) == expected
    with pytest.raises(ConfigError) as caught:
        load_plan(job)  # report --plan reads it the same way
    assert str(caught.value) == expected


def test_a_bad_export_path_is_refused_before_the_run_directory_is_made(tmp_path: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"^--export '/nonexistent/dir/x\.parquet' is not allowed \(allowed: a "
        r"Parquet file path in an existing, writable directory; /nonexistent/dir "
        r"does not exist\)$",
    ):
        check_request(_request(tmp_path, export=Path("/nonexistent/dir/x.parquet")))
    (tmp_path / "adir").mkdir()
    with pytest.raises(InputError, match=r"this path is a directory\)$"):
        check_request(_request(tmp_path, export=tmp_path / "adir"))
    assert not (tmp_path / "run").exists()
    check_request(_request(tmp_path, export=tmp_path / "out.parquet"))
    assert (tmp_path / "run").is_dir() and not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize("name", ["x.csv", "x.json", "x.jsonl.gz"])
def test_an_export_suffix_that_is_not_its_format_is_refused(tmp_path: Path, name: str) -> None:
    # newuser finding 12: --export x.csv wrote Parquet under a .csv name, exit 0
    with pytest.raises(InputError) as info:
        check_request(_request(tmp_path, export=tmp_path / name))
    assert str(info.value) == (
        f"--export {str(tmp_path / name)!r} is not allowed (allowed: a .parquet or .jsonl file, or another name "
        "with --format parquet|jsonl|openai-batch)"
    )
    assert not (tmp_path / "run").exists()
    # with the format named, the name is the user's own choice
    check_request(_request(tmp_path, export=tmp_path / name, export_format="parquet"))


def test_an_export_onto_an_input_or_into_the_run_directory_is_refused(tmp_path: Path) -> None:
    # --export in.jsonl would overwrite the dataset; --export run/shards/part-00000.jsonl the run's records
    with pytest.raises(InputError, match=r"a path other than the input files \(it would overwrite the input\)"):
        check_request(_request(tmp_path, export=str(tmp_path / "in.jsonl")))
    (tmp_path / "run" / "shards").mkdir(parents=True)
    with pytest.raises(InputError, match=r"a path outside the run directory"):
        check_request(_request(tmp_path, export=str(tmp_path / "run" / "shards" / "part-00000.jsonl")))
    assert not (tmp_path / "run" / "shards" / "part-00000.jsonl").exists()
