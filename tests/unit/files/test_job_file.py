"""Job YAML: a mistyped key names the keys allowed where it sits."""

import pytest

from tokenplan.errors import ConfigError
from tokenplan.files.job import read_job_file


def test_an_unknown_nested_key_lists_the_keys_of_its_own_mapping(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: qwen3.6-27b\nosl: {mean: 2500, sigm: 1.0}\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert "osl.sigm: unknown key (did you mean sigma? allowed: mean, sigma, cap)" in str(exc.value)


@pytest.mark.parametrize("value", ["-3", "0", "1000000000001"])
def test_a_bad_value_still_says_what_was_given(tmp_path, value):
    path = tmp_path / "job.yaml"
    path.write_text(f"samples: {value}\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    # the range in plan --samples's own words (api.plan: 1 to MAX_SAMPLES = 10**12)
    assert str(exc.value).endswith(
        f"job.yaml: samples: {value} is not allowed (allowed: an integer from 1 to 1,000,000,000,000)"
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # newuser finding 11: these were refused later, by plan, without the file's name
        (
            "isl: {mean: 1024, sigma: 0.8, cap: 100}\n",
            "isl.cap: 100 is not allowed (allowed: a number of tokens above the mean 1024)",
        ),
        ('current: "tp=four"\n', "current: current 'tp=four' is not allowed (allowed: tp an integer ≥ 1)"),
        ("osl: {mean: 2500, sigma: 9}\n", "osl.sigma: 9 is not allowed (allowed: a lognormal σ from 0 to 5)"),
        # a cap the file states at the default's value is the file's (not "--max-tokens … its default")
        (
            "osl: {mean: 40000, sigma: 1.0, cap: 32768}\n",
            "osl.cap: 32768 is not allowed (allowed: a number of tokens above the mean 40000)",
        ),
    ],
)
def test_a_length_or_current_value_plan_refuses_names_the_file(tmp_path, text, line):
    # the key as the file spells it (isl.cap, osl.sigma), not the command line's --isl-cap and
    # --osl-sigma the same checks name (a new-user pass)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value) == f"{path}: {line}"


def test_current_may_be_a_mapping_of_the_same_keys(tmp_path):
    # "the same keys go in a job YAML as current:" read naturally as a mapping
    path = tmp_path / "job.yaml"
    path.write_text("current: {engine: sglang, tp: 4, disable-radix-cache: true}\n")
    assert read_job_file(str(path)).current == "engine=sglang,tp=4,disable-radix-cache=true"


def test_a_bare_number_is_the_mean_as_on_the_command_line(tmp_path):
    # new-user finding: `isl: 512` was refused in pydantic's words ("a valid dictionary or instance
    # of Lengths") while --isl 512 is the CLI's form; it now reads as {mean: 512} (σ 0, no cap)
    path = tmp_path / "job.yaml"
    path.write_text("isl: 512\nosl: {mean: 2500, sigma: 1.0}\n")
    fields = read_job_file(str(path)).request_fields()
    assert (fields["isl_mean"], fields["isl_sigma"], fields["isl_cap"]) == (512, 0.0, None)
    path.write_text("isl: true\n")  # a YAML boolean is no length
    with pytest.raises(ConfigError, match=r"isl: True is not allowed"):
        read_job_file(str(path))


def test_a_job_file_names_its_drafter(tmp_path):
    # draft_model is plan --draft-model: the dflash launch names it where DRAFT_MODEL stood
    from tokenplan.api.plan import plan, plan_request

    path = tmp_path / "job.yaml"
    path.write_text('gpus: ["8xb200"]\nspec: dflash:7\ndraft_model: z-lab/Qwen3.6-27B-DFlash\n')
    request = plan_request(str(path))
    assert request.draft_model == "z-lab/Qwen3.6-27B-DFlash"
    launch = plan(request).to_json()["options"][0]["launch"]["sglang"]
    assert "--speculative-draft-model-path z-lab/Qwen3.6-27B-DFlash" in launch and "DRAFT_MODEL" not in launch


@pytest.mark.parametrize(("value", "shown"), [("abc", "'abc'"), ("1e30", "'1e30'"), ("[1]", "[1]"), ("true", "True")])
def test_lengths_that_are_neither_a_number_nor_a_mapping_say_both_forms(tmp_path, value, shown):
    # a new-user pass: `isl: abc` answered "(allowed: Input should be a valid dictionary or instance of
    # Lengths)", pydantic's words, which name a class the user never sees and leave out the number form
    # (YAML 1.1 reads 1e30 without a dot as text, so it lands here too, shown quoted)
    path = tmp_path / "job.yaml"
    path.write_text(f"isl: {value}\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value).endswith(
        f"job.yaml: isl: {shown} is not allowed (allowed: a number of tokens (e.g. 1024 or 1.0e+4), "
        "or a mapping of mean, sigma and cap)"
    )


def test_a_job_file_name_the_command_line_overrides_is_not_checked(tmp_path):
    # plan --job j.yaml --engine sglang plans SGLang: the file's misspelt engine is not what runs,
    # so it is not refused (the file's other names still are, naming the file)
    from tokenplan.api.plan import plan_request

    path = tmp_path / "job.yaml"
    path.write_text("engine: vlm\nmodel: qwen3.6-27b\n")
    assert plan_request(str(path), engine="sglang").engine == "sglang"
    with pytest.raises(ConfigError, match=r"^.*job\.yaml: engine: 'vlm' is not in the catalog"):
        plan_request(str(path))
    path.write_text("engine: vlm\nmodel: qwen9\n")
    with pytest.raises(ConfigError, match=r"job\.yaml: model: 'qwen9' is not in the catalog"):
        plan_request(str(path), engine="sglang")


@pytest.mark.parametrize(("text", "said"), [("model:\n", "model: null"), ("gpus: []\n", "gpus: []")])
def test_a_key_without_a_value_is_refused_not_taken_as_the_default(tmp_path, text, said):
    # a new-user pass: `model: null`, `engine: null` and `gpus: []` planned the defaults, exit 0
    path = tmp_path / "job.yaml"
    path.write_text("samples: 100\n" + text)
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value).endswith(f"job.yaml: {said} is not allowed (allowed: a value, or leave the key out)")


