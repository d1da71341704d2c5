"""The held-out checks in ``data/checks/``: each reads as the case its source describes, its own
figures agree by Little's law, and it stays out of the fit's data (issue 28, "Rules")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.api.resolve import resolve_file
from tokenplan.files.measurements import read_measurements
from tokenplan.measurement import closed_loop_ratio

DATA = Path(__file__).resolve().parents[3] / "data"
GOOGLE = DATA / "checks" / "vllm-google-qwen35-27b-b200.csv"


def test_the_google_point_reads_as_96_vllm_replicas_with_mtp_k1():
    cases, skipped = resolve_file(read_measurements(str(GOOGLE)))
    assert skipped == []
    (case,) = cases
    m = case.measurement
    assert (case.engine, case.model.name, case.gpu.key) == ("vllm", "qwen3.5-27b", "b200")
    lay = case.config.layout
    assert (lay.tp, lay.dp, lay.num_gpus) == (1, 96, 96)
    assert case.config.spec is not None and case.config.spec.draft_tokens == 1
    # 16 clients × 1,024 in flight (m4r1k/vllm-1mtps README) over 96 replicas: 16,384 / 96
    assert case.concurrency_per_replica == pytest.approx(16_384 / 96)
    # 1,103,941 total tok/s (README, 12 nodes) × 512 output / 1,536 tokens / 96 GPUs = 3,833.13
    assert m.output_tok_s_per_gpu == pytest.approx(1_103_941 * 512 / 1_536 / 96, abs=0.05)
    assert m.tpot_s == pytest.approx(0.046)


def test_the_google_point_agrees_with_itself_by_littles_law():
    (case,) = resolve_file(read_measurements(str(GOOGLE)))[0]
    m = case.measurement
    assert m.tpot_s is not None and m.output_tok_s_per_gpu is not None and m.osl_tokens is not None
    # TTFT is not stated; with TTFT → 0 the 171 in flight per GPU allow at most
    # 171 × 512 / (512 × 0.046) = 3,710 tok/s/GPU, and the run measured 3,833: ratio 1.03.
    # The stated TPOT is a rounded "~46 ms"; 1.03 means every request in flight was running
    # (171–176 per GPU), none queued — the batch the check is predicted at.
    ratio = closed_loop_ratio(m.output_tok_s_per_gpu, 1, 16_384 / 96, m.osl_tokens, 1e-9, m.tpot_s)
    assert ratio == pytest.approx(3_833.1 / (16_384 / 96 / 0.046), rel=1e-3)
    assert 0.9 <= ratio <= 1.1


def test_held_out_checks_stay_out_of_the_fit():
    """No check's source or figure is in the ground truth the fit reads, and the shipped fit
    was not made from ``data/checks``."""
    truth = "\n".join(p.read_text(encoding="utf-8") for p in (DATA / "ground-truth").glob("*.csv"))
    assert "m4r1k/vllm-1mtps" not in truth and "1-million-tokens-per-second" not in truth
    fit = (DATA.parent / "src" / "tokenplan" / "catalog" / "efficiency.json").read_text(encoding="utf-8")
    assert "data/checks" not in fit
