"""When nothing runs because no configuration's weights fit, the reason said first (the answer's
"nothing runs" bullet, the table's bottleneck cell, the "Rejected on" line) is the configuration
nearest to fitting, not the first one generated."""

from __future__ import annotations

import re

from tokenplan.api.plan import PlanRequest, plan

# Llama-3.1-405B on 8× L40S (45 GiB each): FP8 weights (1 byte per parameter, half of BF16) split
# over all 8 GPUs of one replica (TP × PP = 8) are the smallest weights per GPU any layout holds,
# ~405.8 GB / 8 ≈ 47 GiB, still above what one L40S leaves usable, so nothing runs; TP1×DP8 BF16
# (each GPU the whole 756 GiB) is the farthest from fitting and was said first.
EIGHT_WAY = {"TP8", "TP4×PP2", "TP2×PP4", "TP1×PP8"}


def test_nothing_runs_names_the_configuration_nearest_to_fitting():
    result = plan(PlanRequest(model="llama-3.1-405b", gpus=("8xl40s",))).to_json()
    option = result["options"][0]
    assert option.get("best") is None  # nothing runs
    first = next(iter(option["rejected"]))
    m = re.match(r"(\S+), fp8 weights: does not fit: ([\d.]+) GiB of weights per GPU vs ([\d.]+) GiB usable", first)
    assert m is not None, first
    assert m.group(1) in EIGHT_WAY
    assert 40 < float(m.group(2)) < 55 and float(m.group(3)) < 45
    bullet = next(line for line in result["answer"] if "nothing runs" in line)
    assert bullet.startswith(f"8× l40s: nothing runs — {first}")


def test_the_rejected_line_says_how_many_reasons_it_leaves_out():
    from rich.console import Console

    from tokenplan.report.tables import plan_details

    result = plan(PlanRequest(model="llama-3.1-405b", gpus=("8xl40s",)))
    console = Console(width=100_000, record=True)
    console.print(plan_details(result))
    line = next(t for t in console.export_text().splitlines() if t.startswith("Rejected on"))
    # 10 splits of 8 GPUs (TP × PP: 1×1, 1×2, 1×4, 1×8, 2×1, 2×2, 2×4, 4×1, 4×2, 8×1) × 2 weight
    # formats (bf16, fp8) = 20 reasons; the line shows 4
    assert line.endswith("; 16 more reasons in --json (options[].rejected)")


def test_the_usable_memory_a_rejection_states_is_within_the_gpu():
    # DeepSeek-R1 FP8 on 2× B200 at TP1×PP2: ~671 GB / 2 ≈ 313 GiB of weights per GPU, against a
    # B200's 183,359 MiB = 179.06 GiB (catalog/gpus.yaml). TensorRT-LLM takes its fraction of what
    # weights and reserve leave, so the weights it could hold are the GPU less its reserve; the
    # message said "vs 190.1 GiB usable", more than the GPU has (a new-user pass).
    for engine in ("sglang", "vllm", "trtllm"):
        result = plan(PlanRequest(model="deepseek-r1", gpus=("2xb200",), engine=engine)).to_json()
        said = [
            m
            for reason in result["options"][0]["rejected"]
            if (m := re.search(r"([\d.]+) GiB of weights per GPU(?: \([^)]*\))? vs ([\d.]+) GiB usable", reason))
        ]
        assert said, engine  # every layout of 2 GPUs is refused for its weights
        for m in said:
            assert float(m.group(1)) > float(m.group(2)) and float(m.group(2)) < 179.06, (engine, m.group(0))


def test_a_dp_attention_launch_says_whose_cap_is_per_rank():
    # DeepSeek-R1 on 8× B200 launches TP8×EP8 with attention DP: SGLang's --max-running-requests
    # 3536 is the replica's (8 ranks × 442), vLLM's --max-num-seqs and TensorRT-LLM's
    # max_batch_size are each rank's; the plan printed them beside a "running cap 3531" unexplained
    from rich.console import Console

    from tokenplan.report.tables import plan_details

    result = plan(PlanRequest(model="deepseek-r1", gpus=("8xb200",)))
    assert "DP-attn" in result.options[0].chosen.layout  # type: ignore[union-attr]
    console = Console(width=100_000, record=True)
    console.print(plan_details(result))
    text = console.export_text()
    assert "SGLang's --max-running-requests is the replica's cap, split over its attention-DP ranks" in text
    assert "vLLM's --max-num-seqs and TensorRT-LLM's max_batch_size are each rank's" in text
