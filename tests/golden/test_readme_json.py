"""The README's ``--json`` examples print their result types exactly: each output reads back into
the type the command returns (:meth:`~tokenplan.results.JsonResult.from_json`) and that type writes
the same bytes again (keys in field order, ``schema_version`` first). The figures a user reads are
checked against relations derived by hand below, not against a frozen copy of the output (the
README's terminal examples are kept by ``tools/readme_outputs.py``). The commands run together
(one interpreter start each), so the module costs about one start per core.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tokenplan.job.results import MemoryResult, Prediction
from tokenplan.planning.results import PlanResult
from tokenplan.results import JsonResult

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, run_case  # noqa: E402

TYPES: dict[str, type[JsonResult]] = {"plan": PlanResult, "predict": Prediction, "memory": MemoryResult}
MiB = 1_048_576


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cwd = tmp_path_factory.mktemp("readme-json")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_case, args, cwd) for name, args in CASES.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_json_reads_back_into_its_type_and_writes_the_same_bytes(outputs: dict[str, str], name: str) -> None:
    kind = TYPES[CASES[name][0]]
    data = json.loads(outputs[name])
    assert list(data)[0] == "schema_version" and data["schema_version"] == kind.SCHEMA_VERSION
    back = kind.from_json(data, name)
    assert json.dumps(back.to_json(), indent=2) + "\n" == outputs[name]


@pytest.mark.parametrize("name", ["plan_default.json", "plan_8xb200_8xh200.json"])
def test_a_plans_days_dollars_and_tokens_agree(outputs: dict[str, str], name: str) -> None:
    p = PlanResult.from_json(json.loads(outputs[name]))
    # output tokens = samples × mean output length (tokens)
    assert p.job.output_tokens == pytest.approx(p.job.samples * p.job.osl_mean_tokens, rel=1e-12)
    for o in p.options:
        c = o.chosen
        assert c is not None and o.usd_per_gpu_hour is not None and c.usd is not None and c.usd_per_mtok is not None
        # GPU-hours = days × 24 h × GPUs; $ = GPU-hours × $/GPU-hour; $/Mtok = $ ÷ (output tokens ÷ 10^6)
        assert c.gpu_hours == pytest.approx(c.wall_days * 24 * o.count, rel=1e-12)
        assert c.usd == pytest.approx(c.gpu_hours * o.usd_per_gpu_hour, rel=1e-12)
        assert c.usd_per_mtok == pytest.approx(c.usd / (p.job.output_tokens / 1e6), rel=1e-12)
        # tok/s per GPU = tok/s over the option ÷ its GPUs
        assert c.output_tok_s_per_gpu == pytest.approx(c.output_tok_s_total / o.count, rel=1e-12)
        # the job at that rate takes at least output tokens ÷ tok/s (ramp-up and drain add to it)
        assert c.wall_days * 86_400 >= p.job.output_tokens / c.output_tok_s_total
    assert p.recommended is not None
    fastest = max((o for o in p.options if o.chosen), key=lambda o: o.chosen.output_tok_s_total)  # type: ignore[union-attr]
    assert p.recommended.option == fastest.option  # no deadline or budget: the fastest option


def test_deepseek_r1_memory_on_8_h200(outputs: dict[str, str]) -> None:
    m = MemoryResult.from_json(json.loads(outputs["memory_deepseek_r1_8xh200.json"]))
    # H200: nvidia-smi memory.total 143,771 MiB (catalog/gpus.yaml)
    assert m.gpu_bytes == 143_771 * MiB
    # MLA caches kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values per layer and token, 61 layers,
    # BF16 (2 bytes; deepseek-ai/DeepSeek-R1 config.json): 576 × 61 × 2 = 70,272 bytes; the latent is
    # not split by TP, so every GPU holds all of it
    assert m.kv_bytes_per_token == m.kv_bytes_per_token_per_gpu == 576 * 61 * 2 == 70_272
    # ISL 1,024 + OSL 1,024 = 2,048 tokens per whole request; the running count is taken at
    # ISL + OSL / 2 = 1,536 tokens (fixed lengths: a running request is half-way through its output)
    assert (m.context_tokens, m.running_context_tokens) == (2048, 1536)
    assert m.max_sequences == pytest.approx(m.kv_capacity_tokens / 2048, rel=1e-12)
    assert m.running_requests == int(m.kv_capacity_tokens // 1536)
    # the KV pool holds capacity whole tokens × bytes per token per GPU (under one token's bytes
    # left over); what the engine allocates sums to the GPU
    assert 0 <= m.kv_pool_bytes - m.kv_capacity_tokens * 70_272 < 70_272
    assert sum(m.allocation.values()) == pytest.approx(m.gpu_bytes, rel=1e-12)


def test_qwen_memory_on_one_b200(outputs: dict[str, str]) -> None:
    m = MemoryResult.from_json(json.loads(outputs["memory_qwen_b200_fp8.json"]))
    assert sum(m.allocation.values()) == pytest.approx(m.gpu_bytes, rel=1e-12)
    # a hybrid model (linear attention): a whole request needs KV for its context and one state slot,
    # so the sequences that fit are the fewer of KV capacity ÷ context and the state slots
    assert m.state_slots is not None and m.state_bytes_per_sequence > 0
    assert m.max_sequences == pytest.approx(min(m.kv_capacity_tokens / m.context_tokens, m.state_slots), rel=1e-12)


def test_the_prediction_figures_agree(outputs: dict[str, str]) -> None:
    p = Prediction.from_json(json.loads(outputs["predict_qwen_b200_fp8.json"]))
    # one B200, TP1: the total is the per-GPU figure; a replica runs at most what its state slots
    # hold (72 of the 364.6 the pool fits is below), and 1,024 requests asked for queue beyond that
    assert (p.num_gpus, p.tp, p.dp) == (1, 1, 1)
    assert p.output_tok_s_total == p.output_tok_s_per_gpu
    assert p.max_concurrency == p.batch_per_replica * p.dp
    assert p.state_slots is not None and p.batch_per_replica <= p.state_slots
    # each sequence yields one token per step without speculation, but a client times TPOT from its
    # first token, so the cycle's prefill before that token is in its TTFT (job.batching): tok/s =
    # batch·OSL/cycle ≤ batch ÷ TPOT = batch·OSL/(cycle − that prefill), and that prefill is at most
    # the cycle's prefill share, a few per cent for prompts this short against 1K-token answers
    ratio = p.output_tok_s_total / (p.batch_per_replica / (p.tpot_ms / 1e3))
    assert 0.9 < ratio <= 1.0 + 1e-12
    # every figure with a band lies inside it
    assert p.bands is not None
    for figure, band in p.bands.intervals.items():
        assert band.low <= getattr(p, figure) <= band.high, figure
