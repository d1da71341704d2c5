"""``tokenplan calibrate FILE`` (an update of the shipped fit) leaves out the rows whose
configuration the planner rejects, as ``validate`` does: they predict nothing, yet they counted
as fitted rows with a zero error, which lowered the update's noise estimate and let a second
model "inform" factors. Five rows of Llama-3.1-405B in BF16 on one H100 (756 GiB of weights on
an 80 GiB GPU) appended to dev.csv's rows moved vLLM/Hopper's ``hbm_fraction`` from 0.64 to
0.95 and fitted three more factors, and the summary said "72 rows fitted, 16 skipped" where
``validate`` skips 21."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("scipy")

from tokenplan.api.calibrate import calibrate_update  # noqa: E402

DEV = Path(__file__).resolve().parents[3] / "data" / "ground-truth" / "dev.csv"
# 405.8 B parameters × 2 bytes = 811 GB of BF16 weights: no H100 SXM (79.6 GiB) holds them
REJECTED = {
    "engine": "vllm",
    "model": "llama-3.1-405b",
    "gpu": "h100-sxm",
    "num_gpus": "1",
    "tp": "1",
    "ep": "1",
    "pp": "1",
    "dp": "1",
    "attention_dp": "false",
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "isl": "1024",
    "osl": "1024",
    "concurrency": "64",
    "spec_decode": "none",
    "output_tok_s_per_gpu": "500",
    "trust": "high",
}
ADDED = 5


def _with_rejected_rows(tmp_path: Path) -> Path:
    with DEV.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header, rows = list(reader.fieldnames or []), list(reader)
    rows += [{**REJECTED, "id": str(900 + i)} for i in range(ADDED)]
    out = tmp_path / "dev-plus.csv"
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return out


def test_rows_the_planner_rejects_change_nothing_and_count_as_skipped(tmp_path):
    plain = calibrate_update([str(DEV)])
    plus = calibrate_update([str(_with_rejected_rows(tmp_path))])
    assert plus.profile.groups == plain.profile.groups
    # the rows fitted are dev.csv's; the five added rows join its skipped ones
    assert plus.n == plain.n
    assert plus.skipped == plain.skipped + ADDED


def test_a_file_of_rejected_rows_only_is_refused(tmp_path):
    from tokenplan.errors import InputError

    path = tmp_path / "none.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["id", *REJECTED])
        writer.writeheader()
        writer.writerow({**REJECTED, "id": "1"})
    # why: the planner rejects its one row (811 GB of BF16 weights on one 80 GB H100), and which line
    with pytest.raises(InputError, match="at least one predictable row \\(the planner rejects every one; line 2: "):
        calibrate_update([str(path)])


def test_the_refit_skips_them_too(tmp_path):
    # --refit on dev.csv alone, with and without the five rejected rows (no cross-validation, no
    # bands): the same rows fitted, the same factors, and the five among the skipped
    from tokenplan.api.calibrate import calibrate

    plain = calibrate([str(DEV)], cross_validation=False).summary()
    plus = calibrate([str(_with_rejected_rows(tmp_path))], cross_validation=False).summary()
    assert plus.n == plain.n and plus.skipped == plain.skipped + ADDED
    assert plus.factors == plain.factors
