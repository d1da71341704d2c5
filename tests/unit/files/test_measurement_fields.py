"""Cells of a measurement file that used to be misread silently: a layout size ≤ 0 read as 1, a
``spec_decode`` cell in ``--spec`` syntax given a fixed acceptance of 3, and the serving export's
FP4 label on a model released in MXFP4; a count of 1e30 or 2.5 GPUs; a header in capitals."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.files.measurement_fields import RowError, count, integer, optional_count, spec_from_text
from tokenplan.files.measurements import _release_format, read_measurements


@pytest.mark.parametrize("cell", ["0", "-2", "-1"])
def test_a_layout_size_below_one_is_a_broken_row_not_tp1(cell):
    with pytest.raises(RowError, match=f"column tp value '{cell}' is not allowed"):
        integer({"tp": cell}, "tp")


def test_blank_is_the_default_and_the_serving_exports_zero_is_unset_where_it_writes_it():
    assert integer({"tp": ""}, "tp") == 1
    assert integer({}, "ep", 4) == 4
    assert integer({"moe_ep_size": "0"}, "moe_ep_size", zero_is_blank=True) == 1
    with pytest.raises(RowError, match="0 or blank for unset"):
        integer({"moe_ep_size": "-8"}, "moe_ep_size", zero_is_blank=True)
    assert integer({"tp": "8"}, "tp") == 8


@pytest.mark.parametrize(
    "cell, spec",
    [
        ("mtp:3", "mtp:3"),  # the prior's acceptance, as --spec mtp:3 (it was mtp:3:3, τ fixed at 3)
        ("mtp:2:1.8", "mtp:2:1.8"),
        ("MTP:1", "mtp:1"),  # it was mtp:1:3, refused as τ 3 > k + 1
        ("mtp (num_speculative_tokens=1)", "mtp:1"),
        ("mtp (steps=3 draft_tokens=4)", "mtp:3"),
        ("mtp", "mtp:3"),
        ("", "none"),
    ],
)
def test_spec_decode_cells_in_cli_syntax_are_kept_as_written(cell, spec):
    assert spec_from_text(cell) == spec


@pytest.mark.parametrize(
    "cell, bad",
    [
        ("mtp (steps=-3 draft_tokens=4)", "steps=-3"),
        ("mtp (steps=three draft_tokens=four)", "steps=three"),
        ("mtp (nextn=0)", "nextn=0"),
        ("mtp (steps=2 draft_tokens=x)", "draft_tokens=x"),
    ],
)
def test_a_spec_decode_parameter_that_is_not_a_count_makes_the_row_malformed(cell, bad):
    # a break-it pass: each was read as the default 3 steps, the same prediction as bare "mtp"
    with pytest.raises(RowError, match=f"column spec_decode value .*: {bad} is not a whole number ≥ 1"):
        spec_from_text(cell)


def test_the_serving_exports_fp4_label_reads_as_mxfp4_for_a_model_released_in_it():
    # openai/gpt-oss-120b config.json: quantization_config.quant_method "mxfp4"
    assert _release_format("gpt-oss-120b") == "mxfp4"
    assert _release_format("qwen3.6-27b") == "bf16"
    assert _release_format("no-such-model") is None


@pytest.mark.parametrize("cell", ["1e30", "2.5", "0", "1000000001"])
def test_a_count_outside_whole_numbers_from_one_to_a_billion_is_a_broken_row(cell):
    # concurrency 1e30 was read as 1e30 requests in flight and 2.5 GPUs as 2 (int() truncated)
    for col in ("concurrency", "num_gpus", "num_requests", "max_running"):
        with pytest.raises(
            RowError, match=f"column {col} value '{cell}' is not a whole number from 1 to 1,000,000,000"
        ):
            count({col: cell}, col) if col in ("concurrency", "num_gpus") else optional_count({col: cell}, col)


def test_a_count_is_read_whole_and_blank_only_where_optional():
    assert count({"concurrency": "1024"}, "concurrency") == 1024
    assert count({"num_gpus": "8.0"}, "num_gpus") == 8
    assert optional_count({"num_requests": ""}, "num_requests") is None
    with pytest.raises(RowError, match="column num_gpus is empty"):
        count({"num_gpus": ""}, "num_gpus")


def test_a_header_in_capitals_names_the_same_columns(tmp_path):
    # the files' own first line, "concurrency" typed "Concurrency" and "tp" typed " TP"
    src = Path(__file__).resolve().parents[3] / "data" / "ground-truth" / "serving-dev.csv"
    header, first = src.read_text(encoding="utf-8").splitlines()[:2]
    shouted = header.replace("concurrency", "Concurrency").replace(",tp,", ", TP,")
    (tmp_path / "s.csv").write_text(f"{shouted}\n{first}\n", encoding="utf-8")
    table = read_measurements(str(tmp_path / "s.csv"))
    assert (len(table.rows), table.skipped) == (1, ())
    assert table.rows[0].concurrency == 128  # the row's own concurrency cell


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    # Excel's "CSV UTF-8" writes U+FEFF first: the first column was read as "\ufeffid" (rows named
    # by their line, not their id) and a file whose first column is engine was refused with
    # "missing column(s) engine"
    src = Path(__file__).resolve().parents[3] / "data" / "ground-truth" / "dev.csv"
    header, first = src.read_text(encoding="utf-8").splitlines()[:2]
    cells = first.split(",")
    assert header.split(",")[:2] == ["id", "engine"] and cells[0] == "1"  # the file's first row is id 1
    (tmp_path / "id.csv").write_text(f"{header}\n{first}\n", encoding="utf-8-sig")
    assert read_measurements(str(tmp_path / "id.csv")).rows[0].row_id == "1"  # not "2", its line
    swapped = ",".join(["engine", "id", *header.split(",")[2:]]), ",".join([cells[1], cells[0], *cells[2:]])
    (tmp_path / "engine.csv").write_text("\n".join(swapped) + "\n", encoding="utf-8-sig")
    table = read_measurements(str(tmp_path / "engine.csv"))
    assert (len(table.rows), table.skipped, table.rows[0].row_id) == (1, (), "1")


@pytest.mark.parametrize("cell", ["1_000", "１２"])
def test_a_number_is_plain_ascii_digits(cell):
    # Python's float() reads "1_000" as 1000 and full-width "１２" as 12; neither is a CSV number
    with pytest.raises(RowError, match=f"column concurrency value '{cell}' is not a number"):
        count({"concurrency": cell}, "concurrency")


def test_an_engine_version_naming_another_engine_makes_the_row_malformed():
    # a break-it pass: "sglang 0.5.9" on a vLLM row was read as vLLM 0.5.9
    from tokenplan.files.measurement_fields import engine_version

    with pytest.raises(RowError, match="names sglang, not the row's engine vllm"):
        engine_version({"engine_version": "sglang 0.5.9"}, "vllm")
    assert engine_version({"engine_version": "rocm/vllm:rocm6.4.1_vllm_0.10.1"}, "vllm") == (
        "rocm/vllm:rocm6.4.1_vllm_0.10.1"
    )
    assert engine_version({"engine_version": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0"}, "trtllm") is not None
    assert engine_version({"engine_version": "0.5.9"}, "sglang") == "0.5.9"
    assert engine_version({"engine_version": ""}, "sglang") is None


def test_an_unknown_spec_decode_method_is_named_as_written():
    # it read "spec 'magic:3' is not allowed", a value the file never held
    with pytest.raises(RowError, match="value 'magic': 'magic' is not one of mtp, eagle, eagle3, dflash"):
        spec_from_text("magic")
