"""The ``tokenplan plan`` command ``generate --dry-run`` suggests is one ``plan`` accepts (newuser
finding 5: with ``--max-tokens`` at or below the plan's default mean output, 2,500, the suggestion
was ``--max-tokens 8`` alone, and plan refused a cap below its default mean).

The default outputs: lognormal, mean 2,500, σ 1, so μ = ln 2500 − σ²/2 = 7.824 − 0.5 = 7.324, and
E[min(L, c)] = 2500·Φ(ln c − μ − 1) + c·(1 − Φ(ln c − μ)) (plan states the mean at its 32,768 cap,
which moves these by under 0.3 %).
"""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.tiny_model import build_tokenizer

from tokenplan.runner.dryrun import DryRun

RUN = "from tokenplan.cli import main; main()"
CATALOG_MODELS = Path(__file__).resolve().parents[2] / "src" / "tokenplan" / "catalog" / "models"


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        # P(L < 8) = Φ(ln 8 − 7.324) = Φ(−5.24) ≈ 1e-7: every output runs to the cap
        (8, "--osl 8 --osl-sigma 0"),
        # 2500·Φ(7.601 − 8.324) + 2000·(1 − Φ(7.601 − 7.324)) = 2500·0.2348 + 2000·0.3909 = 587 + 782 = 1,369
        (2000, "--osl 1369 --max-tokens 2000"),
        # above the default mean: the plan's own output distribution, capped there
        (4096, "--max-tokens 4096"),
    ],
)
def test_the_suggested_command_runs_in_plan(tmp_path, max_tokens, expected):
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    done = _cli(
        "generate", "in.jsonl", "--out", "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", "qwen3-8b",
        "--dry-run", "--json", "--max-tokens", str(max_tokens), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)["plan_command"]
    # the served model is named, or plan would plan its default one (a new-user pass)
    assert command.endswith(" --model qwen3-8b")
    command = command.removesuffix(" --model qwen3-8b")
    head, osl = command.split(" --", 2)[0], command.split(" ", 4)[4]
    assert head == "tokenplan plan" and command.startswith("tokenplan plan --samples 1 ")
    if expected.startswith("--osl 1369"):  # 1,369 by hand, within the 0.3 % the 32,768 cap moves it
        assert re.fullmatch(r"--osl (\d+) --max-tokens 2000", osl)
        assert int(osl.split()[1]) == pytest.approx(1369, rel=0.003)
    else:
        assert osl == expected
    plan = _cli(*shlex.split(command)[1:], "--model", "qwen3-8b", "--gpu", "8xb200", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["job"]["samples"] == 1 and json.loads(plan.stdout)["model"] == "qwen3-8b"


def test_counted_prompts_of_one_length_get_a_cap_above_their_mean():
    # every prompt 9 tokens: mean 9, σ 0, longest 9; plan wants --isl-cap above --isl
    counts = DryRun(3, 0, 3, 3, 9.0, 0.0, 9, "tok")
    assert (
        counts.plan_command(4096)
        == "tokenplan plan --samples 3 --isl 9 --isl-sigma 0.00 --isl-cap 10 --max-tokens 4096"
    )
    # a spread of lengths keeps the longest as the cap
    assert "--isl 700 --isl-sigma 0.50 --isl-cap 3000 " in DryRun(3, 0, 3, 3, 700.0, 0.5, 3000, "tok").plan_command(
        4096
    )


def test_the_dry_run_says_the_warnings_the_run_would_say_first(tmp_path):
    # new-user finding: a plan made for another model was warned about by the run, not by --dry-run,
    # where it is wanted; --n 2 at temperature 0 likewise (identical samples)
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    (tmp_path / "plan.json").write_text(json.dumps({"model": "qwen3.6-27b", "job": {}, "recommended": None}))
    done = _cli(
        "generate", "in.jsonl", "--out", "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", "llama-3.1-8b",
        "--plan", "plan.json", "--n", "2", "--dry-run", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings[0] == (
        "warning: the plan plan.json was made for model 'qwen3.6-27b', but --model is 'llama-3.1-8b': "
        "its concurrency and throughput may not fit this model"
    )
    assert warnings[1].startswith("warning: --n 2 at temperature 0 (greedy decoding): the 2 samples of each row")
    assert json.loads(done.stdout)["rows"] == 1 and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("servers", "endpoints", "warned"), [(8, 1, True), (8, 8, False), (1, 1, False), (None, 1, False)]
)
def test_a_run_on_fewer_servers_than_the_plan_launches_is_told_what_to_expect(tmp_path, servers, endpoints, warned):
    # the plan's tok/s is its launch's servers together (SGLang TP1×DP8: 8 servers; vLLM DP behind
    # one server: 1): a run on 1 of 8 expects 1/8 = 12 % of it; a plan written before num_servers
    # (None) says nothing
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    recommended = {"option": "8× b200", "concurrency_per_endpoint": 447, "output_tok_s_total": 65_000.0,
                   "num_replicas": 8, "configuration": "TP1×DP8"}  # fmt: skip
    if servers is not None:
        recommended["num_servers"] = servers
    (tmp_path / "plan.json").write_text(
        json.dumps({"schema_version": 1, "model": "qwen3-8b", "recommended": recommended})
    )
    urls = [a for i in range(endpoints) for a in ("--endpoint", f"http://127.0.0.1:{9 + i}/v1")]
    done = _cli(
        "generate", "in.jsonl", "--out", "run", *urls, "--model", "qwen3-8b", "--plan", "plan.json", "--dry-run",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the figure progress and summary.json then compare with: 65,000 × 1/8 = 8,125 tok/s
    line = (
        "the plan's 65,000 tok/s is for the 8 servers its launch runs; 1 --endpoint given, so expect about "
        "12% of it (8,125 tok/s, the figure progress and summary.json compare with)"
    )
    assert (line in done.stdout + done.stderr) is warned


def test_the_dry_run_names_the_rows_it_sets_aside(tmp_path):
    # new-user finding: "5 rejected" with no file, line or reason, and a dry run writes no rejects.jsonl
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"foo": 1}\n{not json\n')
    done = _cli(
        "generate", "in.jsonl", "--out", "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", "qwen3-8b",
        "--dry-run", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["rejected_rows"] == 2 and len(record["rejects"]) == 2
    assert record["rejects"][0].startswith("in.jsonl line 2: unknown shape")
    assert record["rejects"][1].startswith("in.jsonl line 3: invalid JSON")
    assert not (tmp_path / "run").exists()


def test_the_dry_run_says_the_concurrency_the_run_would_use(tmp_path) -> None:
    # A new-user pass: the plan's 447 per endpoint appeared only in a real run. The plan file says
    # its own figure (concurrency_per_endpoint); without a plan or --concurrency it is 64
    # (runner.prepare.DEFAULT_CONCURRENCY); a given --concurrency needs no note.
    (tmp_path / "in.jsonl").write_text('{"prompt": "hi"}\n')
    (tmp_path / "plan.json").write_text(
        json.dumps({"recommended": {"concurrency_per_endpoint": 200, "output_tok_s_total": 1000.0, "num_servers": 1}})
    )
    base = ("generate", "in.jsonl", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", "run", "--dry-run")
    planned = _cli(*base, "--plan", "plan.json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "note: concurrency 200 per endpoint (the plan)" in planned.stderr.splitlines()
    default = _cli(*base, cwd=tmp_path)
    assert "note: concurrency 64 per endpoint (the default)" in default.stderr.splitlines()
    given = _cli(*base, "--concurrency", "5", cwd=tmp_path)
    assert not [line for line in given.stderr.splitlines() if "per endpoint" in line]


@pytest.mark.parametrize("words", [1, 800])
def test_a_plan_cap_above_the_served_models_context_is_planned_at_the_context(tmp_path, words):
    # a new-user pass: --plan made for another job (output cap 32,768) with a model of 2,048 tokens:
    # each request asks for its context less its prompt (runner.defaults.choose_sampling), and the
    # suggested command carried --max-tokens 32768 with the default 2,500-token mean, which plan
    # refused ("a request of 2,523 tokens exceeds … context of 2,048"); a break-it pass then saw a
    # cap of the whole context refused beside prompts of 812 tokens. It is planned at what the mean
    # prompt leaves: --max-tokens C = 2,048 − ISL, and --osl the default outputs' mean cut at C,
    # E[min(L, C)] = 2500·Φ(ln C − μ − 1) + C·(1 − Φ(ln C − μ)), μ = ln 2500 − 1/2 (the module
    # docstring; at C = 2,038: 2500·Φ(−0.704) + 2038·(1 − Φ(0.296)) = 2500·0.2407 + 2038·0.3836
    # = 602 + 782 = 1,384).
    from scipy.stats import norm

    config = json.loads((CATALOG_MODELS / "qwen3-8b.json").read_text())
    model = tmp_path / "small"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2048}))
    build_tokenizer(model)  # the prompts are counted (--isl …), as with the served model's own tokenizer
    prompt = " ".join(["hello"] * words) if words > 1 else "hi"
    (tmp_path / "in.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": prompt}]}) + "\n")
    (tmp_path / "plan.json").write_text(
        json.dumps({"model": str(model), "job": {"osl_cap_tokens": 32768}, "recommended": None})
    )
    done = _cli(
        "generate", "in.jsonl", "--out", "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", str(model),
        "--plan", "plan.json", "--dry-run", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)["plan_command"]
    found = re.search(r"--isl (\d+) .* --osl (\d+) --max-tokens (\d+)", command)
    assert found is not None, command
    isl, osl, cap = (int(g) for g in found.groups())
    assert cap == 2048 - isl and (words == 1) is (isl < 20)  # "hello" is one token of the tiny BPE
    mu = math.log(2500) - 0.5
    mean_cut = 2500 * norm.cdf(math.log(cap) - mu - 1) + cap * (1 - norm.cdf(math.log(cap) - mu))
    assert osl == pytest.approx(mean_cut, rel=0.003)  # the 32,768 cap moves it by under 0.3 %
    plan = _cli(*shlex.split(command)[1:], "--gpu", "b200", "--json")
    assert plan.returncode == 0, plan.stderr


def test_the_dry_run_says_where_the_longest_prompt_fills_the_context(tmp_path):
    # a break-it pass: every prompt past the context, and the dry run said nothing of it. 1,300
    # "hello" words take more than 2,048 tokens of the tiny BPE (800 took 1,607 above)
    config = json.loads((CATALOG_MODELS / "qwen3-8b.json").read_text())
    model = tmp_path / "small"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2048}))
    build_tokenizer(model)
    row = {"messages": [{"role": "user", "content": " ".join(["hello"] * 1300)}]}
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    done = _cli(
        "generate", "in.jsonl", "--out", "run", "--endpoint", "http://127.0.0.1:9/v1", "--model", str(model),
        "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("past context")]
    assert line.endswith("fills the model's context of 2,048 tokens: a server refuses such rows (a run skips them)")
