"""Every configuration the plan search drops carries its reason, once per scope, never empty.

One case per reason the search can produce (the kinds of ``job.evaluate.Rejection`` and the
splits ``planning.space`` leaves out), with the numbers each reason must name; the issue's
cases (named formats, 3 or 7 GPUs, DeepSeek-R1 on 4 RTX PRO 6000, TRT-LLM on MI300X); and the
README's ``plan`` commands, none of which may show an empty reason.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.job.evaluate import REJECTION_KINDS

ROOT = Path(__file__).resolve().parents[2]

# Small configs whose head counts make the layout rules fire (hand-chosen numbers).
TWELVE_HEADS = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 1536,
    "num_hidden_layers": 2,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "vocab_size": 1000,
    "intermediate_size": 4096,
    "max_position_embeddings": 131072,
}
THREE_KV_HEADS = {**TWELVE_HEADS, "num_attention_heads": 24, "num_key_value_heads": 3, "hidden_size": 3072}


def _options(**kwargs) -> list[dict]:
    return plan(PlanRequest(**kwargs)).to_json()["options"]


def _reasons(**kwargs) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in _options(**kwargs):
        out.update(o["rejected"])
    return out


def _has(reasons: dict[str, int], pattern: str) -> bool:
    return any(re.search(pattern, k) for k in reasons)


@pytest.fixture()
def config(tmp_path):
    def write(raw: dict, name: str) -> str:
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(raw))
        return str(path)

    return write


# Each case: the request, a regex the reason must match, and how many configurations it names.
CASES = {
    # engine × vendor: 10 splits of 8 GPUs × 2 weight × 2 KV formats × 3 specs (none, mtp:1, mtp:3)
    # = 120, said once.
    "engine": (
        dict(engine="trtllm", gpus=("8xmi300x",)),
        r"^TensorRT-LLM does not run on AMD GPUs \(mi300x\); it runs on NVIDIA$",
        120,
    ),
    # 1,024 + 4,000 = 5,024 tokens > llama-2-70b's 4,096.
    "context": (
        dict(model="llama-2-70b", gpus=("8xb200",), osl_mean=4000, osl_cap=8000),
        r"^a request of 5,024 tokens \(mean prompt 1,024 \+ mean output 4,000\) exceeds llama-2-70b's context of 4,096 "
        r"tokens .*: lower --isl or --osl$",
        None,
    ),
    "format": (dict(gpus=("8xh200",), kv_dtypes=("nvfp4",)), r"^NVFP4 KV cache needs Blackwell; h200 is hopper$", None),
    # EP = TP×PP = 16 over Mixtral's 8 experts.
    "layout": (
        dict(model="mixtral-8x7b", gpus=("16xgb200",)),
        # the EP values that divide both the 8 experts and TP16: 1, 2, 4, 8
        r"^TP16×EP16: EP16 does not divide the 8 experts \(allowed EP at TP16: 1, 2, 4, 8\)$",
        None,
    ),
    # DeepSeek-R1 (671 B, FP8) on one 96 GB card: ~627 GiB of weights per GPU, against SGLang's
    # fraction 0.8627 of the 97,887 MiB card's CUDA-visible memory (× 0.996) less its 0.5 GiB context:
    # 0.8627 × (95.21 − 0.5) GiB = 81.7 GiB usable.
    "memory": (
        dict(model="deepseek-r1", gpus=("4xrtx-pro-6000",)),
        r"^TP1×DP4, fp8 weights: does not fit: 626\.\d GiB of weights per GPU \(637\.\d GiB with the MTP "
        r"draft layers\) vs 81\.\d GiB usable",
        10,
    ),
    # Llama-3.3-70B in FP8 (~66 GiB) on a 96 GB card leaves ~48.5 K BF16 KV tokens for 62 K-token requests.
    # SGLang counts a running request's prompt (60,000 mean) + half its output so far: the running
    # mean output E[OSL²]/E[OSL] lies between the 2,000 mean and the 8,000 cap, so 61,000-64,000 tokens.
    "kv": (
        dict(
            model="llama-3.3-70b",
            gpus=("1xrtx-pro-6000",),
            weight_dtypes=("fp8",),
            specs=("none",),
            isl_mean=60000,
            isl_cap=120000,
            osl_mean=2000,
            osl_cap=8000,
        ),
        r"^TP1, fp8 weights, bf16 KV: no sequence of 6[1-3],\d{3} tokens fits the KV cache \(4\d,\d{3} tokens\)$",
        None,
    ),
    # 3 requests over 8 TP1 replicas.
    "concurrency": (
        dict(gpus=("8xb200",), samples=3),
        r"^concurrency 3 leaves fewer than one request per replica \(8 replicas: a replica without one would "
        r"idle; use fewer replicas, or keep at least one request per replica in flight\)$",
        None,
    ),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_rejection_kind_names_its_numbers(kind):
    request, pattern, count = CASES[kind]
    reasons = _reasons(**request)
    hits = [k for k in reasons if re.search(pattern, k)]
    assert hits, f"{kind}: no reason matches {pattern!r} in {list(reasons)}"
    if count is not None:
        assert reasons[hits[0]] == count


def test_an_nvfp4_kv_cache_is_refused_where_the_engine_does_not_run_it():
    # vLLM and TensorRT-LLM run an NVFP4 KV cache on SM100/SM103 only (vllm#49011: "kv_cache_dtype not
    # supported" on SM120; TensorRT-LLM#10241); SGLang runs it on SM120 too (sglang#21601).
    want = "NVFP4 KV cache: {} runs it only on blackwell, blackwell-ultra; rtx-pro-6000 is blackwell-gb202 (use --kv-dtype fp8)"
    for engine, name in (("vllm", "vLLM"), ("trtllm", "TensorRT-LLM")):
        assert want.format(name) in _reasons(engine=engine, gpus=("4xrtx-pro-6000",), kv_dtypes=("nvfp4",))
    o = plan(PlanRequest(gpus=("4xrtx-pro-6000",), kv_dtypes=("nvfp4",), specs=("none",))).to_json()["options"][0]
    assert o["kv_dtype"] == "nvfp4" and "--kv-cache-dtype nvfp4" in o["launch"]["sglang"]


def test_every_kind_is_walked():
    # "spec" (MTP on a model without MTP layers) cannot reach the plan: the request drops MTP for
    # such models and says so in a note (tested below); the search itself is covered directly.
    assert set(CASES) | {"spec"} == set(REJECTION_KINDS)


def test_spec_rejection_in_the_search():
    from tokenplan.api.resolve import read_profile
    from tokenplan.catalog import load_engine, load_gpu, load_model
    from tokenplan.job.workload import lognormal_with_mean
    from tokenplan.perf.speculative import parse_spec
    from tokenplan.planning.search import Job, search_option
    from tokenplan.planning.space import HardwareOption

    job = Job(1000, lognormal_with_mean(1024, 0.8, 16384), lognormal_with_mean(2500, 1.0, 32768))
    r = search_option(
        load_model("llama-3.1-8b"),
        HardwareOption(load_gpu("b200"), 1, 5.25),
        load_engine("sglang"),
        read_profile(None).table,
        job,
        [parse_spec("mtp:3")],
    )
    assert r.rejected == {"MTP needs MTP layers; llama-3.1-8b ships none": 8}  # 2 weights × 2 KV × (cap, lifted)
    p = plan(PlanRequest(model="llama-3.1-8b", gpus=("1xb200",), specs=("mtp:3",))).to_json()
    assert any(line.startswith("MTP was not searched: llama-3.1-8b ships no MTP layers") for line in p["answer"])
    # There MTP falls away and plain decoding is what runs, so nothing is said about leaving it out.
    assert not any(line.startswith("Plain decoding was not compared") for line in p["answer"])


def test_mtp_not_searched_says_defaults_where_no_spec_was_given():
    # new-user finding: with no --spec the bullet said "(asked: mtp:1, mtp:3)" of the defaults
    note = "MTP was not searched: llama-3.1-8b ships no MTP layers ({}); EAGLE or DFlash need a separate draft model (--spec eagle3:K[:TAU])."
    default = plan(PlanRequest(model="llama-3.1-8b", gpus=("1xb200",))).to_json()["answer"]
    assert note.format("the --spec defaults: mtp:1, mtp:3") in default
    asked = plan(PlanRequest(model="llama-3.1-8b", gpus=("1xb200",), specs=("none", "mtp:2"))).to_json()["answer"]
    assert note.format("asked: mtp:2") in asked


def test_a_plan_that_only_speculates_says_plain_decoding_was_not_compared():
    only = plan(PlanRequest(gpus=("1xb200",), specs=("mtp:1:1.5",))).to_json()["answer"]
    assert any(line.startswith("Plain decoding was not compared") and "--spec none" in line for line in only)
    both = plan(PlanRequest(gpus=("1xb200",), specs=("none", "mtp:1:1.5"))).to_json()["answer"]
    assert not any(line.startswith("Plain decoding was not compared") for line in both)


def test_heads_that_do_not_divide(config):
    # 12 heads: TP8 leaves 1.5 per GPU. 2 layers: PP4 and PP8 exceed them.
    reasons = _reasons(model=config(TWELVE_HEADS, "twelve"), gpus=("8xb200",), specs=("none",))
    # 12 heads, 4 KV heads: TP 1, 2, 4 and 12 split both (3 and 6 do not divide 4, nor 4 them)
    assert _has(reasons, r"^TP8: TP8 does not divide the 12 attention heads \(allowed TP: 1, 2, 4, 12\)$")
    assert _has(reasons, r"^TP1×PP4×DP2: PP4 exceeds the 2 layers$")
    assert _has(reasons, r"^TP1×PP8: PP8 exceeds the 2 layers$")
    # 3 KV heads: TP2 neither divides 3 nor is divided by it.
    reasons = _reasons(model=config(THREE_KV_HEADS, "three"), gpus=("8xb200",), specs=("none",))
    # 24 heads, 3 KV heads: TP 1, 3, 6, 12, 24 (each divides 24, and 3 divides each or it 3)
    assert _has(reasons, r"^TP2×DP4: TP2 and the 3 KV heads do not divide one another \(allowed TP: 1, 3, 6, 12, 24\)$")


def test_three_b200_say_why_tp2_is_missing():
    o = _options(gpus=("3xb200",))[0]
    # 3 = 1×2 + 1: TP2 and PP2 leave a GPU over.
    assert o["rejected"]["TP2: 3 GPUs are not a multiple of 2 (3 = 1×2 + 1); use 2 or 4 GPUs"] == 1
    assert o["rejected"]["TP1×PP2: 3 GPUs are not a multiple of 2 (3 = 1×2 + 1); use 2 or 4 GPUs"] == 1
    assert not any("cannot run this model" in line for line in plan(PlanRequest(gpus=("3xb200",))).to_json()["answer"])


def test_tp8_that_cannot_run_the_model_says_tp8_once(tmp_path):
    # new-user finding: "TP8 on h100-sxm cannot run this model: TP8: TP8 does not divide the 12 attention heads"
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 768,
        "num_hidden_layers": 2,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "vocab_size": 1000,
        "intermediate_size": 3072,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    answer = plan(PlanRequest(model=str(tmp_path), gpus=("8xh100-sxm",), specs=("none",))).to_json()["answer"]
    assert (
        "TP8 on h100-sxm cannot run this model: TP8 does not divide the 12 attention heads (allowed TP: 1, 2, 4, 12)."
        in answer
    )


def test_seven_b200_tp4_is_a_divisibility_reason_not_a_model_one():
    p = plan(PlanRequest(gpus=("7xb200",))).to_json()
    reasons = p["options"][0]["rejected"]
    assert "TP4: 7 GPUs are not a multiple of 4 (7 = 1×4 + 3); use 4 or 8 GPUs" in reasons
    assert "TP2: 7 GPUs are not a multiple of 2 (7 = 3×2 + 1); use 6 or 8 GPUs" in reasons
    assert not any("TP4 on b200 cannot run" in line for line in p["answer"])


def test_sixteen_b200_tp16_leaves_the_nvlink_domain():
    reasons = _options(gpus=("16xb200",), specs=("none",))[0]["rejected"]
    assert "TP16: TP stays within one scale-up domain (8 GPUs on NVLink 5); use PP or DP across domains" in reasons


def test_deepseek_on_four_rtx_has_one_line_per_split_and_format():
    o = _options(model="deepseek-r1", gpus=("4xrtx-pro-6000",))[0]
    fits = [k for k in o["rejected"] if "does not fit" in k]
    splits = [k.split(":")[0] for k in fits]
    assert len(splits) == len(set(splits)) == len(fits)  # no split said twice
    assert "best" not in o
    assert o["not_searched"] == [
        "other weight formats: deepseek-r1 is released in fp8 and served as released "
        "(name one with --weight-dtype to re-quantize)"
    ]


@pytest.mark.parametrize(
    "weights, gpu, engine, searched",
    [
        ("int8", "8xb200", "sglang", "int8"),
        ("w4a16", "8xb200", "sglang", "w4a16"),
        ("int4", "8xb200", "sglang", "w4a16"),
        # vLLM runs NVFP4 weight-only through Marlin below Blackwell (catalog/engines.yaml)
        ("nvfp4", "8xh200", "vllm", "nvfp4"),
    ],
)
def test_named_weight_formats_are_searched(weights, gpu, engine, searched):
    p = plan(PlanRequest(gpus=(gpu,), weight_dtypes=(weights,), engine=engine)).to_json()
    o = p["options"][0]
    assert o["weight_dtype"] == searched
    assert o["not_searched"] == []


def test_nvfp4_on_hopper_is_refused_by_an_engine_without_a_weight_only_fp4_path():
    # SGLang's ModelOptFp4Config.get_min_capability() is 100 (modelopt_quant.py): no NVFP4 on sm_90
    p = plan(PlanRequest(gpus=("8xh200",), weight_dtypes=("nvfp4",))).to_json()
    why = (
        "NVFP4 weights: SGLang runs NVFP4 only on Blackwell FP4 tensor cores; h200 is hopper "
        "(vLLM runs it weight-only through Marlin; or use --weight-dtype fp8)"
    )
    assert list(p["options"][0]["rejected"]) == [why]
    assert p["answer"][0] == f"8× h200: nothing runs — {why}."


def test_named_format_that_cannot_run_is_refused_with_its_reason():
    p = plan(PlanRequest(gpus=("8xmi300x",), weight_dtypes=("nvfp4",))).to_json()
    o = p["options"][0]
    assert o["rejected"] == {"NVFP4 weights: no engine runs NVFP4 on cdna3": 120}
    assert p["answer"][0] == "8× mi300x: nothing runs — NVFP4 weights: no engine runs NVFP4 on cdna3."


def test_formats_left_out_unasked_say_why():
    o = _options(gpus=("4xa100-80gb",), specs=("none",))[0]
    assert any(n.startswith("fp8 weights: not native on ampere (a100-80gb)") for n in o["not_searched"])
    assert any(n.startswith("fp8 KV cache: not native on ampere (a100-80gb)") for n in o["not_searched"])
    assert any(n.startswith("4-bit weights (nvfp4, mxfp4, w4a16): searched only when named") for n in o["not_searched"])


def _readme_plan_commands() -> list[list[str]]:
    """The ``tokenplan plan`` commands of the README's code blocks, as argument lists (file
    outputs and job files dropped)."""
    out = []
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        line = line.strip().removeprefix("$ ")
        if not line.startswith("tokenplan plan"):
            continue
        args = shlex.split(line.split(" | ")[0].split("#")[0].split(">")[0])[2:]  # a `| grep` shows a part
        keep, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in ("--report", "--png", "--job"):
                skip = True
            elif a != "--json":
                keep.append(a)
        out.append(keep)
    return out


@pytest.mark.parametrize("args", _readme_plan_commands(), ids=" ".join)
def test_readme_plan_commands_have_no_empty_reason(args):
    from click.testing import CliRunner

    from tokenplan.cli import app

    result = CliRunner().invoke(app, ["plan", *args, "--json"])  # old spellings (--isl-mean) still parse
    refused = result.exit_code == 2 and result.stderr.startswith("error: ") and "--help')" not in result.stderr
    if refused:  # a README example of a refused input (unknown GPU), not a usage error
        return
    assert result.exit_code == 0, result.output
    p = json.loads(result.stdout)
    for o in p["options"]:
        assert all(k.strip() and not k.rstrip().endswith(":") for k in o["rejected"]), o["rejected"]
    assert not any(line.endswith("— .") for line in p["answer"])


def test_speculative_state_that_leaves_no_room_is_named():
    # Qwen3.6-27B in BF16 on one H100 per replica with MTP k=3: SGLang reserves, before its KV
    # pool, k + 1 = 4 intermediate copies of the 146.8 MiB GDN state for each of the 48 requests
    # its default running cap allows under speculative decoding (engine-facts S3):
    # 48 × 4 × 146.8 MiB = 28,186 MiB = 27.5 GiB, on top of ~50.9 GiB of weights and the vision
    # tower's 921,460,192 B = 0.86 GiB (test_memory_engine_logs): ~51.7 GiB.
    reasons = _reasons(model="qwen3.6-27b", gpus=("2xh100-sxm",), weight_dtypes=("bf16",), specs=("mtp:3",))
    assert _has(
        reasons,
        r"^TP1×DP2, bf16 weights: does not fit: 51\.\d GiB of weights \+ 27\.[45] GiB of "
        r"speculative state per GPU vs \d+\.\d GiB usable",
    )


def test_a_speculative_choice_no_measurement_backs_is_set_aside_for_plain_decoding():
    # vLLM MTP on Qwen3.6-27B (hybrid): the one public run of this regime reached 0.75× its
    # prediction, so the model's faster MTP figure is an upper bound (on 4 RTX PRO 6000 the model
    # puts it ahead; on 8 B200 its 606-token decode steps, past the 512-token CUDA-graph capture
    # size, already put it behind plain decoding, job.graphs): the plan recommends and
    # launches plain decoding and says what MTP would give (a new-user pass saw the MTP launch
    # printed beside a line advising plain decoding). SGLang's MTP is measured: nothing set aside.
    vllm = plan(PlanRequest(gpus=("4xrtx-pro-6000",), engine="vllm", specs=("none", "mtp:1"))).to_json()
    chosen = vllm["options"][0]
    assert chosen["spec"] == "none"
    assert "--speculative-config" not in chosen["launch"]["vllm"]
    (aside,) = [line for line in vllm["answer"] if line.startswith("4× rtx-pro-6000 with mtp k=1")]
    assert "upper bound" in aside and "plain decoding, the measured regime, is recommended" in aside
    tok_s = float(aside.split(": ", 1)[1].split(" tok/s")[0].replace(",", ""))
    assert tok_s > chosen["output_tok_s_total"]  # set aside although the model puts it ahead
    assert not any("does not come out ahead" in line for line in vllm["answer"])
    # asked for MTP alone there is no plain configuration to prefer: MTP is chosen, with its caveat
    alone = plan(PlanRequest(gpus=("8xb200",), engine="vllm", specs=("mtp:1",))).to_json()["options"][0]
    assert alone["spec"].startswith("mtp") and any("upper bound" in w for w in alone["warnings"])
    assert "--current engine=vllm,spec=mtp:1,… --measured-tok-s N" in aside
    sglang = plan(PlanRequest(gpus=("4xrtx-pro-6000",), specs=("none", "mtp:1"))).to_json()
    assert not any(line.startswith("4× rtx-pro-6000 with mtp") for line in sglang["answer"])


def test_a_speculative_regime_the_user_measured_is_not_set_aside():
    # --current measured vLLM MTP on this model at 8,570 tok/s on 4 RTX PRO 6000 (1.08× its
    # prediction of 7,937 there): the plan is
    # searched again at the τ it implies, and that engine's speculative figures are no longer an
    # unmeasured upper bound, so MTP can lead (a break-it pass: the plan recommended plain decoding
    # at 71,114 tok/s, 0.89× what the user measured).
    current = "engine=vllm,tp=1,spec=mtp:1,weight-dtype=fp8,kv-dtype=fp8"
    req = PlanRequest(gpus=("4xrtx-pro-6000",), engine="vllm", current=current, measured_tok_s=8_570)
    o = plan(req).to_json()
    chosen = o["options"][0]
    assert chosen["spec"].startswith("mtp") and "--speculative-config" in chosen["launch"]["vllm"]
    assert not any(line.startswith("4× rtx-pro-6000 with mtp") for line in o["answer"])
    # measured on SGLang, vLLM's speculation is still unmeasured: set aside as before
    other = PlanRequest(
        gpus=("4xrtx-pro-6000",), engine="vllm", current=current.replace("vllm", "sglang"), measured_tok_s=6_000
    )
    assert plan(other).to_json()["options"][0]["spec"] == "none"
