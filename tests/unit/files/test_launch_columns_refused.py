"""Launch columns a row states that its prediction would read and then ignore, or misread, are
refused with one line naming the column, the value and what is allowed (``validate``/``calibrate``
skip the row; ``predict``/``memory`` exit with the message):

* ``ssm_dtype`` (``--ssm-dtype``) on a model without linear-attention state: its state bytes are 0
  whatever the dtype, so any name (even ``float64``) was accepted and changed nothing;
* ``disable_radix_cache`` (``--disable-radix-cache``) with vLLM or TensorRT-LLM: SGLang's flag, it
  was accepted and changed nothing;
* ``disable_radix_cache`` true with ``max_running`` blank: a measured launch without
  ``--max-running-requests`` keeps SGLang's own cap (48 with speculative decoding, S5 in
  ``engines/sglang.py``), but the row was predicted with the plan's raised cap (what ``predict
  --disable-radix-cache`` means: the plan's launch then writes the cap). On a hybrid model SGLang
  then splits state and KV by ``--mamba-full-memory-ratio`` (docs/engine-facts.md, SGLang S3),
  which the memory model does not describe, so the row is skipped with what to fill in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenplan.api.resolve import PredictRequest, resolve, resolve_file
from tokenplan.calibration.validate import Case
from tokenplan.catalog import shipped_efficiency
from tokenplan.errors import InputError
from tokenplan.files.measurements import read_measurements
from tokenplan.job.evaluate import Evaluation, evaluate

HEADER = (
    "id,engine,model,gpu,num_gpus,tp,weight_dtype,isl,osl,concurrency,output_tok_s_per_gpu,spec_decode,"
    "max_running,disable_radix_cache,ssm_dtype\n"
)


def _resolved(tmp_path: Path, *rows: str) -> tuple[dict, dict]:
    path = tmp_path / "m.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    cases, skipped = resolve_file(read_measurements(str(path)))
    return {c.measurement.row_id: c for c in cases}, {s.row_id: s.reason for s in skipped}


def _evaluated(case: Case) -> Evaluation:
    efficiency = shipped_efficiency().resolve(case.engine, case.architecture)
    ev = evaluate(case.model, case.gpu, case.config, efficiency, case.isl, case.osl, case.concurrency_per_replica)
    assert isinstance(ev, Evaluation), ev
    return ev


def test_an_ssm_dtype_on_a_model_without_recurrent_state_is_refused(tmp_path: Path) -> None:
    cases, skipped = _resolved(
        tmp_path,
        "r1,sglang,deepseek-r1,b200,8,8,fp8,1024,1024,64,300,,,,bfloat16",
        "q,sglang,qwen3.5-397b-a17b,b200,4,4,fp8,1024,1024,64,300,,,,bfloat16",
    )
    assert skipped == {
        "r1": "ssm_dtype 'bfloat16' is not allowed (allowed: only for a model with linear-attention (recurrent) "
        "state; deepseek-r1 has none)"
    }
    assert cases["q"].config.ssm_dtype == "bfloat16"
    base = {"model": "deepseek-r1", "gpu": "b200", "num_gpus": 8, "tp": 8, "weight_dtype": "fp8"}
    with pytest.raises(InputError, match=r"^ssm_dtype 'float64' is not allowed \(allowed: bf16, bfloat16, float16"):
        resolve(PredictRequest(**base, ssm_dtype="float64"))
    with pytest.raises(InputError, match="deepseek-r1 has none"):
        resolve(PredictRequest(**base, ssm_dtype="float32"))


def test_the_ssm_dtype_is_read_in_any_case_and_named_once(tmp_path: Path) -> None:
    base = {"model": "qwen3.5-397b-a17b", "gpu": "b200", "num_gpus": 4, "tp": 4, "weight_dtype": "fp8"}
    assert resolve(PredictRequest(**base, ssm_dtype=" BF16 ")).config.ssm_dtype == "bf16"
    with pytest.raises(InputError, match=r"^ssm_dtype '' is not allowed"):  # an empty --ssm-dtype is no dtype
        resolve(PredictRequest(**base, ssm_dtype=""))


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_disable_radix_cache_is_an_sglang_flag(tmp_path: Path, engine: str) -> None:
    cases, skipped = _resolved(
        tmp_path,
        f"on,{engine},gpt-oss-120b,b200,2,2,,1024,1024,64,300,,,true,",
        f"off,{engine},gpt-oss-120b,b200,2,2,,1024,1024,64,300,,,false,",
    )
    assert skipped == {
        "on": f"disable_radix_cache True is not allowed (allowed: only with --engine sglang; the engine is {engine})"
    }
    assert set(cases) == {"off"}


def test_a_radix_cache_off_without_a_cap_keeps_sglangs_speculative_cap(tmp_path: Path) -> None:
    # DeepSeek-R1 has no recurrent state: --disable-radix-cache changes no pool, and with EAGLE/MTP
    # and no --max-running-requests SGLang runs at most 48 (S5), as the same row without the flag.
    cases, skipped = _resolved(
        tmp_path,
        "flag,sglang,deepseek-r1,b200,8,8,fp8,1024,1024,128,300,mtp (steps=2),,true,",
        "none,sglang,deepseek-r1,b200,8,8,fp8,1024,1024,128,300,mtp (steps=2),,,",
        "capped,sglang,deepseek-r1,b200,8,8,fp8,1024,1024,128,300,mtp (steps=2),128,true,",
    )
    assert not skipped
    caps = {row: _evaluated(case).settings.max_running for row, case in cases.items()}
    assert caps == {"flag": 48, "none": 48, "capped": 128}
    assert cases["flag"].config.max_running == cases["none"].config.max_running
    # an explicit cap with the flag stays as launched (one state slot per running request)
    assert (cases["capped"].config.max_running.requests, cases["capped"].config.max_running.lifted) == (128, True)


def test_a_hybrid_row_with_the_radix_cache_off_and_no_cap_says_what_to_fill_in(tmp_path: Path) -> None:
    cases, skipped = _resolved(
        tmp_path,
        "nocap,sglang,qwen3.5-397b-a17b,b200,4,4,fp8,1024,1024,128,300,,,true,bfloat16",
        "cap,sglang,qwen3.5-397b-a17b,b200,4,4,fp8,1024,1024,128,300,,128,true,bfloat16",
    )
    assert set(cases) == {"cap"}
    assert skipped["nocap"].startswith(
        "disable_radix_cache true without max_running on hybrid model qwen3.5-397b-a17b: SGLang then sizes "
        "the state slots by --mamba-full-memory-ratio"
    )
    assert "fill max_running" in skipped["nocap"] and "\n" not in skipped["nocap"]
