"""``tokenplan bench`` against the simulated engine of ``tests/support/sim_server.py``.

The server's law: a step with B running sequences lasts a + b·B = 10 ms + 0.15 ms·B, gives each
one token, and runs at most 32 sequences. So by hand: step(1) = 10.15 ms, step(8) = 11.2 ms,
step(32) = 14.8 ms; at concurrency 64 only 32 run and 32 wait. The server's *measured* step
times (its ``/stats``) run longer than the law on a busy machine (a sleep never ends early, and a
loaded 2-core machine wakes it late), so latency and fit checks compare with what the server
measured on this machine, within tolerances that do not depend on the load; the law itself is
only a lower bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.sim_server import SimServerProcess  # noqa: E402

from tokenplan.api.bench import BenchRequest, bench, fit_bench  # noqa: E402
from tokenplan.api.resolve import PredictRequest  # noqa: E402

A_MS, B_MS, CAP = 10.0, 0.15, 32
LEVELS = (1, 8, 32, 64)
ISL, OSL = 64, 32
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


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    work = tmp_path_factory.mktemp("sim")
    with SimServerProcess(str(work), a_ms=A_MS, b_ms=B_MS, cap=CAP) as server:
        outcome = bench(BenchRequest((server.url,), "sim-model", LEVELS, ISL, OSL))
        stats = [server.stats(lv["window_start_unix_s"], lv["window_end_unix_s"]) for lv in outcome.data["levels"]]
        whole = server.stats(0, 4e9)
    config = work / "tiny-llama"
    config.mkdir()
    (config / "config.json").write_text(json.dumps(TINY_LLAMA))
    return outcome, stats, whole, config


def test_every_level_ran_with_exact_prompt_lengths(sweep):
    outcome, _, _, _ = sweep
    data = outcome.data
    assert outcome.stopped is None
    assert [lv["concurrency"] for lv in data["levels"]] == list(LEVELS)
    assert data["workload"]["method"] == "tokenizer" and data["workload"]["exact_fraction"] == 1.0
    for lv in data["levels"]:
        assert lv["errors"] == 0 and lv["requests"] == max(4 * lv["concurrency"], 16)
        assert lv["mean_input_tokens"] == ISL and lv["mean_output_tokens"] == OSL


def test_bench_output_rate_matches_what_the_server_counted_in_the_same_window(sweep):
    outcome, stats, _, _ = sweep
    for lv, st in zip(outcome.data["levels"], stats):
        server_tok_s = st["tokens"] / (lv["window_end_unix_s"] - lv["window_start_unix_s"])
        assert lv["output_tok_s"] == pytest.approx(server_tok_s, rel=0.10), lv["concurrency"]
        # and the /metrics counter the bench read itself agrees as well
        assert lv["output_tok_s"] == pytest.approx(lv["server"]["output_tok_s"], rel=0.10)


def measured_law(whole: dict) -> tuple[float, float]:
    """(a, b) of the step law the server actually ran on this machine (seconds, seconds per
    sequence): a least-squares line through its mean step time per batch size, over the batch
    sizes it ran at least 20 times (ramp-up and drain batches are rare and noisy)."""
    import numpy as np

    batches = [int(b) for b, n in whole["steps_by_batch"].items() if n >= 20]
    b, a = np.polyfit(batches, [whole["step_s_by_batch"][str(x)] for x in batches], 1)
    return float(a), float(b)


def test_server_steps_are_never_shorter_than_the_law(sweep):
    _, _, whole, _ = sweep
    for batch, step_s in whole["step_s_by_batch"].items():
        if whole["steps_by_batch"][batch] >= 20:
            assert step_s >= 0.98 * (A_MS + B_MS * int(batch)) / 1000, batch


def test_latencies_follow_the_measured_step_law(sweep):
    outcome, _, whole, _ = sweep
    one, _, thirty_two, sixty_four = outcome.data["levels"]
    step = {b: whole["step_s_by_batch"][str(b)] for b in (1, 32)}
    # TPOT = one step of the server: at B=1 (law 10.15 ms) and B=32 (law 14.8 ms), as measured.
    assert one["tpot_s"]["p50"] == pytest.approx(step[1], rel=0.15)
    assert thirty_two["tpot_s"]["p50"] == pytest.approx(step[32], rel=0.15)
    # At 64 in flight half the requests wait a whole request (32 steps of step(32): 0.47 s by the
    # law) before their first token; at 32 none waits.
    assert sixty_four["ttft_s"]["p50"] > 0.6 * 32 * step[32]
    assert thirty_two["ttft_s"]["p50"] < sixty_four["ttft_s"]["p50"] / 3
    assert sixty_four["achieved_concurrency"] > 50


def test_cap_is_the_batch_limit(sweep):
    outcome, stats, _, _ = sweep
    cap = outcome.data["cap"]
    # From the server's own metrics: it never ran more than 32, and at 64 in flight its queue grew.
    assert cap["max_running_requests"] == CAP
    assert cap["queue_grows_at_concurrency"] == 64
    # From throughput: flat from 32 on — when the client kept the server at its cap during the
    # 32 level. A CPU-starved client resubmits late, so the server's mean batch at that level
    # (tokens / steps it counted) falls short of 32 while 64 in flight keep it full: then 64
    # gains on 32 and the sweep shows no flattening; the metrics above still find the cap.
    level_32 = stats[LEVELS.index(32)]
    mean_batch = level_32["tokens"] / level_32["steps"]
    if mean_batch >= 0.9 * CAP:
        assert cap["flattens_at_concurrency"] == 32, mean_batch
    else:
        assert cap["flattens_at_concurrency"] in (32, None), mean_batch


def test_fitted_model_reproduces_the_server_step_time(sweep):
    outcome, _, whole, config = sweep
    desc = PredictRequest(model=str(config), gpu="h100-sxm", engine="vllm")
    fit = fit_bench(outcome.data, desc)
    # The fit sees the server only through the client (TPOT, tok/s). How far the client's TPOT
    # strays from the step the server measured at the same batch is this machine's client error;
    # the fit may stray twice that (at least the 10 % a quiet machine gives).
    steps = whole["step_s_by_batch"]
    client_error = max(
        abs(lv["tpot_s"]["p50"] / steps[str(min(lv["concurrency"], CAP))] - 1)
        for lv in outcome.data["levels"]
        if str(min(lv["concurrency"], CAP)) in steps
    )
    tolerance = max(0.10, 2 * client_error)
    checked = 0
    for batch, step_s in steps.items():
        if whole["steps_by_batch"][batch] < 20:
            continue  # ramp-up and drain batches seen a few times only
        checked += 1
        assert fit.model_step_s(float(batch)) == pytest.approx(step_s, rel=tolerance), (batch, client_error)
    assert checked >= 3  # at least B = 1, 8 and 32
    factors = fit.data["factors"]
    # On this law the kernels of a 2-layer model on an H100 are ~µs: the overheads are the a and
    # b the server ran (law 10 ms and 0.15 ms; measured a little longer under load). A client
    # that strays more than 5 % from the server's steps (a starved machine: one failure in nine
    # runs with four busy loops on two cores) widens each bound by what it strays beyond that.
    slack = max(0.0, tolerance - 0.10)
    a_s, b_s = measured_law(whole)
    a_fit, b_fit = factors["step_overhead_s"]["value"], factors["per_sequence_overhead_s"]["value"]
    seen = (a_fit, a_s, b_fit, b_s, client_error)
    assert (0.9 - slack) * a_s < a_fit < (1.25 + slack) * a_s, seen
    assert (0.66 - slack) * b_s < b_fit < (1.47 + slack) * b_s, seen
    assert fit.profile["fitted_on"]["concurrency_max"] == 64
    assert fit.data["max_running"] == CAP  # the observed cap was used
    # It reproduces the throughput it was fitted on (within 15 % at the median): no warning.
    error = fit.profile["fitted_on"]["median_abs_error"]
    assert error < 0.15 + slack and fit.warnings == [], (error, fit.warnings, client_error)


def _cli(*args, timeout=120, cwd=None):
    return subprocess.run(
        [sys.executable, "-c", "from tokenplan.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def test_fit_cli_writes_a_profile_that_predict_uses_and_warns_with(sweep, tmp_path):
    outcome, _, _, config = sweep
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(outcome.data))
    profile = tmp_path / "p.json"
    r = _cli(
        "bench",
        "--from-json",
        str(saved),
        "--fit",
        "-o",
        str(profile),
        "--config",
        str(config),
        "--gpu",
        "h100-sxm",
        "--engine",
        "vllm",
        "--plot",
        str(tmp_path / "b.png"),
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    p = _cli(
        "predict",
        "--model",
        str(config),
        "--gpu",
        "h100-sxm",
        "--engine",
        "vllm",
        "--isl",
        "64",
        "--osl",
        "32",
        "--concurrency",
        "16",
        "--calibration",
        str(profile),
        "--json",
    )
    inside = json.loads(p.stdout)
    assert not any("calibration profile" in w for w in inside["warnings"])
    # 16 in flight at 32-token answers: 16 / step(16), by the law 16 / 12.4 ms ≈ 1,290 tok/s; by
    # the step law the server measured on this machine, ±15 %.
    a_s, b_s = measured_law(sweep[2])
    assert inside["output_tok_s_total"] == pytest.approx(16 / (a_s + b_s * 16), rel=0.15)
    far = json.loads(
        _cli(
            "predict",
            "--model",
            str(config),
            "--gpu",
            "h100-sxm",
            "--engine",
            "vllm",
            "--isl",
            "64",
            "--osl",
            "32",
            "--concurrency",
            "512",
            "--calibration",
            str(profile),
            "--json",
        ).stdout
    )
    assert any("concurrency 512 is far outside" in w for w in far["warnings"])


def test_levels_too_short_for_a_queue_to_show_claim_no_cap_from_metrics(tmp_path):
    # A break-it pass, 1 run in 8: a server capped at 16, levels of 16 requests at 2 and 4 in
    # flight (0.1–0.2 s each, one /metrics snapshot every 0.5 s: one per level, read as the level's
    # requests arrive) printed "queue grows at 4, server runs at most 1 (from metrics)" from a
    # snapshot of 1 running and 2 waiting, and --fit used that cap of 1. The server never queues
    # below 16: no run may claim a cap from metrics (a queue must stay for two snapshots after the
    # first, server_info.QUEUE_SAMPLES).
    with SimServerProcess(str(tmp_path), a_ms=2, b_ms=0.05, cap=16) as server:
        for _ in range(4):
            outcome = bench(BenchRequest((server.url,), "sim-model", (2, 4), 16, 8, num_prompts=16))
            cap, levels = outcome.data["cap"], outcome.data["levels"]
            # (throughput alone may flatten on a busy machine: that is not the metrics' claim)
            assert cap["source"] != "metrics" and cap["max_running_requests"] is None, levels
            assert cap["queue_grows_at_concurrency"] is None, levels
            assert all(lv["server"]["queued_samples"] in (None, 0) for lv in levels), levels


def test_unreachable_endpoint_is_one_line_and_exit_2():
    r = _cli("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "cannot reach http://127.0.0.1:9/v1" in r.stderr
    assert "Traceback" not in r.stderr


def test_wrong_model_name_names_what_is_served(tmp_path):
    with SimServerProcess(str(tmp_path), a_ms=10, b_ms=0.1, cap=4) as server:
        r = _cli("bench", "--endpoint", server.url, "--model", "other", "--concurrency", "1")
    assert r.returncode == 2 and "does not serve model 'other' (it serves: sim-model)" in r.stderr
    assert r.stderr.strip().count("\n") == 0


def test_server_dying_mid_sweep_keeps_the_finished_levels(tmp_path):
    # Chat requests: 1 probe; level 1: 1 warm-up + 8; level 4: 4 + 8 → 22. The 26th (inside level
    # 16's warm-up) kills the server.
    saved = tmp_path / "partial.json"
    with SimServerProcess(str(tmp_path), a_ms=10, b_ms=0.1, cap=16, exit_after_requests=26) as server:
        r = _cli(
            "bench",
            "--endpoint",
            server.url,
            "--model",
            "sim-model",
            "--concurrency",
            "1,4,16,64",
            "--isl",
            "16",
            "--osl",
            "4",
            "--num-prompts",
            "8",
            "--save",
            str(saved),
        )
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: sweep stopped:") and "stopped answering during concurrency 16" in last
    assert "2 levels kept" in last and "Traceback" not in r.stderr
    data = json.loads(saved.read_text())
    assert [lv["concurrency"] for lv in data["levels"]] == [1, 4]
    assert "concurrency 16" in data["stopped"]
    assert "│" in r.stdout  # the table of the kept levels was printed


def test_without_a_tokenizer_the_length_is_calibrated_on_usage(tmp_path):
    # One word = one token, template 3 + generation prompt 2: probes of 1 and 200 words count 6 and
    # 205, so 1 token per word and 5 template tokens; 64 tokens → 59 words → exactly 64.
    with SimServerProcess(str(tmp_path), a_ms=10, b_ms=0.1, cap=8, tokenize=False) as server:
        outcome = bench(replace(BenchRequest((server.url,), "sim-model", (2,), 64, 4), num_prompts=4))
    assert outcome.data["workload"]["method"] == "approximation"
    assert outcome.data["levels"][0]["mean_input_tokens"] == 64
    assert any("approximated" in n for n in outcome.data["notes"])


def test_duration_mode_stops_sending_after_the_duration(tmp_path):
    with SimServerProcess(str(tmp_path), a_ms=10, b_ms=0.1, cap=8) as server:
        outcome = bench(
            replace(BenchRequest((server.url,), "sim-model", (4,), 16, 8), duration_s=1.0, warmup_requests=0)
        )
        step_s = server.stats(0, 4e9)["step_s_by_batch"]["4"]  # law 10.4 ms; measured here
    (lv,) = outcome.data["levels"]
    # 4 requests of 8 steps each: one round takes 8 × step(4) (83 ms by the law: ~12 rounds in 1 s,
    # 48 requests); sending stops at 1 s and the last round drains (at most one more round).
    round_s = 8 * step_s
    assert 1.0 <= lv["duration_s"] < 1.0 + 2 * round_s + 0.1
    expected = 4 * 1.0 / round_s
    assert 0.8 * expected <= lv["requests"] <= 1.2 * expected + 8


def test_a_plot_name_matplotlib_writes_no_format_for_is_refused_before_the_sweep(tmp_path):
    # a new-user pass: --plot bench.txt measured every level, then ended in a traceback
    # (matplotlib: "Format 'txt' is not supported"); the endpoint is unreachable here, so had the
    # name passed, that would be the error
    plot = str(tmp_path / "bench.txt")
    r = _cli("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1", "--plot", plot)
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: --plot {plot!r} is not allowed (allowed: a .png file, or another format")
    assert "pdf" in r.stderr and "svg" in r.stderr and r.stderr.count("\n") == 1


def test_save_and_plot_paths_are_checked_before_the_sweep(tmp_path):
    # The endpoint is unreachable: had the paths passed, that would be the error.
    for option, value, what in (
        ("--save", "/nonexistent/x.json", "a JSON file path"),
        ("--plot", "/nonexistent/x.png", "a PNG file path"),
    ):
        r = _cli("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1", option, value)
        assert (r.returncode, r.stderr) == (
            2,
            f"error: {option} {value!r} is not allowed (allowed: {what} in an "
            "existing, writable directory; /nonexistent does not exist)\n",
        )
    r = _cli(
        "bench",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--concurrency",
        "1",
        "--fit",
        "-o",
        str(tmp_path),
        "--config",
        "qwen3.6-27b",
        "--gpu",
        "h100-sxm",
    )
    assert r.returncode == 2 and r.stderr.startswith(f"error: --out {str(tmp_path)!r} is not allowed")
    r = _cli("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1,,2")
    assert (r.returncode, r.stderr) == (
        2,
        "error: --concurrency '1,,2' is not allowed (allowed: comma-separated "
        "integers ≥ 1 with no empty entry, e.g. 1,4,16,64)\n",
    )


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("./missing/cfg", "error: --config './missing/cfg' is not allowed (allowed: an existing config.json"),
        ("qwen9", "error: --config 'qwen9' is not in the catalog; did you mean"),
        ("rows.jsonl", "error: --config rows.jsonl: line 2: not valid JSON"),
    ],
)
def test_a_bad_fit_config_is_named_as_bench_spells_it(tmp_path, config, said):
    # a new-user pass: a bad --config was refused as "--model …", which in bench is the served
    # model's name; a JSONL given as --config named the file only
    (tmp_path / "rows.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    fit = ("--fit", "-o", "p.json", "--config", config, "--gpu", "h100-sxm")
    r = _cli("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1", *fit, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(said) and r.stderr.count("\n") == 1


def test_a_save_that_fails_at_the_end_prints_the_measurement_instead(sweep, tmp_path, monkeypatch, capsys):
    import tokenplan.api.bench as api_bench
    from tokenplan.cli import main

    outcome = sweep[0]
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(outcome.data))
    monkeypatch.setattr(api_bench, "check_output_file", lambda *args: None)  # the directory vanished meanwhile
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "tokenplan",
            "bench",
            "--from-json",
            str(saved),
            "--save",
            "/nonexistent/x.json",
            "--plot",
            "/nonexistent/x.png",
        ],
    )
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    assert exited.value.code == 2 and "Traceback" not in captured.err
    assert json.loads(captured.out) == json.loads(saved.read_text())  # every level, on stdout
    assert captured.err == (
        "error: could not write --save '/nonexistent/x.json': No such file or directory; "
        "--plot '/nonexistent/x.png': No such file or directory; the bench JSON is printed "
        "on stdout\n"
    )


def test_a_fit_far_from_the_measurement_warns_with_the_figure_and_still_writes(sweep, tmp_path):
    outcome, _, _, config = sweep
    # The throughput the levels report, 80× below what their TPOT implies (e.g. a wrong GPU count):
    # the fit follows TPOT, so each level's predicted tok/s per GPU is ~80× the measured one.
    data = json.loads(json.dumps(outcome.data))
    for lv in data["levels"]:  # its tokens with it: a rate that is not tokens / duration is refused
        lv["output_tok_s"] /= 80
        lv["output_tokens"] /= 80
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(data))
    profile = tmp_path / "p.json"
    r = _cli(
        "bench",
        "--from-json",
        str(saved),
        "--fit",
        "-o",
        str(profile),
        "--config",
        str(config),
        "--gpu",
        "h100-sxm",
        "--engine",
        "vllm",
    )
    assert r.returncode == 0, r.stderr
    (warning,) = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    error = json.loads(profile.read_text())["fitted_on"]["median_abs_error"]
    assert error == pytest.approx(79, rel=0.2)  # |80 × (1 ± 15 %) − 1|
    assert f"median |predicted/measured − 1| = {error * 100:,.0f} % over 4 levels" in warning
