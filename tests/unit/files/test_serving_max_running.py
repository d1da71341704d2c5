"""The ``max_running`` column of our copy of ``serving-dev.csv`` (last column): the launch's
``--max-running-requests`` as the InferenceX script of each pinned SGLang run set it (groups and
commits in the data README), read as ``dev.csv``'s is. Each case quotes the script line.
"""

from __future__ import annotations

from pathlib import Path

from tokenplan.api.resolve import measurement_request
from tokenplan.files.measurements import read_measurements

SERVING = Path(__file__).parents[3] / "data" / "ground-truth" / "serving-dev.csv"


def _rows() -> dict:
    return {m.row_id: m for m in read_measurements(str(SERVING)).rows}


def test_the_scripts_caps_reach_the_rows():
    rows = _rows()
    # benchmarks/single_node/dsr1_fp8_b200_mtp.sh @ 12ba0ae0: "MAX_RUNNING_REQUESTS=512"
    # (the -mtp run of 2026-03-25 at concurrency 128, TP 8)
    mtp = rows["2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c128_tp8_0_ep1_0_300"]
    assert (mtp.spec, mtp.max_running) == ("mtp:2", 512)
    assert measurement_request(mtp).max_running == 512
    # benchmarks/single_node/qwen3.5_fp8_b200_mtp.sh @ 35d4bb36: "MAX_RUNNING_REQUESTS=$CONC"
    qwen = rows["2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c256_tp4_ep1_1957"]
    assert (qwen.concurrency, qwen.max_running) == (256, 256)
    # benchmarks/single_node/dsr1_fp8_h200.sh @ 12ba0ae0: 1k1k "--max-running-requests 512",
    # otherwise "--max-running-requests 256"
    h200 = [m for m in rows.values() if m.engine == "sglang" and m.gpu == "h200" and m.model.startswith("deepseek")]
    dated = [m for m in h200 if m.max_running is not None]
    # (lengths as the reader takes them: the mean of InferenceX's draw on [0.8 L, L], (int(0.8 L) + L) / 2:
    # 921.5 for L = 1,024 and 7,372.5 for 8,192; test_serving_run_columns.py)
    assert dated and {(m.isl_tokens, m.osl_tokens, m.max_running) for m in dated} <= {
        (921.5, 921.5, 512),
        (921.5, 7372.5, 256),
        (7372.5, 921.5, 256),
    }


def test_rows_whose_launch_is_not_known_keep_the_engine_default():
    rows = _rows()
    # not InferenceX runs (a local gap-analysis checkout): no script, no cap stated
    local = [m for m in rows.values() if m.engine == "sglang" and m.model == "qwen3-32b"]
    assert local and all(m.max_running is None for m in local)
    # glm5_fp8_h200.sh @ ebb48d4b passes no --max-running-requests: blank
    glm = [m for m in rows.values() if m.engine == "sglang" and m.model == "glm-5" and m.gpu == "h200"]
    assert glm and all(m.max_running is None for m in glm)