@pytest.mark.parametrize("text", ["", "# the job, to fill in\n", "{}\n"])
def test_a_file_with_no_job_keys_is_refused_not_planned_as_the_defaults(tmp_path, text):
    # an empty job file planned the default job, exit 0, as if --job had not been given
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value).endswith(
        "job.yaml: <root>: no job keys (allowed: model, samples, isl, osl, gpus, engine, "
        "prices, spec, draft_model, current, measured_tok_s, tp, pp, dp, ep, max_running)"
    )


def test_spec_may_be_a_list_as_repeated_spec_options(tmp_path):
    # a break-it pass: `spec: [none, "mtp:1"]` was refused ("allowed: text"), so a job file could
    # not ask for the default three settings, nor follow the plan's own "add --spec none"
    path = tmp_path / "job.yaml"
    path.write_text('spec: [none, "mtp:1"]\n')
    assert read_job_file(str(path)).request_fields()["specs"] == ("none", "mtp:1")
    path.write_text("spec: mtp:3\n")
    assert read_job_file(str(path)).request_fields()["specs"] == ("mtp:3",)
    path.write_text("spec: [none, 3]\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value).endswith(
        """job.yaml: spec: ['none', 3] is not allowed (allowed: a --spec setting (e.g. mtp:3), or a list of them (e.g. [none, "mtp:1"]))"""
    )


def test_a_key_that_is_not_text_is_an_unknown_key(tmp_path):
    # a break-it pass: `1: 2` read "1: 1 is not allowed (allowed: Keys should be strings)"
    path = tmp_path / "job.yaml"
    path.write_text("samples: 10\n1: 2\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value).endswith(
        "job.yaml: 1: unknown key (allowed: model, samples, isl, osl, gpus, engine, "
        "prices, spec, draft_model, current, measured_tok_s, tp, pp, dp, ep, max_running)"
    )


def test_one_gpu_option_may_stand_alone_as_on_the_command_line(tmp_path):
    # a new-user pass: `gpus: 4xrtx-pro-6000` (one option, as --gpu takes it) was refused "(allowed: a list)"
    path = tmp_path / "job.yaml"
    path.write_text("gpus: 4xrtx-pro-6000\n")
    assert read_job_file(str(path)).gpus == ["4xrtx-pro-6000"]
    path.write_text("gpus: 4\n")  # a number is no GPU option: still refused, naming the key
    with pytest.raises(ConfigError, match=r"gpus"):
        read_job_file(str(path))
