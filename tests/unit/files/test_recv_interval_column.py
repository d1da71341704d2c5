"""The ``scheduler_recv_interval`` column (SGLang ``--scheduler-recv-interval`` as the run's launch
script set it) is read, checked and carried to the prediction.

Values checked against the project's copy of ``inferencex-dev.csv`` come from the rows' launch
scripts: SemiAnalysisAI/InferenceX ``benchmarks/dsr1_fp8_b200_mtp.sh`` @ 8a02464b85 ("if [[ $CONC
-ge 16 ]]; then SCHEDULER_RECV_INTERVAL=30 else SCHEDULER_RECV_INTERVAL=10", passed as
``--scheduler-recv-interval $SCHEDULER_RECV_INTERVAL``) for rows 2001 (concurrency 4) and 2002
(concurrency 64); the H200 script at the same commits, ``benchmarks/dsr1_fp8_h200.sh``, does not
pass the flag.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.api.resolve import PredictRequest, measurement_request, resolve
from tokenplan.errors import InputError
from tokenplan.files.measurements import read_measurements

IX = Path(__file__).parents[3] / "data" / "ground-truth" / "inferencex-dev.csv"

HEADER = "id,engine,model,gpu,num_gpus,tp,isl,osl,concurrency,output_tok_s_per_gpu,scheduler_recv_interval\n"


def test_the_inferencex_b200_rows_carry_their_scripts_interval():
    rows = {m.row_id: m for m in read_measurements(str(IX)).rows}
    assert (rows["2001"].concurrency, rows["2001"].scheduler_recv_interval) == (4, 10)
    assert (rows["2002"].concurrency, rows["2002"].scheduler_recv_interval) == (64, 30)
    h200 = [m for m in rows.values() if m.engine == "sglang" and m.gpu == "h200"]
    assert h200 and all(m.scheduler_recv_interval is None for m in h200)
    # the launch's interval reaches the prediction, and its engine settings
    assert measurement_request(rows["2002"]).scheduler_recv_interval == 30


def test_the_column_reads_whole_numbers_and_skips_others_with_one_line(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(
        HEADER
        + "1,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,30\n"
        + "2,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,\n"
        + "3,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,2.5\n"
        + "4,sglang,deepseek-r1,b200,8,8,922,922,64,372.8,0\n"
    )
    data = read_measurements(str(path))
    assert [m.scheduler_recv_interval for m in data.rows] == [30, None]
    assert [s.reason for s in data.skipped] == [
        "malformed: column scheduler_recv_interval value '2.5' is not a whole number ≥ 1 (or blank)",
        "malformed: column scheduler_recv_interval value '0' is not a whole number ≥ 1 (or blank)",
    ]


def test_the_interval_is_an_sglang_option_and_reaches_its_settings():
    base = {"model": "deepseek-r1", "gpu": "b200", "num_gpus": 8, "tp": 8, "weight_dtype": "fp8", "concurrency": 64}
    scenario = resolve(PredictRequest(**base, scheduler_recv_interval=30))
    assert scenario.config.scheduler_recv_interval == 30
    with pytest.raises(InputError, match="scheduler_recv_interval.*only with --engine sglang; the engine is vllm"):
        resolve(PredictRequest(**base, engine="vllm", scheduler_recv_interval=30))
    with pytest.raises(InputError, match="scheduler_recv_interval.*a whole number of iterations ≥ 1"):
        resolve(PredictRequest(**base, scheduler_recv_interval=0))
