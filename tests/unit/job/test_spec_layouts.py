"""A speculative method the engine refuses on a layout is a rejection, not a launch that cannot
start: SGLang's ``_handle_dflash`` (python/sglang/srt/arg_groups/speculative_hook.py) raises
"Currently DFLASH speculative decoding only supports pp_size == 1." and "... does not support dp
attention." (a helper reading the launch commands)."""

from __future__ import annotations

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.config import Rejection


def test_sglang_dflash_with_pipeline_stages_is_rejected_and_vllm_runs_it():
    ask = dict(model="qwen3-8b", gpu="h100-sxm", num_gpus=2, pp=2, spec="dflash:8")
    ev = resolve(PredictRequest(**ask)).evaluate()
    assert isinstance(ev, Rejection) and ev.kind == "layout"
    assert ev.reason.startswith("SGLang's DFLASH does not run with pipeline parallelism (PP2)")
    assert not isinstance(resolve(PredictRequest(**ask, engine="vllm")).evaluate(), Rejection)
    assert not isinstance(resolve(PredictRequest(**{**ask, "pp": 1, "tp": 2})).evaluate(), Rejection)
