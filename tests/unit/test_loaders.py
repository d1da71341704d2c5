"""The one reader of users' JSON and YAML files (tokenplan.loaders, issue 26): bounded nesting,
no key twice, UTF-8, and the readers that now go through it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tokenplan.errors import ConfigError
from tokenplan.loaders import MAX_NESTING, load_json, parse_json, parse_yaml

NESTED = f"nested deeper than {MAX_NESTING} levels"


def test_json_nested_to_the_limit_parses_and_one_level_more_is_refused() -> None:
    at_limit = "[" * MAX_NESTING + "]" * MAX_NESTING  # 64 lists, each inside the last
    value = parse_json(at_limit, "f.json")
    for _ in range(MAX_NESTING - 1):
        (value,) = value
    assert value == []
    with pytest.raises(ConfigError, match=f"^f.json: line 1: {NESTED}"):
        parse_json("[" + at_limit + "]", "f.json")


def test_json_past_the_recursion_limit_names_the_line_where_it_goes_too_deep() -> None:
    # lines 1-2 hold 2 levels, line 3 the 3rd to the 100,000th: the 65th opens on line 3
    text = '{\n"a": [\n' + "[" * 99_998 + "]" * 99_998 + "]}"
    with pytest.raises(ConfigError, match=f"^f.json: line 3: {NESTED}"):
        parse_json(text, "f.json")


def test_brackets_inside_json_strings_do_not_count_as_nesting() -> None:
    assert parse_json('{"a": "' + "[" * 1000 + '"}', "f.json") == {"a": "[" * 1000}


def test_a_json_key_twice_in_one_object_is_refused_and_in_two_objects_is_not() -> None:
    with pytest.raises(ConfigError, match=r"^f.json: key 'seed': given twice in one object \(allowed: each key once\)"):
        parse_json('{"seed": 1, "x": {}, "seed": 2}', "f.json")
    assert parse_json('{"a": {"seed": 1}, "b": {"seed": 2}}', "f.json") == {"a": {"seed": 1}, "b": {"seed": 2}}


def test_json_nan_parses_for_the_field_checks_to_refuse_by_name() -> None:
    # NaN: the caller's check names the field (see tests/cli/test_bad_files_cli.py)
    assert math.isnan(parse_json('{"x": NaN}', "f.json")["x"])


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(b'{"a": 1, "b": "\xc3\x28"}')  # '{"a": 1, "b": "' = 15 bytes
    with pytest.raises(ConfigError, match=r"f.json: byte 15: not UTF-8 text"):
        load_json(tmp_path / "f.json")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("model: a\nsamples: 1\nsamples: 2\n", "line 3: key 'samples' given twice in one mapping (first on line 2)"),
        ("isl: {mean: 1, mean: 2}\n", "line 1: key 'mean' given twice in one mapping (first on line 1)"),
        ("prices:\n  b200: 1\n  b200: 2\n", "line 3: key 'b200' given twice in one mapping (first on line 2)"),
    ],
    ids=["top_level", "flow_mapping", "nested"],
)
def test_a_yaml_key_twice_in_one_mapping_is_refused(text: str, line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_yaml(text, "job.yaml")
    assert str(refused.value) == f"job.yaml: {line} (allowed: each key once)"


def test_yaml_merge_keys_overridden_next_to_the_merge_are_not_duplicates() -> None:
    # YAML's merge type: keys given beside `<<` override the merged ones
    assert parse_yaml("base: &b {mean: 1, sigma: 0.5}\nisl:\n  <<: *b\n  mean: 2\n", "job.yaml")["isl"] == {
        "mean": 2,
        "sigma": 0.5,
    }


def test_yaml_nested_to_the_limit_parses_and_one_level_more_is_refused() -> None:
    assert parse_yaml("a: " + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1), "j.yaml")  # mapping + 63 lists
    with pytest.raises(ConfigError, match=f"^j.yaml: line 1: {NESTED}"):
        parse_yaml("a: " + "[" * MAX_NESTING + "]" * MAX_NESTING, "j.yaml")
    with pytest.raises(ConfigError, match=f"^j.yaml: line 2: {NESTED}"):
        parse_yaml("a: 1\nb: " + "[" * 100_000 + "]" * 100_000, "j.yaml")


def test_bench_result_json_lines_with_a_bad_line_name_that_line(tmp_path: Path) -> None:
    from tokenplan.files.bench_results import read_bench_results

    good = {"completed": 8, "output_throughput": 100.0}
    (tmp_path / "r.jsonl").write_text(json.dumps(good) + "\n" + "[" * 100_000 + "\n")
    with pytest.raises(ConfigError, match=f"r.jsonl: line 2: {NESTED}"):
        read_bench_results(str(tmp_path / "r.jsonl"))


def test_a_calibration_profile_with_a_factor_twice_is_refused(tmp_path: Path) -> None:
    from tokenplan.files.calibration import read_calibration

    (tmp_path / "cal.json").write_text('{"default": {"hbm_fraction": 0.8, "hbm_fraction": 0.5}}')
    with pytest.raises(ConfigError, match="cal.json: key 'hbm_fraction': given twice in one object"):
        read_calibration(str(tmp_path / "cal.json"))


def test_extra_body_nested_too_deep_is_refused_by_name() -> None:
    from tokenplan.cli.generate import _json_object
    from tokenplan.errors import InputError

    with pytest.raises(InputError, match=rf"^extra-body '.*\.\.\.' is not allowed .*line 1: {NESTED}"):
        _json_object('{"a":' * 5000 + "1" + "}" * 5000)


def test_an_unclosed_bracket_or_quote_names_the_line_it_began_on() -> None:
    # The parser notices an unclosed "[1, 2" on line 3 only at line 4's ':'; the message keeps the
    # parser's line and adds where the sequence began. A quote opened on line 1 is noticed at the
    # end (line 3: after the last newline).
    with pytest.raises(ConfigError, match=r"line 4: not valid YAML .*flow sequence begun on line 3"):
        parse_yaml("model: m\nsamples: 1\nisl: [1, 2\nosl: 3\n", "job.yaml")
    with pytest.raises(ConfigError, match=r"line 3: not valid YAML .*quoted scalar begun on line 1"):
        parse_yaml('model: "m\nsamples: 1\n', "job.yaml")
    with pytest.raises(ConfigError, match=r"line 2: not valid YAML \(mapping values are not allowed here\)$"):
        parse_yaml("model: m\n  isl: 5\n", "job.yaml")
