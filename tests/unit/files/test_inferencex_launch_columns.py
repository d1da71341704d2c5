"""The launch columns of our copy of ``inferencex-dev.csv``: ``memory_fraction`` and its last three,
``chunked_prefill_size``, ``disable_radix_cache`` and ``ssm_dtype``, as the InferenceX script each
SGLang run's note names (``config K @ InferenceX main C``) set ``--mem-fraction-static``,
``--chunked-prefill-size``, ``--disable-radix-cache`` and ``--mamba-ssm-dtype`` at the row's TP,
concurrency and ISL/OSL (scripts and commits in the data README). Each case quotes the script
lines (SemiAnalysisAI/InferenceX at the commit named); no DeepSeek-R1 script passes
``--mamba-ssm-dtype`` (the model has no SSM state), so ``ssm_dtype`` stays blank.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from tokenplan.api.resolve import measurement_request
from tokenplan.files.measurements import read_measurements

IX = Path(__file__).parents[3] / "data" / "ground-truth" / "inferencex-dev.csv"
_NOTE = re.compile(r"config (\S+) @ InferenceX main (\w+)")


def _rows() -> dict:
    return {m.row_id: m for m in read_measurements(str(IX)).rows}


def _pins() -> dict:
    """Row id -> (config key, commit) from the row's note, where the note names one."""
    with IX.open(newline="") as fh:
        return {r["id"]: m.groups() for r in csv.DictReader(fh) if (m := _NOTE.search(r["notes"]))}


def _launch(m) -> tuple:
    return (m.memory_fraction, m.chunked_prefill_size, m.disable_radix_cache, m.ssm_dtype)


def test_a_fp4_mi355x_8k1k_run_at_64_takes_the_scripts_small_prefill_chunk():
    # id 3266: dsr1-fp4-mi355x-sglang @ 0291997555, TP 8, 8k1k, concurrency 64;
    # benchmarks/dsr1_fp4_mi355x_docker.sh (launch_mi355x-amd.sh runs "..._mi355x_docker.sh"):
    # "PREFILL_SIZE=196608", 'if [[ "$ISL" == "8192" && "$OSL" == "1024" ]]; then if [[ "$CONC"
    # -gt "32" ]]; then PREFILL_SIZE=32768', "--chunked-prefill-size=$PREFILL_SIZE",
    # "--mem-fraction-static=0.8", "--disable-radix-cache": 64 > 32, so 32768
    rows = _rows()
    assert _pins()["3266"] == ("dsr1-fp4-mi355x-sglang", "0291997555")
    row = rows["3266"]
    assert (row.tp, row.concurrency) == (8, 64)
    assert _launch(row) == (0.8, 32768, True, None)
    req = measurement_request(row)
    assert (req.memory_fraction, req.chunked_prefill_size, req.disable_radix_cache, req.ssm_dtype) == (
        0.8,
        32768,
        True,
        None,
    )
    # id 3265, the same run at concurrency 16 (not > 32): the default 196608
    assert _launch(rows["3265"]) == (0.8, 196608, True, None)


