"""Write the checked-in samples of other benchmarks' result files, one per tool, in each tool's
own schema (field names from their source, cited in ``tokenplan/files/bench_results.py``), and
one of ``tokenplan bench --save`` itself.

The numbers are derived by hand from the step law of ``tests/support/sim_server.py``
(step(B) = 10 ms + 0.15 ms·B, every running sequence gets one token per step) for a closed loop
of C = 1, 8, 32 requests, ISL 64, OSL 32, 64 requests per level:

    TPOT = step(C)                      10.15, 11.2, 14.8 ms
    TTFT = step(C) (the first step)     10.15, 11.2, 14.8 ms
    E2E  = OSL · step(C)                324.8, 358.4, 473.6 ms
    req/s = C / E2E                     3.0788, 22.321, 67.568
    output tok/s = OSL · req/s          98.52, 714.29, 2162.2
    duration = 64 / req/s               20.787, 2.8672, 0.9472 s

So a reader must recover these values, and a fit must recover the law. Run: ``python
tests/data/bench_results/make_samples.py`` (rewrites the files beside it).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
A_MS, B_MS, ISL, OSL, N = 10.0, 0.15, 64, 32, 64
LEVELS = (1, 8, 32)


def law(c: int) -> dict:
    step_ms = A_MS + B_MS * c
    e2e_ms = OSL * step_ms
    req_s = c / (e2e_ms / 1e3)
    return {
        "c": c,
        "step_ms": step_ms,
        "e2e_ms": e2e_ms,
        "req_s": req_s,
        "out_tok_s": OSL * req_s,
        "duration_s": N / req_s,
    }


def vllm(v: dict) -> dict:  # vllm bench serve --save-result --append-result (vllm/benchmarks/serve.py)
    out = {
        "date": "20260101-000000",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": "sim-model",
        "tokenizer_id": "sim-model",
        "num_prompts": N,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": v["c"],
        "duration": v["duration_s"],
        "completed": N,
        "failed": 0,
        "total_input_tokens": N * ISL,
        "total_output_tokens": N * OSL,
        "request_throughput": v["req_s"],
        "request_goodput": None,
        "output_throughput": v["out_tok_s"],
        "total_token_throughput": (ISL + OSL) * v["req_s"],
    }
    for name, ms in (("ttft", v["step_ms"]), ("tpot", v["step_ms"]), ("itl", v["step_ms"]), ("e2el", v["e2e_ms"])):
        out.update({f"mean_{name}_ms": ms, f"median_{name}_ms": ms, f"std_{name}_ms": 0.0, f"p99_{name}_ms": ms})
    return out


def sglang(v: dict) -> dict:  # python -m sglang.bench_serving --output-file (python/sglang/bench_serving.py)
    out = {
        "backend": "vllm-chat",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "max_concurrency": v["c"],
        "sharegpt_output_len": None,
        "random_input_len": ISL,
        "random_output_len": OSL,
        "random_range_ratio": 1.0,
        "duration": v["duration_s"],
        "completed": N,
        "total_input_tokens": N * ISL,
        "total_output_tokens": N * OSL,
        "total_output_tokens_retokenized": N * OSL,
        "request_throughput": v["req_s"],
        "input_throughput": ISL * v["req_s"],
        "output_throughput": v["out_tok_s"],
    }
    for stat in ("mean", "median", "p99"):
        out[f"{stat}_e2e_latency_ms"] = v["e2e_ms"]
    out["std_e2e_latency_ms"] = 0.0
    for name in ("ttft", "tpot", "itl"):
        out.update(
            {
                f"mean_{name}_ms": v["step_ms"],
                f"median_{name}_ms": v["step_ms"],
                f"std_{name}_ms": 0.0,
                f"p99_{name}_ms": v["step_ms"],
            }
        )
    out["concurrency"] = v["c"]
    return out


def aiperf(
    v: dict,
) -> dict:  # profile_export_aiperf.json (ai-dynamo/aiperf docs/tutorials/working-with-profile-exports.md)
    def dist(unit: str, value: float) -> dict:
        return {
            "unit": unit,
            "avg": value,
            "p50": value,
            "p90": value,
            "p99": value,
            "min": value,
            "max": value,
            "std": 0.0,
        }

    return {
        "request_throughput": {"unit": "requests/sec", "avg": v["req_s"]},
        "request_latency": dist("ms", v["e2e_ms"]),
        "time_to_first_token": dist("ms", v["step_ms"]),
        "inter_token_latency": dist("ms", v["step_ms"]),
        "output_token_throughput": {"unit": "tokens/sec", "avg": v["out_tok_s"]},
        "input_sequence_length": dist("tokens", ISL),
        "output_sequence_length": dist("tokens", OSL),
        "benchmark_duration": {"unit": "sec", "avg": v["duration_s"]},
        "request_count": {"unit": "requests", "avg": N},
        "total_isl": {"unit": "tokens", "avg": N * ISL},
        "total_osl": {"unit": "tokens", "avg": N * OSL},
        "was_cancelled": False,
        "error_summary": [],
        "input_config": {
            "endpoint": {"model_names": ["sim-model"], "type": "chat", "streaming": True},
            "loadgen": {"concurrency": v["c"], "request_count": N},
        },
    }


def guidellm(levels: list[dict]) -> dict:  # benchmarks.json (guidellm benchmark/schemas/generative/metrics.py)
    def ok(value: float) -> dict:
        return {
            "successful": {
                "mean": value,
                "median": value,
                "std_dev": 0.0,
                "min": value,
                "max": value,
                "count": N,
                "percentiles": {"p50": value, "p90": value, "p99": value},
            }
        }

    return {
        "benchmarks": [
            {
                "type_": "generative_benchmark",
                "config": {"strategy": {"type_": "concurrent", "streams": v["c"]}},
                "metrics": {
                    "request_totals": {"successful": N, "incomplete": 0, "errored": 0, "total": N},
                    "requests_per_second": ok(v["req_s"]),
                    "request_concurrency": ok(float(v["c"])),
                    "request_latency": ok(v["e2e_ms"] / 1e3),
                    "prompt_token_count": ok(ISL),
                    "output_token_count": ok(OSL),
                    "time_to_first_token_ms": ok(v["step_ms"]),
                    "time_per_output_token_ms": ok(v["step_ms"]),
                    "inter_token_latency_ms": ok(v["step_ms"]),
                    "output_tokens_per_second": ok(v["out_tok_s"]),
                },
            }
            for v in levels
        ]
    }


def tokenplan(levels: list[dict]) -> dict:  # tokenplan bench --save (tokenplan.bench_schema.BenchResult)
    def dist(seconds: float) -> dict:
        return {"mean": seconds, "p50": seconds, "p90": seconds, "p99": seconds}

    return {
        "schema_version": 1,
        "model": "sim-model",
        "endpoints": ["http://127.0.0.1:8000/v1"],
        "num_gpus": 1,
        "levels": [
            {
                "concurrency": v["c"],
                "achieved_concurrency": float(v["c"]),
                "requests": N,
                "errors": 0,
                "duration_s": v["duration_s"],
                "request_throughput_per_s": v["req_s"],
                "output_tok_s": v["out_tok_s"],
                "token_count_method": "usage",
                "output_tokens": float(N * OSL),
                "input_tokens": float(N * ISL),
                "mean_input_tokens": float(ISL),
                "mean_output_tokens": float(OSL),
                "ttft_s": dist(v["step_ms"] / 1e3),
                "tpot_s": dist(v["step_ms"] / 1e3),
                "e2e_s": dist(v["e2e_ms"] / 1e3),
            }
            for v in levels
        ],
        "server": {"metrics": False, "server_info": None},
        # the simulated engine's cap of 32 running sequences (tests/support/sim_server.py)
        "cap": {"max_running_requests": 32, "source": "metrics"},
        "workload": {
            "method": "random tokens",
            "isl_tokens": ISL,
            "osl_tokens": OSL,
            "prompts": N,
            "ignore_eos": True,
            "stream": True,
            "arrivals": "closed loop",
        },
        "notes": [],
        "stopped": None,
    }


def main() -> None:
    levels = [law(c) for c in LEVELS]
    (HERE / "vllm-bench-serve.jsonl").write_text("\n".join(json.dumps(vllm(v)) for v in levels) + "\n")
    (HERE / "sglang-bench-serving.jsonl").write_text("".join(json.dumps(sglang(v)) + "\n" for v in levels))
    for v in levels:
        (HERE / f"aiperf-c{v['c']}-profile_export_aiperf.json").write_text(json.dumps(aiperf(v), indent=2) + "\n")
    (HERE / "guidellm-benchmarks.json").write_text(json.dumps(guidellm(levels), indent=2) + "\n")
    (HERE / "tokenplan-bench.json").write_text(json.dumps(tokenplan(levels), indent=2) + "\n")


if __name__ == "__main__":
    main()
