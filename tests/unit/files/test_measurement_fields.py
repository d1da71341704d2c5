"""Cells of a measurement file that used to be misread silently: a layout size ≤ 0 read as 1, a
``spec_decode`` cell in ``--spec`` syntax given a fixed acceptance of 3, and the serving export's
FP4 label on a model released in MXFP4."""

from __future__ import annotations

import pytest

from tokenplan.files.measurement_fields import RowError, integer, spec_from_text
from tokenplan.files.measurements import _release_format


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


def test_the_serving_exports_fp4_label_reads_as_mxfp4_for_a_model_released_in_it():
    # openai/gpt-oss-120b config.json: quantization_config.quant_method "mxfp4"
    assert _release_format("gpt-oss-120b") == "mxfp4"
    assert _release_format("qwen3.6-27b") == "bf16"
    assert _release_format("no-such-model") is None