def test_each_script_group_reads_its_scripts_flags():
    rows, pins = _rows(), _pins()

    def group(config: str, commits: tuple[str, ...] = (), tp: int | None = None, long_in: bool | None = None):
        got = {
            _launch(m)
            for i, m in rows.items()
            if i in pins
            and pins[i][0] == config
            and (not commits or pins[i][1] in commits)
            and (tp is None or m.tp == tp)
            and (long_in is None or (m.isl_tokens > 4096) == long_in)
        }
        assert got, (config, commits, tp, long_in)
        return got

    # dsr1_fp4_b200_docker.sh (2025-11 to 2026-01) and single_node/dsr1_fp4_b200.sh (2026-03 to 05):
    # "--mem-fraction-static 0.85", "--chunked-prefill-size 16384", "--disable-radix-cache"
    assert group("dsr1-fp4-b200-sglang") == {(0.85, 16384, True, None)}
    # single_node/dsr1_fp4_b200_mtp.sh @ 5c9f96a177: "--mem-fraction-static 0.82",
    # "--chunked-prefill-size 16384 --max-prefill-tokens 16384"
    assert group("dsr1-fp4-b200-sglang-mtp") == {(0.82, 16384, True, None)}
    # dsr1_fp8_b200_docker.sh @ 0291997555 (no TP branch): "--mem-fraction-static 0.82 ...
    # --chunked-prefill-size 32768"
    old = ("0291997555", "12d601c4ce", "d27433dffb", "f6a9d0b6ad")
    assert group("dsr1-fp8-b200-sglang", old) == {(0.82, 32768, True, None)}
    # dsr1_fp8_b200{_docker,_slurm}.sh @ fba01e757c, single_node/dsr1_fp8_b200.sh @ b4202bb6eb ...
    # d4948f9937: "if [[ $TP -eq 8 ]] ... MEM_FRAC_STATIC=0.82 CHUNKED_PREFILL_SIZE=32768",
    # "elif [[ $TP -eq 4 ]] ... MEM_FRAC_STATIC=0.95 CHUNKED_PREFILL_SIZE=8192"
    branch = ("fba01e757c", "b4202bb6eb", "5c9f96a177", "801621f16e", "adbaae52dd", "d4948f9937")
    assert group("dsr1-fp8-b200-sglang", branch, tp=8) == {(0.82, 32768, True, None)}
    assert group("dsr1-fp8-b200-sglang", branch, tp=4) == {(0.95, 8192, True, None)}
    # dsr1_fp8_b200_mtp.sh @ 8a02464b85 and single_node/…: "MEM_FRAC_STATIC=0.82",
    # "CHUNKED_PREFILL_SIZE=16384"
    assert group("dsr1-fp8-b200-sglang-mtp") == {(0.82, 16384, True, None)}
    # dsr1_fp8_h200{_slurm,}.sh, single_node/dsr1_fp8_h200{,_mtp}.sh, both ISL/OSL branches:
    # "--disable-radix-cache", "--chunked-prefill-size 32768 --max-prefill-tokens 32768
    # --mem-fraction-static 0.82"
    assert group("dsr1-fp8-h200-sglang") | group("dsr1-fp8-h200-sglang-mtp") == {(0.82, 32768, True, None)}
    # dsr1_fp8_mi300x_docker.sh and _slurm.sh (the pool holds both runner kinds; both scripts say the
    # same): "--mem-fraction-static=0.8", "--chunked-prefill-size=196608"; dsr1_fp8_mi300x.sh from
    # 2e51194c22 / 38546bb90e on: "--chunked-prefill-size=131072"
    docker_era = ("0291997555", "70c1eceb6b", "f6a9d0b6ad")
    later = ("2e51194c22", "38546bb90e", "f267602ff7", "f5d7fa44ce")
    assert group("dsr1-fp8-mi300x-sglang", docker_era) == {(0.8, 196608, True, None)}
    assert group("dsr1-fp8-mi300x-sglang", later) == {(0.8, 131072, True, None)}
    # every dsr1_fp8_mi355x script and _mtp: "--chunked-prefill-size 196608",
    # "--mem-fraction-static 0.8 --disable-radix-cache"
    assert group("dsr1-fp8-mi355x-sglang") | group("dsr1-fp8-mi355x-sglang-mtp") == {(0.8, 196608, True, None)}
    # dsr1_fp4_mi355x scripts and _mtp: PREFILL_SIZE 32768 only at 8k1k with CONC > 32
    for config in ("dsr1-fp4-mi355x-sglang", "dsr1-fp4-mi355x-sglang-mtp"):
        assert group(config, long_in=False) == {(0.8, 196608, True, None)}
    fp4 = ("dsr1-fp4-mi355x-sglang", "dsr1-fp4-mi355x-sglang-mtp")
    long_runs = [m for i, m in rows.items() if pins.get(i, ("",))[0] in fp4 and m.isl_tokens > 4096]
    assert {(m.concurrency > 32, _launch(m)[1]) for m in long_runs} == {(False, 196608), (True, 32768)}


