"""calibrate reads the result files of vllm bench serve, sglang.bench_serving, AIPerf and GuideLLM,
and tokenplan bench's own (newuser finding 3: the README sends ``bench --save`` files there).

The samples in tests/data/bench_results/ are written in each tool's schema by make_samples.py
from the step law of tests/support/sim_server.py (step(B) = 10 ms + 0.15 ms·B), ISL 64, OSL 32,
C = 1, 8, 32; the expected values below are that law, by hand (see make_samples.py's docstring).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tokenplan.api.bench import calibrate_from_results
from tokenplan.api.resolve import PredictRequest
from tokenplan.errors import ConfigError, InfeasibleError, InputError
from tokenplan.files.bench_results import read_bench_results, read_bench_source

DATA = Path(__file__).resolve().parents[2] / "data" / "bench_results"
AIPERF = [str(DATA / f"aiperf-c{c}-profile_export_aiperf.json") for c in (1, 8, 32)]
FILES = {
    "vllm": [str(DATA / "vllm-bench-serve.jsonl")],
    "sglang": [str(DATA / "sglang-bench-serving.jsonl")],
    "aiperf": AIPERF,
    "guidellm": [str(DATA / "guidellm-benchmarks.json")],
    "tokenplan bench": [str(DATA / "tokenplan-bench.json")],
}
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-6,
}


@pytest.mark.parametrize("kind", sorted(FILES))
def test_each_format_reads_to_the_same_levels(kind: str) -> None:
    levels = []
    for path in FILES[kind]:
        found_kind, found = read_bench_results(path)
        assert found_kind == kind
        levels += found
    assert [lv["concurrency"] for lv in levels] == [1, 8, 32]
    for lv, c in zip(levels, (1, 8, 32)):
        step_s = 0.010 + 0.00015 * c  # the law
        assert lv["tpot_s"]["mean"] == pytest.approx(step_s) and lv["ttft_s"]["mean"] == pytest.approx(step_s)
        assert lv["e2e_s"]["mean"] == pytest.approx(32 * step_s)
        assert lv["output_tok_s"] == pytest.approx(32 * c / (32 * step_s))  # OSL · C / E2E
        assert (lv["mean_input_tokens"], lv["mean_output_tokens"], lv["requests"]) == (64, 32, 64)
        assert lv["achieved_concurrency"] == pytest.approx(c)  # Little's law: req/s × E2E = C


@pytest.mark.parametrize("kind", sorted(FILES))
def test_calibrate_from_each_format_recovers_the_step_law(kind: str, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    desc = PredictRequest(model=str(tmp_path), gpu="h100-sxm", num_gpus=1, engine="vllm")
    outcome = calibrate_from_results(FILES[kind], desc)
    factors = outcome.data["factors"]
    # a tiny model on an H100: the kernel terms are microseconds, so the fit is the overhead law
    assert factors["step_overhead_s"]["value"] == pytest.approx(0.010, rel=0.05)
    assert factors["per_sequence_overhead_s"]["value"] == pytest.approx(0.00015, rel=0.15)
    assert outcome.data["sources"][0]["format"] == kind


def test_a_server_described_as_one_the_planner_says_cannot_run_is_refused_in_one_line() -> None:
    # The sweep measured the tiny Llama; --model qwen3.5-397b-a17b on one H100 in BF16 is ~397 B
    # params × 2 B ≈ 739 GiB of weights on an 80 GB part: no server so described ran, so the
    # description is wrong. This was a ValueError traceback from the step law's prediction (a
    # generate run: "levels[0].batch: nan"). (It used qwen3.6-27b, whose whole 262,144-token
    # context vLLM's default max_model_len cannot hold on one H100; a server launched with
    # --max-model-len for the measured 96-token requests does start, which the planner now takes.)
    desc = PredictRequest(model="qwen3.5-397b-a17b", gpu="h100-sxm", num_gpus=1, engine="vllm", weight_dtype="bf16")
    with pytest.raises(InfeasibleError, match=r"cannot run: does not fit .*739\.\d GiB of weights per GPU") as err:
        calibrate_from_results(FILES["vllm"], desc)
    assert "\n" not in str(err.value)


def test_calibrate_cli_from_bench_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    from tokenplan.cli import main

    monkeypatch.setattr(
        sys,
        "argv",
        [
            "tokenplan",
            "calibrate",
            "--from-bench",
            FILES["vllm"][0],
            "--config",
            str(tmp_path),
            "--gpu",
            "h100-sxm",
            "-o",
            str(tmp_path / "p.json"),
        ],
    )
    main()
    profile = json.loads((tmp_path / "p.json").read_text())
    # an update of the shipped fit: the measured group only (--gpu h100-sxm, --engine defaults to sglang)
    assert "read " in capsys.readouterr().out and profile["layered_on"] == "shipped"
    assert list(profile["groups"]) == ["sglang/hopper"]


def test_an_unknown_file_names_what_it_found(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(
        ConfigError, match=r"not a result of tokenplan bench, vllm, sglang, aiperf, guidellm \(keys \['hello'\]\)"
    ):
        read_bench_results(str(bad))


def test_calibrate_from_a_tokenplan_bench_file_is_bench_from_json_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # The README: "calibrate --from-bench bench.json … (and bench --fit)". The same file through
    # both commands gives the same profile: the same levels, the observed cap (32) and num_gpus (1).
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    from tokenplan.cli import main

    served = ["--config", str(tmp_path), "--gpu", "h100-sxm", "--engine", "vllm"]
    bench_file = FILES["tokenplan bench"][0]
    for argv in (
        ["calibrate", "--from-bench", bench_file, "-o", str(tmp_path / "calibrate.json"), *served],
        ["bench", "--from-json", bench_file, "--fit", "-o", str(tmp_path / "bench.json"), *served],
    ):
        monkeypatch.setattr(sys, "argv", ["tokenplan", *argv])
        main()
    assert "tokenplan bench, 3 level(s)" in capsys.readouterr().out
    profiles = [json.loads((tmp_path / name).read_text()) for name in ("calibrate.json", "bench.json")]
    for profile in profiles:
        profile.pop("provenance")  # names the command
    assert profiles[0] == profiles[1]
    # the step law 10 ms + 0.15 ms·B (make_samples.py)
    factors = profiles[0]["groups"]["vllm/hopper"]
    assert factors["step_overhead_s"] == pytest.approx(0.010, rel=0.05)


@pytest.mark.parametrize(
    ("field", "value"),
    [("achieved_concurrency", -3), ("server.running_mean", -3.0), ("server.waiting_mean", float("inf"))],
)
def test_a_negative_concurrency_or_server_count_is_refused_naming_the_level(
    field: str, value: float, tmp_path: Path
) -> None:
    # A hand-edited bench file with achieved_concurrency −3 (or /metrics' running_mean −3) was
    # fitted and a profile written (rc 0): the step-time law took a batch of −3 sequences.
    data = json.loads(Path(FILES["tokenplan bench"][0]).read_text())
    level = data["levels"][1]
    if field.startswith("server."):
        level["server"] = {**(level.get("server") or {}), field.split(".")[1]: value}
    else:
        level[field] = value
    bad = tmp_path / "bench.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(
        ConfigError, match=rf"levels\[1\]\.{field}: {value!r} is not allowed \(allowed: a finite number ≥ 0\)"
    ):
        read_bench_source(str(bad))


@pytest.mark.parametrize("kind", ["tokenplan bench", "vllm"])
def test_a_negative_throughput_is_refused_naming_the_level(kind: str, tmp_path: Path) -> None:
    # newuser2 finding 4: a bench file with output_tok_s −5 was fitted and a profile written (rc 0).
    source = Path(FILES[kind][0])
    text = source.read_text()
    key = '"output_tok_s": ' if kind == "tokenplan bench" else '"output_throughput": '
    start = text.index(key) + len(key)
    end = start + len(text[start:].split(",")[0].split("}")[0])
    bad = tmp_path / source.name
    bad.write_text(text[:start] + "-5" + text[end:])
    # tokenplan's own file: the level's field; vllm's: the line's output_throughput, which with
    # requests completed must be > 0 (0 is refused the same way)
    message = (
        r"levels\[0\]\.output_tok_s: -5(\.0)? is not allowed \(allowed: a finite number ≥ 0\)"
        if kind == "tokenplan bench"
        else r"line 1: output_throughput: -5\.0 with \d+ completed requests \(allowed: tokens/s > 0\)"
    )
    with pytest.raises(ConfigError, match=message):
        read_bench_source(str(bad))
    if kind == "vllm":
        bad.write_text(text[:start] + "0" + text[end:])
        with pytest.raises(ConfigError, match=r"output_throughput: 0\.0 with \d+ completed requests"):
            read_bench_source(str(bad))


def test_a_finite_request_rate_is_an_open_loop_level(tmp_path: Path) -> None:
    # vllm bench serve saves "request_rate": "inf" (every request as soon as a slot frees: closed
    # loop, the run opens with a wave) or the Poisson rate in requests/s (open loop: no opening wave).
    from tokenplan.calibration.bench_fit import Served, bench_measurements

    first = json.loads(Path(FILES["vllm"][0]).read_text().splitlines()[0])
    rows = []
    for rate in ("inf", 8.0):
        row = dict(first, request_rate=rate)
        rows.append(json.dumps(row))
    path = tmp_path / "rates.jsonl"
    path.write_text("\n".join(rows) + "\n")
    _, levels = read_bench_results(str(path))
    assert [lv["closed_loop"] for lv in levels] == [True, False]
    served = Served(engine="vllm", model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tp=1)
    assert [m.closed_loop for m in bench_measurements(levels, served)] == [True, False]


def test_levels_that_lost_requests_are_left_out_of_the_fit_and_a_sweep_of_only_those_is_refused(
    tmp_path: Path,
) -> None:
    # A break-it pass fitted a sweep whose level lost 15 of 16 requests, with no word. The level
    # at concurrency 32 lost 3 requests here: the fit takes the other two levels and says so.
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    desc = PredictRequest(model=str(tmp_path), gpu="h100-sxm", num_gpus=1, engine="vllm")
    data = json.loads(Path(FILES["tokenplan bench"][0]).read_text())
    data["levels"][2].update(errors=3, error_samples=["status 500: overloaded"])
    lost = tmp_path / "lost.json"
    lost.write_text(json.dumps(data))
    outcome = calibrate_from_results([str(lost)], desc)
    assert outcome.warnings[0] == (
        "left out of the fit: requests failed (3 of 67 at concurrency 32); first: status 500: overloaded; "
        "the levels count only the answered ones"
    )  # 64 answered + 3 failed = 67 sent
    assert len(outcome.cases) == 2
    for level in data["levels"]:
        level.update(errors=1)
    lost.write_text(json.dumps(data))
    with pytest.raises(InputError, match="at least one level whose requests were all answered"):
        calibrate_from_results([str(lost)], desc)


def test_a_negative_observed_running_cap_is_refused_naming_the_file_key(tmp_path: Path) -> None:
    # cap.max_running_requests −4 reached the fit as max_running and was refused as
    # "max_running -4 is not allowed", naming neither the file nor its key; report drew it.
    data = json.loads(Path(FILES["tokenplan bench"][0]).read_text())
    data["cap"] = {**(data.get("cap") or {}), "max_running_requests": -4}
    bad = tmp_path / "bench.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"bench\.json: cap\.max_running_requests: -4 is not allowed"):
        read_bench_source(str(bad))
