"""An SGLang launch whose draft KV pool (its own, at the target's token count, from the reserve)
overruns the GPU says so, not "their 0.0 GiB of state" of a model that has none."""

from __future__ import annotations

import json
import re

import pytest

from tokenplan.api.memory import memory
from tokenplan.api.resolve import PredictRequest
from tokenplan.job.results import Rejected


def test_the_draft_pool_that_overruns_is_named(tmp_path):
    # a 3-layer EAGLE-3 head with 32 KV heads (num_key_value_heads left out: the heads) × 128:
    # 3 × 32 × 2 × 128 × 2 B = 49,152 B a token against Llama-3.1-8B's 32 × 8 × 2 × 128 × 2 B =
    # 131,072 B: its pool is 49,152 / 131,072 = 0.375 of the target's KV pool
    drafter = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": 4096,
        "num_hidden_layers": 3,
        "num_attention_heads": 32,
        "head_dim": 128,
        "intermediate_size": 100,
        "vocab_size": 10,
    }
    (tmp_path / "config.json").write_text(json.dumps(drafter))
    job = dict(isl=1024, osl=2500, isl_sigma=0.8, osl_sigma=1.0, isl_cap=16384, osl_cap=32768)
    got = memory(
        PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", spec="eagle3:3", draft_model=str(tmp_path), **job)
    )
    assert isinstance(got, Rejected)
    assert "GiB of state" not in got.rejected
    m = re.search(
        r"the draft's own ([\d.]+) GiB KV pool per GPU, beside the weights, a ([\d.]+) GiB KV pool", got.rejected
    )
    assert m is not None
    assert float(m[1]) == pytest.approx(0.375 * float(m[2]), abs=0.1)