def test_rows_whose_script_is_not_known_stay_blank():
    rows, pins = _rows(), _pins()
    blank = (None, None, None, None)
    # TensorRT-LLM rows: no SGLang launch
    trt = [m for m in rows.values() if m.engine == "trtllm"]
    assert trt and all(_launch(m) == blank for m in trt)
    # the 22 Qwen3.5 points quoted from PR tables (published 2026-08-31 to 09-14) name only the
    # script commit 843c6254 (2026-08-21, the newest main commit in the mirror read): the script that
    # ran is not known, so blank although the script there sets e.g. "--mamba-ssm-dtype bfloat16";
    # and id 3309, an AMD engineer's local run (no config): 23 SGLang rows without a pin
    qwen = [m for m in rows.values() if m.engine == "sglang" and m.model.startswith("qwen3.5")]
    assert len(qwen) == 23 and all(_launch(m) == blank and m.row_id not in pins for m in qwen)
    # every pinned SGLang row is filled: 526
    pinned = [m for i, m in rows.items() if i in pins and m.engine == "sglang"]
    assert len(pinned) == 526 and all(None not in _launch(m)[:3] for m in pinned)


def test_max_running_is_the_scripts_running_request_cap():
    # ``max_running`` (SGLang's --max-running-requests) as each group's script sets it at the row's
    # point; blank where the script passes no flag (SGLang's own default then applies).
    rows, pins = _rows(), _pins()

    def caps(config: str, **where: object) -> set:
        return {
            m.max_running
            for i, m in rows.items()
            if i in pins and pins[i][0] == config and all(getattr(m, k) == v for k, v in where.items())
        }

    # dsr1_fp8_h200_slurm.sh @ 0291997555 (and its later single_node copies):
    # 'if [[ $ISL -eq 1024 && $OSL -eq 1024 ]]' ... "--max-running-requests 512 --cuda-graph-max-bs 512",
    # else "--max-running-requests 256 --cuda-graph-max-bs 256"
    assert caps("dsr1-fp8-h200-sglang", isl_tokens=922, osl_tokens=922) == {512}
    assert caps("dsr1-fp8-h200-sglang", isl_tokens=7373, osl_tokens=922) == {256}
    assert caps("dsr1-fp8-h200-sglang", isl_tokens=922, osl_tokens=7373) == {256}
    # single_node/dsr1_fp8_b200.sh @ b4202bb6eb: "if [[ $TP -eq 8 ]]; then ... MAX_RUNNING_REQUESTS=128",
    # "elif [[ $TP -eq 4 ]]; then ... MAX_RUNNING_REQUESTS=32", "--max-running-requests $MAX_RUNNING_REQUESTS"
    assert caps("dsr1-fp8-b200-sglang", tp=8) == {128}
    assert caps("dsr1-fp8-b200-sglang", tp=4) == {32}
    # single_node/dsr1_fp8_mi355x_mtp.sh @ cf0aa5ba66: 'MAX_RUNNING_REQUESTS="${MAX_RUNNING_REQUESTS:-$CONC}"'
    # (no workflow or runner sets it), "--max-running-requests "$MAX_RUNNING_REQUESTS"": the concurrency
    mtp = [m for i, m in rows.items() if pins.get(i, ("",))[0] == "dsr1-fp8-mi355x-sglang-mtp"]
    assert mtp and all(m.max_running == m.concurrency for m in mtp)
    # dsr1_fp8_mi300x*.sh and dsr1_fp4_mi355x*.sh pass no --max-running-requests: blank
    assert caps("dsr1-fp8-mi300x-sglang") == {None} and caps("dsr1-fp4-mi355x-sglang") == {None}
