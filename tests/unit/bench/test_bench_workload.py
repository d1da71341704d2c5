"""Prompt-length arithmetic of the approximation, and dataset parsing."""

from __future__ import annotations

import json

import pytest

from tokenplan.bench.workload import PROBE_WORDS, approximate_words, calibrate_words, dataset_workload
from tokenplan.errors import ConfigError, InputError


def test_probe_calibration_recovers_overhead_and_tokens_per_word():
    # A tokenizer with 1.3 tokens per word and a 7-token template: 1 word → 8.3, 200 words → 267.
    overhead, per_word = calibrate_words(short_tokens=8, long_tokens=round(7 + 1.3 * PROBE_WORDS))
    assert per_word == pytest.approx((267 - 8) / 199)  # 1.3015
    assert overhead == pytest.approx(8 - per_word)
    # 1024 tokens: (1024 − 6.70) / 1.3015 = 781.6 → 782 words
    assert approximate_words(1024, overhead, per_word) == 782


def test_approximation_never_asks_for_fewer_than_one_word():
    assert approximate_words(3, overhead_tokens=10.0, tokens_per_word=1.0) == 1


def test_dataset_reads_messages_prompts_and_budgets(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}),
                "",
                json.dumps({"prompt": "tell me"}),
            ]
        )
    )
    w = dataset_workload(str(path), osl=20)
    assert w.method == "dataset" and not w.ignore_eos
    assert [p.max_tokens for p in w.prompts] == [20, 20]  # --osl overrides per-prompt budgets
    assert w.prompts[1].messages == ({"role": "user", "content": "tell me"},)
    w2 = dataset_workload(str(path), osl=None, limit=1)
    assert [p.max_tokens for p in w2.prompts] == [7]


def test_dataset_reads_the_compressed_and_parquet_inputs_generate_reads(tmp_path):
    # a new-user pass: bench --dataset refused the .parquet and .gz inputs generate had run
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = [{"id": "a", "prompt": "tell me", "max_tokens": 5}, {"id": "b", "prompt": "and more", "max_tokens": 6}]
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(text))
    with pa.output_stream(str(tmp_path / "d.jsonl.zst"), compression="zstd") as out:
        out.write(text)
    # Parquet rows with messages whose keys differ: Arrow gives each row every key (None where
    # absent), which is not sent
    rows = [
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
        {"messages": [{"role": "system", "content": "be brief", "name": "s"}, {"role": "user", "content": "q"}]},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    for name in ("d.jsonl.gz", "d.jsonl.zst"):
        w = dataset_workload(str(tmp_path / name), osl=None)
        assert [(p.messages[0]["content"], p.max_tokens) for p in w.prompts] == [("tell me", 5), ("and more", 6)]
    w = dataset_workload(str(tmp_path / "d.parquet"), osl=4)
    assert [p.messages for p in w.prompts] == [
        ({"role": "user", "content": "hi"},),
        ({"role": "system", "content": "be brief", "name": "s"}, {"role": "user", "content": "q"}),
    ]
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(text)[:20])  # gzip cut short
    with pytest.raises(ConfigError, match=r"bad.jsonl.gz: <root>: cannot be read"):
        dataset_workload(str(tmp_path / "bad.jsonl.gz"), osl=4)


def test_sharegpt_uses_the_first_turn_and_the_reply_length(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "why is the sky blue"},
                        {"from": "gpt", "value": "because of Rayleigh scattering"},
                    ]
                }
            ]
        )
    )
    (p,) = dataset_workload(str(path), osl=None).prompts
    assert p.messages[0]["content"] == "why is the sky blue" and p.max_tokens == 4  # 4 words in the reply


def test_dataset_reads_an_openai_batch_line_as_generate_does(tmp_path):
    # generate takes OpenAI Batch lines (the README demo input has one); bench refused them
    path = tmp_path / "batch.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "Count to three."}], "max_tokens": 9}
    path.write_text(json.dumps({"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": body}))
    w = dataset_workload(str(path), osl=None)
    assert w.prompts[0].messages == ({"role": "user", "content": "Count to three."},)
    assert w.prompts[0].max_tokens == 9  # the body's own budget


def test_dataset_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok", "max_tokens": 3}\n{not json\n')
    with pytest.raises(ConfigError, match="line 2"):
        dataset_workload(str(bad), osl=None)
    nobudget = tmp_path / "nb.jsonl"
    nobudget.write_text('{"prompt": "ok"}\n')
    with pytest.raises(ConfigError, match="output budget"):
        dataset_workload(str(nobudget), osl=None)
    with pytest.raises(InputError):
        dataset_workload(str(tmp_path / "missing.jsonl"), osl=10)


def test_open_loop_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_burstiness() -> None:
    import math

    import numpy as np

    from tokenplan.bench.sweep import arrival_gaps_s

    for burstiness in (1.0, 0.25):  # Poisson, and burstier (CV 2)
        gaps = np.array(arrival_gaps_s(4.0, burstiness, 200_000, seed=1))
        # Gamma(k, θ = 1/(r·k)): mean k·θ = 1/r = 0.25 s; CV = 1/sqrt(k)
        assert math.isclose(gaps.mean(), 0.25, rel_tol=0.01)
        assert math.isclose(gaps.std() / gaps.mean(), 1 / math.sqrt(burstiness), rel_tol=0.02)
    assert arrival_gaps_s(float("inf"), 1.0, 3, seed=0) == [0.0, 0.0, 0.0]
    # 1/(rate·burstiness) overflowed to a 0 scale, which gammavariate refused with a traceback
    gaps = arrival_gaps_s(1e308, 2.0, 3, seed=0)
    assert len(gaps) == 3 and all(0 <= g < 1e-300 for g in gaps)


def test_a_dataset_named_as_another_format_is_refused_as_generate_refuses_it(tmp_path):
    # a second break-it pass: plain JSONL named .gz read "cannot be read (zlib inflate failed…)";
    # generate's input check says what the file holds and what to name it (tokenplan.sniff)
    path = tmp_path / "d.jsonl.gz"
    path.write_text(json.dumps({"prompt": "tell me", "max_tokens": 5}) + "\n")
    with pytest.raises(InputError) as refused:
        dataset_workload(str(path), osl=None)
    assert str(refused.value) == (
        f"dataset {str(path)!r} is not allowed (allowed: a file whose name says its format: this one holds "
        "uncompressed text, its name says gzip (rename it without .gz))"
    )
