"""Job YAML: a mistyped key names the keys allowed where it sits."""

import pytest

from tokenplan.errors import ConfigError
from tokenplan.files.job import read_job_file


def test_an_unknown_nested_key_lists_the_keys_of_its_own_mapping(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("model: qwen3.6-27b\nosl: {mean: 2500, sigm: 1.0}\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert "osl.sigm: unknown key (allowed: mean, sigma, cap)" in str(exc.value)


def test_a_bad_value_still_says_what_was_given(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("samples: -3\n")
    with pytest.raises(ConfigError) as exc:
        read_job_file(str(path))
    assert str(exc.value).endswith("job.yaml: samples: -3 is not allowed (allowed: a number > 0)")
