"""An integer size past 2^53 in a config.json (the target's or a --draft-model drafter's) is refused
in one line naming the key, not an OverflowError traceback (10^400 does not convert to a float)."""

from __future__ import annotations

import json

import pytest

from tokenplan.arch.draft import drafter_shape
from tokenplan.catalog import _PKG, load_model
from tokenplan.errors import ConfigError

HUGE = 10**400
EAGLE3 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 4096,
    "num_hidden_layers": 1,
    "num_attention_heads": 32,
    "intermediate_size": 14336,
    "draft_vocab_size": 32000,
}
TOP = r"\(allowed: an integer from 1 to 9007199254740992\)"


@pytest.mark.parametrize("key", ["hidden_size", "intermediate_size", "draft_vocab_size"])
def test_a_drafter_field_past_2_53_is_refused(key):
    with pytest.raises(ConfigError, match=rf"^config\.json: {key}: 1000.* is not allowed {TOP}$"):
        drafter_shape({**EAGLE3, key: HUGE}, "config.json", "eagle3")


def test_a_target_field_past_2_53_is_refused(tmp_path):
    cfg = json.loads((_PKG / "models" / "qwen3-8b.json").read_text(encoding="utf-8"))
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "hidden_size": HUGE}), encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"hidden_size: 1000.* is not allowed \(allowed: an integer from 1 to 9007199254740992, the model width\)$",
    ):
        load_model(str(tmp_path / "config.json"))


def test_2_53_itself_is_read():
    assert drafter_shape({**EAGLE3, "draft_vocab_size": 2**53}, "config.json", "eagle3").layers == 1
