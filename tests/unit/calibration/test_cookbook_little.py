"""The SGLang Qwen3.6 cookbook's concurrency-1,024 cells: the planner's batch against the batch the
cookbook's own figures imply by Little's law (issue 28, point 1).

Measured (``dev.csv`` ids 106, 109, 115, 120, 125; sgl-project/sglang ``docs_new/src/snippets/
configs/qwen/qwen3.6-benchmarks.jsx`` @4b7077be): output tok/s = tokens_per_sec_per_gpu × 1,024 /
9,216, TPOT as stated; requests past their first token, on average, = output tok/s × TPOT:
702.4 × 39.28 ms = 27.6 (27B BF16 H200), 1,090.0 × 34.71 ms = 37.8 (27B FP8 H200),
1,803.2 × 29.35 ms = 52.9 (27B FP8 B200), 3,355.7 × 27.90 ms = 93.6 (35B-A3B FP8 H200),
5,316.2 × 26.07 ms = 138.6 (35B-A3B NVFP4 B200).

The replica holds more slots than that (SGLang sizes its state pool at ``--mem-fraction-static``
0.8 and caps the batch at state slots ÷ 5: 39, 54, 75, 122, 183): a whole batch is refilled in
back-to-back prefills before decoding resumes, and a request spends about half of each refill
before its own first token. The planner's own Little batch (its tok/s × its TPOT) must match.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.api.resolve import read_profile, resolve_file
from tokenplan.calibration.validate import predict_case
from tokenplan.files.measurements import read_measurements

DEV = Path(__file__).parents[3] / "data" / "ground-truth" / "dev.csv"
LITTLE = {"106": 27.6, "109": 37.8, "115": 52.9, "120": 93.6, "125": 138.6}


@pytest.fixture(scope="module")
def predicted():
    cases, _ = resolve_file(read_measurements(str(DEV)))
    table = read_profile(None).table
    return {
        c.measurement.row_id: (c, predict_case(c, table.resolve(c.engine, c.architecture)))
        for c in cases
        if c.measurement.row_id in LITTLE
    }


# Row 115 (Qwen3.6-27B FP8 on one B200) misses: the planner's tok/s × TPOT is 60.2 against 52.9
# (+14 %) since the per-format kernel factors moved its prefill share; strict, so it fails the day
# it passes and the mark must go
_CASES = [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason="+14 % on row 115 (issue 28, open)"))
    if r == "115"
    else r
    for r in sorted(LITTLE)
]


@pytest.mark.parametrize("row_id", _CASES)
def test_the_planners_little_batch_is_the_cookbooks_within_ten_percent(predicted, row_id):
    case, p = predicted[row_id]
    m = case.measurement
    measured = m.output_tok_s_per_gpu * m.tpot_s
    assert measured == pytest.approx(LITTLE[row_id], abs=0.05)  # the figures above
    assert p.output_tok_s_per_gpu * p.tpot_s == pytest.approx(measured, rel=0.10)
    # the slots the replica holds are more than that: a refill's prefills before the first token
    assert p.batch > 1.2 * measured
