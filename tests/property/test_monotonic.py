"""Invariants of the performance model, as hypothesis properties over the one evaluation path
that ``predict`` and ``plan`` share (``tokenplan.job.evaluate.evaluate``):

- more memory bandwidth or more tensor FLOP/s never lowers the predicted throughput;
- more GPU memory never lowers the number of sequences that run at once;
- with speculative decoding off, no prediction exceeds the physical roofline bound — the one
  the model reports, and one computed here independently from parameter counts and datasheet
  peaks;
- a TP degree that does not divide the attention heads is rejected, with its reason.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tokenplan.api.predict import predict
from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.arch.params import param_counts
from tokenplan.catalog import load_engine, load_gpu, load_model
from tokenplan.job.evaluate import Config, Evaluation, Rejection, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.layout import Layout, layout_rejection
from tokenplan.perf.memory import weight_bytes_per_gpu
from tokenplan.units import Dtype

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])

# Models that fit one to eight GPUs of 48–192 GB: dense GQA, MoE, sliding-window, hybrid GDN.
MODELS = [
    "llama-3.1-8b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "mixtral-8x7b",
    "gpt-oss-20b",
    "qwen3.6-27b",
    "qwen3.6-35b-a3b",
]
GPUS = ["h100-sxm", "h200", "b200", "a100-80gb", "rtx-pro-6000", "l40s", "mi300x"]
ENGINES = ["sglang", "vllm", "trtllm"]

EFF = Efficiency()
REL = 1e-9  # float round-off allowance on "never lower"


@st.composite
def setups(draw, spec_off: bool = True, engines=ENGINES):
    """(model, gpu, config, isl, osl, concurrency per replica) of a plausible configuration."""
    model = load_model(draw(st.sampled_from(MODELS)))
    gpu = load_gpu(draw(st.sampled_from(GPUS)))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    weight = draw(st.sampled_from([Dtype.BF16, Dtype.FP8]))
    kv = draw(st.sampled_from([Dtype.BF16, Dtype.FP8]))
    engine = load_engine(draw(st.sampled_from(engines)))
    isl = LengthDist(draw(st.integers(64, 8192)), draw(st.sampled_from([0.0, 0.8])), None)
    osl = LengthDist(draw(st.integers(64, 8192)), draw(st.sampled_from([0.0, 1.0])), None)
    concurrency = draw(st.one_of(st.none(), st.integers(1, 2048).map(float)))
    return model, gpu, Config(Layout(tp=tp), weight, kv, engine), isl, osl, concurrency


def _runs(model, gpu, config, isl, osl, concurrency) -> Evaluation:
    result = evaluate(model, gpu, config, EFF, isl, osl, concurrency)
    assume(isinstance(result, Evaluation))
    return result


# ---------------------------------------------------------------- faster hardware is never slower
@PROPERTY
@given(setups(), st.floats(1.0, 4.0))
def test_more_memory_bandwidth_is_never_slower(setup, factor):
    model, gpu, config, isl, osl, conc = setup
    base = _runs(model, gpu, config, isl, osl, conc)
    faster = evaluate(
        model, dataclasses.replace(gpu, hbm_bytes_per_s=gpu.hbm_bytes_per_s * factor), config, EFF, isl, osl, conc
    )
    assert isinstance(faster, Evaluation)
    assert faster.output_tok_s_total >= base.output_tok_s_total * (1 - REL)


@PROPERTY
@given(setups(), st.floats(1.0, 4.0))
def test_more_tensor_flops_is_never_slower(setup, factor):
    model, gpu, config, isl, osl, conc = setup
    base = _runs(model, gpu, config, isl, osl, conc)
    flops = {k: v * factor for k, v in gpu.dense_flops_per_s.items()}
    faster = evaluate(model, dataclasses.replace(gpu, dense_flops_per_s=flops), config, EFF, isl, osl, conc)
    assert isinstance(faster, Evaluation)
    assert faster.output_tok_s_total >= base.output_tok_s_total * (1 - REL)


@PROPERTY
@given(setups(spec_off=False), st.floats(1.0, 4.0), st.sampled_from(["mtp:1", "mtp:3", "mtp:3:2.5"]))
def test_more_bandwidth_is_never_slower_with_speculative_decoding(setup, factor, spec_text):
    from tokenplan.perf.speculative import parse_spec

    model, gpu, config, isl, osl, conc = setup
    assume(model.mtp_layers > 0)
    config = dataclasses.replace(config, spec=parse_spec(spec_text))
    base = _runs(model, gpu, config, isl, osl, conc)
    faster = evaluate(
        model, dataclasses.replace(gpu, hbm_bytes_per_s=gpu.hbm_bytes_per_s * factor), config, EFF, isl, osl, conc
    )
    assert faster.output_tok_s_total >= base.output_tok_s_total * (1 - REL)


# ---------------------------------------------------------------- more memory, never fewer sequences
# SGLang's *default* mem_fraction_static is not monotonic in GPU memory: at its 160 GiB bucket
# edge the prefill chunk doubles (8,192 → 16,384 tokens) and the activation reserve grows by
# 1.5 MiB × 8,192 = 12 GiB, so a 160.5 GiB GPU keeps fewer KV tokens than a 159.5 GiB one. That
# is what SGLang does, not a physical law: the property holds memory_fraction fixed for SGLang,
# and uses vLLM's and TRT-LLM's fixed-fraction defaults as they are.
@PROPERTY
@given(setups(), st.floats(1.0, 3.0), st.floats(0.6, 0.9))
def test_more_memory_never_fits_fewer_sequences(setup, factor, fraction):
    model, gpu, config, isl, osl, conc = setup
    if config.engine.name == "sglang":
        config = dataclasses.replace(config, memory_fraction=fraction)
    base = _runs(model, gpu, config, isl, osl, conc)
    bigger = evaluate(
        model, dataclasses.replace(gpu, memory_bytes=gpu.memory_bytes * factor), config, EFF, isl, osl, conc
    )
    assert isinstance(bigger, Evaluation)
    assert bigger.steady.limits.limit >= base.steady.limits.limit
    assert bigger.memory.kv_capacity_tokens >= base.memory.kv_capacity_tokens * (1 - REL)


@PROPERTY
@given(setups(), st.floats(1.0, 3.0), st.floats(0.6, 0.9))
def test_a_model_that_fits_still_fits_on_a_larger_gpu(setup, factor, fraction):
    model, gpu, config, isl, osl, conc = setup
    config = dataclasses.replace(config, memory_fraction=fraction) if config.engine.name == "sglang" else config
    base = evaluate(model, gpu, config, EFF, isl, osl, conc)
    assume(isinstance(base, Evaluation))
    bigger = evaluate(
        model, dataclasses.replace(gpu, memory_bytes=gpu.memory_bytes * factor), config, EFF, isl, osl, conc
    )
    assert not isinstance(bigger, Rejection)


# ---------------------------------------------------------------- the roofline bound (speculative off)
@PROPERTY
@given(setups())
def test_prediction_never_exceeds_the_models_own_roofline(setup):
    model, gpu, config, isl, osl, conc = setup
    ev = _runs(model, gpu, config, isl, osl, conc)
    assert ev.steady.output_tok_s * config.layout.dp <= ev.steady.roofline_output_tok_s * config.layout.dp * (1 + REL)


DENSE_UNTIED = ["llama-3.1-8b", "qwen3-8b", "qwen3-32b", "qwen3.6-27b", "llama-3.3-70b"]


@PROPERTY
@given(
    st.sampled_from(DENSE_UNTIED),
    st.sampled_from(GPUS),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2]),
    st.sampled_from(["bf16", "fp8"]),
    st.sampled_from(ENGINES),
    st.integers(64, 8192),
    st.integers(64, 8192),
    st.one_of(st.none(), st.integers(1, 2048)),
)
def test_prediction_never_exceeds_an_independent_physical_bound(
    name, gpu_key, tp, dp, weight, engine, isl, osl, conc_per_replica
):
    """Bound per replica and decode step, for a dense model on one pipeline stage:

    step ≥ max(bytes every GPU must read: its weights less the embedding table, which is only
    indexed / peak HBM bandwidth,  2 · active parameters · batch / TP / the chip's highest dense
    FLOP/s of any format), so output ≤ DP · batch / step. Attention, KV and state traffic,
    communication and overheads only add time, so leaving them out keeps this a bound.
    """
    req = PredictRequest(
        model=name,
        gpu=gpu_key,
        num_gpus=tp * dp,
        tp=tp,
        weight_dtype=weight,
        engine=engine,
        isl=isl,
        osl=osl,
        concurrency=None if conc_per_replica is None else float(conc_per_replica * dp),
    )
    result = predict(req).to_json()
    assume("rejected" not in result)
    assert result["spec"] == "none"
    assert result["output_tok_s_total"] <= result["roofline_output_tok_s_total"] * (1 + REL)

    model, gpu = load_model(name), load_gpu(gpu_key)
    p = param_counts(model)
    assert not model.tie_word_embeddings and model.moe is None
    w_dtype = Dtype(weight)
    read_bytes = weight_bytes_per_gpu(model, Layout(tp=tp), w_dtype) - p.embedding * Dtype.BF16.bytes_per_element / tp
    batch = result["batch_per_replica"]
    step_s = max(
        read_bytes / gpu.hbm_bytes_per_s, 2 * p.active_matmul * batch / tp / max(gpu.dense_flops_per_s.values())
    )
    assert result["output_tok_s_total"] <= dp * batch / step_s * (1 + REL)


# ---------------------------------------------------------------- TP must divide the heads
@PROPERTY
@given(st.sampled_from(MODELS + ["deepseek-v3", "llama-3.1-405b", "qwen3-235b-a22b"]), st.integers(1, 16))
def test_tp_that_does_not_divide_the_attention_heads_is_rejected(name, tp):
    model = load_model(name)
    heads = model.attention.num_heads
    why = layout_rejection(model, Layout(tp=tp))
    if heads % tp:
        # the reason, then the TP values that split every head kind of the model (layout_rejection)
        assert why is not None and why.startswith(
            f"TP{tp} does not divide the {heads} attention heads (allowed TP: 1, "
        )
    else:
        assert why is None or "attention heads" not in why


@PROPERTY
@given(
    st.sampled_from(["llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b", "mixtral-8x7b"]), st.sampled_from([3, 5, 6, 7, 12])
)
def test_predict_rejects_tp_that_does_not_divide_the_heads(name, tp):
    # All four have 32 attention heads; 3, 5, 6, 7 and 12 do not divide 32.
    assert load_model(name).attention.num_heads == 32
    result = predict(PredictRequest(model=name, gpu="b200", num_gpus=tp, tp=tp)).to_json()
    rejected = result.pop("rejected")
    assert result == {"schema_version": 1}
    assert rejected.startswith(f"TP{tp} does not divide the 32 attention heads (allowed TP: 1, 2, 4, ")
    assert isinstance(resolve(PredictRequest(model=name, gpu="b200", num_gpus=tp, tp=tp)).evaluate(), Rejection)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_tp_that_divides_the_heads_is_accepted(tp):
    # Llama-3.1-8B: 32 heads, 8 KV heads; TP 1–8 divide both.
    assert layout_rejection(load_model("llama-3.1-8b"), Layout(tp=tp)) is None
