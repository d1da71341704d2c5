"""``plan --draft-model``: the one drafter checkpoint named goes with the one speculative method it
drafts for, in the searched options and in the ``--current`` setup alike."""

from __future__ import annotations

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.errors import InputError


def test_one_drafter_is_refused_for_two_drafting_methods():
    # a DFlash checkpoint named for --spec eagle3 and --spec dflash: the eagle3 launch would load it
    # as an EAGLE-3 head ('{"method":"eagle3","model":"z-lab/Qwen3-8B-DFlash-b16",…}')
    req = PlanRequest(
        model="qwen3-8b",
        gpus=("8xh100-sxm",),
        engine="vllm",
        specs=("eagle3:3", "dflash:2"),
        draft_model="z-lab/Qwen3-8B-DFlash-b16",
    )
    with pytest.raises(InputError, match=r"draft_model.*dflash and eagle3"):
        plan(req)


def test_the_current_setup_runs_the_drafter_named(tmp_path):
    # Llama-3.1-8B with an EAGLE-3 head of 4 layers and a 28,672-wide FFN (the estimate from the
    # target's shape: 1 layer, 14,336): its weights and 4 layers × 8 KV heads × 2 × 128 × 2 B =
    # 16,384 B per token (estimate: 4,096 B) leave the current setup a smaller batch
    import json

    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest

    drafter = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": 4096,
        "num_hidden_layers": 4,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 28672,
        "draft_vocab_size": 32000,
    }
    (tmp_path / "config.json").write_text(json.dumps(drafter))
    current = "engine=vllm,tp=1,spec=eagle3:3,weight-dtype=bf16,kv-dtype=bf16"
    job = dict(isl=1024, osl=2500, isl_sigma=0.8, osl_sigma=1.0, isl_cap=16384, osl_cap=32768)  # plan's default
    base = dict(
        model="llama-3.1-8b", gpu="h100-sxm", num_gpus=8, engine="vllm", weight_dtype="bf16", kv_dtype="bf16", **job
    )
    read = predict(PredictRequest(**base, spec="eagle3:3", draft_model=str(tmp_path)))
    estimated = predict(PredictRequest(**base, spec="eagle3:3"))
    got = plan(
        PlanRequest(
            model="llama-3.1-8b",
            gpus=("8xh100-sxm",),
            engine="vllm",
            specs=("eagle3:3",),
            draft_model=str(tmp_path),
            current=current,
        )
    ).to_json()["current"]
    assert got["batch_per_replica"] == read.batch_per_replica < estimated.batch_per_replica
    assert got["predicted_tok_s"] == pytest.approx(read.output_tok_s_total)
    # --draft-model with only --current loading a drafter is the current setup's drafter, not refused
    alone = plan(
        PlanRequest(
            model="llama-3.1-8b", gpus=("8xh100-sxm",), engine="vllm", draft_model=str(tmp_path), current=current
        )
    )
    assert alone.to_json()["current"]["batch_per_replica"] == read.batch_per_replica
