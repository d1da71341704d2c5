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


def test_sglang_speculative_decoding_with_pipeline_stages_is_rejected():
    """Every speculative algorithm, not DFLASH alone: sgl-project/sglang
    python/sglang/srt/arg_groups/validation_hook.py ``check_pipeline_parallel_compat`` (called by
    ``check_server_args`` for ``cfg.pp_size > 1``) asserts ``cfg.disaggregation_mode == "prefill"``
    with the message "PP + speculative decoding (MTP) is only supported on prefill nodes
    (disaggregation-mode=prefill)" (the plain launch the plan prints is not a prefill node); older
    builds asserted "Pipeline parallelism is not compatible with overlap schedule, speculative
    decoding". test/registered/unit/server_args/test_server_args_pp_speculative.py pins it:
    ``test_eagle_rejects_pp_even_on_the_prefill_role`` (NEXTN resolves to EAGLE)."""
    for spec in ("mtp:1", "eagle3:3"):
        ask = dict(model="qwen3.6-27b", gpu="h100-sxm", num_gpus=2, pp=2, spec=spec)
        ev = resolve(PredictRequest(**ask)).evaluate()
        assert isinstance(ev, Rejection) and ev.kind == "spec", spec
        assert ev.reason.startswith("SGLang does not run speculative decoding"), ev.reason
        on_vllm = resolve(PredictRequest(**ask, engine="vllm")).evaluate()
        if spec.startswith("mtp"):  # vLLM's Qwen3_5MTP draft implements no SupportsPP (engines/mtp_support.py)
            assert isinstance(on_vllm, Rejection) and "does not implement pipeline parallelism" in on_vllm.reason
        else:
            assert not isinstance(on_vllm, Rejection)
        assert not isinstance(resolve(PredictRequest(**{**ask, "pp": 1, "tp": 2})).evaluate(), Rejection)
