"""``predict`` prints the lengths its figures assume, as ``plan``'s "Job:" line words them: a
new-user pass gave ``--isl 8192 --osl 1024`` and could not see the σ and the caps applied."""

from __future__ import annotations

from tests.support.cli import tokenplan


def test_predict_says_the_lengths_it_assumed(tmp_path):
    # plan's job defaults: σ 0.8 for the ISL, 1.0 for the OSL, caps 16,384 and 32,768 tokens
    run = tokenplan(
        "predict", "--model", "qwen3.6-27b", "--gpu", "b200", "--isl", "8192", "--osl", "1024", cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    said = " ".join(run.stdout.split())  # the terminal's width wraps the line
    assert "Job: ISL lognormal mean 8,192, σ 0.8, cap 16,384; OSL lognormal mean 1,024, σ 1, cap 32,768." in said
    fixed = tokenplan(
        "predict", "--model", "qwen3.6-27b", "--gpu", "b200", "--isl-sigma", "0", "--osl-sigma", "0", cwd=tmp_path
    )
    assert "Job: ISL fixed 1,024; OSL fixed 2,500." in " ".join(fixed.stdout.split())


def test_memory_names_the_engine_whose_allocation_it_is(tmp_path):
    # the reserve differs per engine (Llama-3.1-8B on B200: SGLang 26.67, vLLM 19.24, TensorRT-LLM
    # 18.85 GiB, a new-user pass), so the table's title names the engine, and --json its name
    for engine, shown in (("vllm", "vLLM"), ("trtllm", "TensorRT-LLM")):
        run = tokenplan("memory", "--model", "llama-3.1-8b", "--gpu", "b200", "--engine", engine, cwd=tmp_path)
        assert f"memory per GPU · b200 · TP1 · {shown}" in run.stdout
    as_json = tokenplan(
        "memory", "--model", "llama-3.1-8b", "--gpu", "b200", "--engine", "vllm", "--json", cwd=tmp_path
    )
    assert '"engine": "vllm"' in as_json.stdout
