"""A compressed-tensors ``ignore`` list sets the share of each component a release stores
quantized, layer by layer and projection by projection (``tokenplan.arch.quant_scope``). A
break-it pass found the first reader, one sample module per component, turned Llama/Qwen3-8B's
36 MLPs to BF16 for one ignored ``model.layers.0.mlp.down_proj``, missed Qwen3.5's attention
(its sample layer 5 is a Gated DeltaNet layer), multimodal module prefixes and the
``compressed_tensors`` spelling, hung on a backtracking pattern, and read a malformed list as
none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplan.arch.params import quantized_fraction
from tokenplan.catalog import load_model
from tokenplan.errors import ConfigError
from tokenplan.units import Dtype

MODELS = Path(__file__).resolve().parents[3] / "src" / "tokenplan" / "catalog" / "models"
W4A16 = {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}}


def _config(tmp_path: Path, model: str, ignore: object, method: str = "compressed-tensors") -> str:
    raw = json.loads((MODELS / f"{model}.json").read_text())
    quant = {"quant_method": method, "format": "pack-quantized", "config_groups": W4A16, "ignore": ignore}
    (raw["text_config"] if "text_config" in raw else raw)["quantization_config"] = quant
    folder = tmp_path / str(len(list(tmp_path.iterdir())))  # a new path: load_model caches by path
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw))
    return str(folder / "config.json")


def _shares(path: str) -> dict[str, float]:
    spec = load_model(path)
    assert spec.native_weight_dtype == "w4a16"
    return {c: quantized_fraction(spec, Dtype.W4A16, c) for c in ("attention", "dense_ffn", "linear_attention")}


def test_one_ignored_projection_is_its_share_of_the_component(tmp_path):
    # Qwen3-8B: 36 layers, each MLP three equal h × I projections; ignoring layer 0's down_proj
    # leaves 1 − 1/(36 · 3) = 107/108 of the dense FFN quantized, all of attention
    shares = _shares(_config(tmp_path, "qwen3-8b", ["lm_head", "model.layers.0.mlp.down_proj"]))
    assert shares["dense_ffn"] == pytest.approx(107 / 108, rel=1e-12)
    assert shares["attention"] == 1.0
    # o_proj of layer 5 only: Qwen3-8B's o_proj is 32 heads × 128 × 4,096 = 16.8 M of the layer's
    # q 16.8 M + k 4.2 M + v 4.2 M + o 16.8 M = 41.9 M; one layer of 36: 1 − 16.8 / (41.9 · 36)
    o, layer = 32 * 128 * 4096, 2 * 32 * 128 * 4096 + 2 * 8 * 128 * 4096
    shares = _shares(_config(tmp_path, "qwen3-8b", ["model.layers.5.self_attn.o_proj"]))
    assert shares["attention"] == pytest.approx(1 - o / (layer * 36), rel=1e-12)


def test_qwen35s_full_attention_layers_are_found_by_their_own_indices(tmp_path):
    # Qwen3.5-27B: 64 layers, full attention at 3, 7, …, 63 ((i + 1) % 4 == 0), the rest Gated
    # DeltaNet; the multimodal release names them model.language_model.layers.N
    names = [f"model.language_model.layers.{i}.self_attn.{p}_proj" for i in range(3, 64, 4) for p in "qkvo"]
    assert _shares(_config(tmp_path, "qwen3.5-27b", names))["attention"] == 0.0
    linear = [
        f"model.language_model.layers.{i}.linear_attn.{p}"
        for i in range(64)
        if (i + 1) % 4
        for p in ("in_proj_qkv", "out_proj")
    ]
    # Qwen3.5 splits the Gated DeltaNet input projection into in_proj_qkv, in_proj_z, in_proj_b and
    # in_proj_a: per layer (hidden h = 5,120; 16 key heads and 48 value heads of 128) qkv is
    # h·(2·16·128 + 48·128) = h·10,240, z h·6,144, b and a h·48 each, out_proj 6,144·h; leaving out
    # qkv and out_proj keeps z, b and a quantized: (6,144 + 96) / (10,240 + 6,144 + 96 + 6,144)
    shares = _shares(_config(tmp_path, "qwen3.5-27b", linear))
    assert shares["linear_attention"] == pytest.approx(6240 / 22624, rel=1e-12) and shares["attention"] == 1.0
    every = [f"{n.rsplit('.', 1)[0]}.{p}" for n in linear for p in ("in_proj_z", "in_proj_b", "in_proj_a")]
    assert _shares(_config(tmp_path, "qwen3.5-27b", linear + every))["linear_attention"] == 0.0


def test_kimi_k25s_release_list_quantizes_the_routed_experts_only(tmp_path):
    release = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]
    spec = load_model(_config(tmp_path, "kimi-k2.5", release))
    shares = dict(spec.native_quantized or ())
    assert shares == {  # no linear_attention: the model has none
        "attention": 0.0,
        "dense_ffn": 0.0,
        "shared_experts": 0.0,
        "routed_experts": 1.0,
    }
    # the underscore spelling of the method reads the same list
    assert (
        load_model(_config(tmp_path, "kimi-k2.5", release, "compressed_tensors")).native_quantized
        == spec.native_quantized
    )


@pytest.mark.parametrize(
    ("ignore", "says"),
    [
        ("re:.*self_attn.*", "is not a list of module names"),
        (["lm_head", None], "entry 1 (None) is not text"),  # the entry named, not the list
        (["re:(unclosed"], "is not a regular expression"),
        # backtracks past any bound on a 40-character module name (the regex module's own timeout)
        (["re:(?:(.)(?:.)*?)*\\1\\1\\1\\1"], "takes over 1 s to match"),
    ],
)
def test_a_malformed_ignore_list_is_refused_in_one_line(tmp_path, ignore, says):
    with pytest.raises(ConfigError) as caught:
        load_model(_config(tmp_path, "qwen3-8b", ignore))
    assert caught.value.key == "quantization_config.ignore" and says in caught.value.problem


def test_a_pattern_that_backtracks_under_re_returns(tmp_path):
    # re:(.|.)*X hung the first reader (Python's re, 2^n paths on a name without an X); the regex
    # module answers at once, and the pattern matches no module: everything stays quantized
    shares = _shares(_config(tmp_path, "qwen3-8b", ["re:(.|.)*X"]))
    assert shares["attention"] == shares["dense_ffn"] == 1.0


def test_nemotron_h_layers_are_read_from_its_pattern(tmp_path):
    # Nemotron-3-Nano's hybrid_override_pattern: * attention, M Mamba-2, E MoE, one kind per
    # layer, under backbone.layers.N with its attention projections named mixer.*. Ignoring the
    # attention layers by name leaves no attention quantized; ignoring the experts of the first E
    # layer leaves 22 of its 23 MoE layers' experts quantized.
    raw = json.loads((MODELS / "nemotron-3-nano-30b-a3b.json").read_text())
    pattern = raw["hybrid_override_pattern"]
    attention, moe = [i for i, c in enumerate(pattern) if c == "*"], [i for i, c in enumerate(pattern) if c == "E"]
    assert len(moe) == 23
    names = [f"backbone.layers.{i}.mixer.{p}_proj" for i in attention for p in "qkvo"]
    spec = load_model(_config(tmp_path, "nemotron-3-nano-30b-a3b", names))
    assert quantized_fraction(spec, Dtype.W4A16, "attention") == 0.0
    first = [f"re:backbone\\.layers\\.{moe[0]}\\.mixer\\.experts\\..*"]
    spec = load_model(_config(tmp_path, "nemotron-3-nano-30b-a3b", first))
    assert quantized_fraction(spec, Dtype.W4A16, "routed_experts") == pytest.approx(22 / 23, rel=1e-12)
