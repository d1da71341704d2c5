"""Issue 15 round trip: a ShareGPT JSON array and an OpenAI Batch file go through ``generate``
against the fault server and come out as a SpecForge JSONL and a Batch output file, read back
field by field; plus --plan's max_tokens, --limit, --dry-run and the SIGTERM accounting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess, answer_for

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.report.generate import summary_text

SHAREGPT = [  # LLaMA-Factory's sharegpt layout, shipped as one JSON array
    {
        "id": "s1",
        "system": "Be brief.",
        "category": "math",
        "conversations": [{"from": "human", "value": "1+1?"}, {"from": "gpt", "value": "old answer"}],
    },
    {
        "id": "s2",
        "category": "chat",
        "lang": "en",
        "conversations": [
            {"from": "human", "value": "hi"},
            {"from": "gpt", "value": "old"},
            {"from": "human", "value": "bye"},
            {"from": "gpt", "value": "old"},
        ],
    },
]
BATCH = [
    {
        "custom_id": "b1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "x", "messages": [{"role": "user", "content": "q1"}], "max_tokens": 4, "temperature": 0.25},
    },
    {
        "custom_id": "b2",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "x", "messages": [{"role": "user", "content": "q2"}], "top_p": 0.5, "seed": 11},
    },
]


CLI = [sys.executable, "-c", "import sys; from tokenplan.cli import main; sys.argv[0] = 'tokenplan'; main()"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sharegpt_array_to_specforge_jsonl_field_by_field(tmp_path: Path) -> None:
    data = tmp_path / "sharegpt.json"
    data.write_text(json.dumps(SHAREGPT, indent=1))
    out = tmp_path / "train.jsonl"
    with FaultServerProcess(str(tmp_path), tokens=16) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                export=out,
            )
        )
    assert (result.units_total, result.stored, result.accounting_ok, result.export_rows) == (2, 2, True, 2)
    rows = {r["id"]: r for r in _lines(out)}
    s1, s2 = rows["s1"], rows["s2"]
    # every input field kept; the system field became the first turn
    assert (s1["category"], s2["category"], s2["lang"]) == ("math", "chat", "en")
    sent = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}]
    expect = answer_for({"messages": sent, "max_tokens": 64}, 16)["choices"][0]["message"]
    assert s1["conversations"] == sent + [
        {"role": "assistant", "content": expect["content"], "reasoning_content": expect["reasoning_content"]}
    ]
    assert (s1["status"], s2["status"]) == ("success", "success")
    # the second turn is asked over the regenerated first answer (without its thinking)
    first = [{"role": "user", "content": "hi"}]
    a1 = answer_for({"messages": first, "max_tokens": 64}, 16)["choices"][0]["message"]
    second = first + [{"role": "assistant", "content": a1["content"]}, {"role": "user", "content": "bye"}]
    a2 = answer_for({"messages": second, "max_tokens": 64}, 16)["choices"][0]["message"]
    assert [m["content"] for m in s2["conversations"]] == ["hi", a1["content"], "bye", a2["content"]]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["export"] == {
        "format": "jsonl",
        "path": str(out),
        "written": 2,
        "dropped_length": 0,
        "dropped_think_open": 0,
        "dropped_empty_answer": 0,
        "dropped_think_marker": 0,
        "failed": 0,
        "unvalidated": 0,
        "no_reasoning": 0,
        "tool_calls": 0,
        "partial": False,  # no unit left in errors.jsonl: under the name asked for
    }


def test_batch_file_to_batch_output_with_each_rows_sampling_honoured(tmp_path: Path) -> None:
    data = tmp_path / "batch.jsonl"
    data.write_text("".join(json.dumps(b) + "\n" for b in BATCH))
    bodies, out = tmp_path / "bodies.jsonl", tmp_path / "results.jsonl"
    with FaultServerProcess(str(tmp_path), tokens=16, log_bodies=str(bodies)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                temperature=0.7,
                mode="complete",
                export=out,
                export_format="openai-batch",
            )
        )
    assert (result.stored, result.accounting_ok) == (2, True)
    sent = {b["messages"][0]["content"]: b for b in _lines(bodies)}
    assert (sent["q1"]["max_tokens"], sent["q1"]["temperature"]) == (4, 0.25)  # the row's own values
    assert (sent["q2"]["max_tokens"], sent["q2"]["temperature"], sent["q2"]["top_p"], sent["q2"]["seed"]) == (
        64,
        0.7,
        0.5,
        11,
    )  # the job's, plus the row's top_p and seed
    lines = {line["custom_id"]: line for line in _lines(out)}
    assert set(lines) == {"b1", "b2"}
    for custom_id, question, max_tokens in (("b1", "q1", 4), ("b2", "q2", 64)):
        line = lines[custom_id]
        assert set(line) == {"id", "custom_id", "response", "error"} and line["error"] is None
        assert line["response"]["status_code"] == 200 and line["response"]["request_id"].startswith("req_")
        body = line["response"]["body"]
        expect = answer_for({"messages": [{"role": "user", "content": question}], "max_tokens": max_tokens}, 16)
        assert body["choices"][0]["message"] == {"role": "assistant", **expect["choices"][0]["message"]}
        assert body["choices"][0]["finish_reason"] == expect["choices"][0]["finish_reason"]
        assert body["usage"] == expect["usage"]
    # b1 asked for 4 tokens of a 16-token answer: cut by its own max_tokens
    assert lines["b1"]["response"]["body"]["choices"][0]["finish_reason"] == "length"


def test_plan_max_tokens_is_carried_over_and_said(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "prompt": "x"}\n')
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "model": "fault-model",
                "job": {"osl_cap_tokens": 32768.0},
                "recommended": {"concurrency_per_endpoint": 4, "output_tok_s_total": 100.0, "num_replicas": 1},
            }
        )
    )
    bodies = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), log_bodies=str(bodies)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)], out_dir=tmp_path / "run", endpoints=[server.url], model="fault-model", plan=plan
            )
        )
    assert _lines(bodies)[0]["max_tokens"] == 32768
    assert f"max_tokens 32,768 (the plan {plan}'s output cap)" in result.notes


def test_limit_sends_only_the_first_rows(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(10)))
    with FaultServerProcess(str(tmp_path)) as server:

        def run(limit: int | None):  # noqa: ANN202 - a GenerateResult
            return generate(
                GenerateRequest.build(
                    inputs=[str(data)],
                    out_dir=tmp_path / "run",
                    endpoints=[server.url],
                    model="fault-model",
                    max_tokens=8,
                    limit=limit,
                    export=str(tmp_path / "train.jsonl"),
                )
            )

        result = run(3)
        assert (result.units_total, result.stored, result.accounting_ok) == (3, 3, True)
        # a trial, said so (a new-user pass: "[ok]" and the export under the job's own name):
        # 10 rows − 3 sent = 7 left out; the export takes the .partial name
        assert (result.summary["limit"], result.summary["left_out_by_limit"], result.left_out_by_limit) == (3, 7, 7)
        assert "[ok as a trial: --limit 3 leaves 7 units of the input unsent]" in summary_text(result)
        assert not (tmp_path / "train.jsonl").exists() and (tmp_path / "train.partial.jsonl").exists()
        assert "partial: a --limit trial (7 units of the input unsent), so not train.jsonl" in summary_text(result)
        # the run without --limit sends the other 7, writes train.jsonl and removes the partial file
        whole = run(None)
        assert (whole.units_total, whole.stored, whole.already_done, whole.left_out_by_limit) == (10, 10, 3, 0)
        assert (tmp_path / "train.jsonl").exists() and not (tmp_path / "train.partial.jsonl").exists()
        assert "[ok]" in summary_text(whole)
        # a --limit 3 rerun of the finished run leaves nothing unsent: the 7 past the limit are
        # stored (a second break-it pass: it said 7 unsent and wrote all 10 to train.partial.jsonl)
        again = run(3)
    assert (again.left_out_by_limit, again.outside_input, again.export_rows) == (0, 7, 10)
    assert "[ok]" in summary_text(again) and not (tmp_path / "train.partial.jsonl").exists()


def test_dry_run_counts_rows_requests_and_prompt_tokens_and_sends_nothing(tmp_path: Path) -> None:
    data = tmp_path / "sharegpt.json"
    data.write_text(json.dumps(SHAREGPT + [{"id": "bad"}]))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path("src").resolve()), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [
            *CLI,
            "generate",
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--dry-run",
            "--json",
            "--max-tokens",
            "512",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    # 2 usable rows (1 reject); s1 asks once, s2 twice (two user turns) → 3 requests
    assert (record["rows"], record["rejected_rows"], record["units"], record["requests"]) == (2, 1, 2, 3)
    assert record["prompt_tokens_mean"] is None  # no tokenizer for "m"
    # --max-tokens 512 is below the plan's default mean output (2,500), which plan refuses as a cap:
    # the suggestion states the default outputs cut at 512. Lognormal mean 2,500, σ 1 (μ = ln 2500 −
    # 0.5 = 7.324): E[min(L, 512)] = 2500·Φ(ln 512 − μ − 1) + 512·(1 − Φ(ln 512 − μ))
    # = 2500·Φ(−2.086) + 512·(1 − Φ(−1.086)) = 2500·0.0185 + 512·0.8613 = 46.2 + 441.0 = 487.2 → 487
    # "m" is no model plan knows (not a catalog name, a Hugging Face id of one or a config): the
    # command asks for its config.json rather than naming a model plan would refuse
    assert record["plan_command"] == "tokenplan plan --samples 3 --osl 487 --max-tokens 512 --model CONFIG.json"
    assert not (tmp_path / "run").exists()


def test_after_sigterm_stored_skipped_errors_and_not_yet_sent_add_up_to_the_input(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(120)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path("src").resolve()), os.environ.get("PYTHONPATH")])),
    }
    with FaultServerProcess(str(tmp_path), delay_s=0.2) as server:
        proc = subprocess.Popen(
            [
                *CLI,
                "generate",
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--max-tokens",
                "8",
                "--concurrency",
                "2",
                "--grace-s",
                "5",
                "--quiet",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        shards = tmp_path / "run" / "shards"
        # readiness: wait until some rows are stored (the shard has lines), then stop the run
        import time

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            files = list(shards.glob("part-*.jsonl")) if shards.exists() else []
            if files and files[0].read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["units_total"] == 120 and summary["interrupted"] is True
    assert summary["not_yet_sent"] > 0
    assert summary["stored"] + summary["skipped"] + summary["errors"] + summary["not_yet_sent"] == 120


def test_generation_config_sets_the_default_sampling_and_says_so(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "prompt": "x"}\n')
    model_dir = tmp_path / "qwen3"
    model_dir.mkdir()
    # Qwen3's published thinking-mode defaults (huggingface.co/Qwen/Qwen3-8B generation_config.json)
    (model_dir / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20})
    )
    bodies = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), log_bodies=str(bodies)) as server:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=8,
                generation_config=model_dir,
                top_k=40,
            )
        )
    body = _lines(bodies)[0]
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.6, 0.95, 40)  # --top-k wins over the file
    assert f"sampling from {model_dir}/generation_config.json: temperature 0.6, top_p 0.95" in result.notes


def test_a_contradicting_extra_body_is_refused_in_one_line_before_sending(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "prompt": "x"}\n')
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path("src").resolve()), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [
            *CLI,
            "generate",
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--thinking",
            "off",
            "--extra-body",
            '{"chat_template_kwargs": {"enable_thinking": true, "reasoning_effort": "low"}}',
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert (
        "chat_template_kwargs.enable_thinking: --extra-body sets True but tokenplan's options set False" in done.stderr
    )
    assert not (tmp_path / "run").exists()


def test_dry_run_counts_prompt_tokens_with_a_local_tokenizer(tmp_path: Path) -> None:
    from tests.support.tiny_model import build_tokenizer

    from tokenplan.runner.dryrun import dry_run

    tokenizer_dir = tmp_path / "tok"
    tokenizer = build_tokenizer(tokenizer_dir)
    data = tmp_path / "sharegpt.json"
    data.write_text(json.dumps(SHAREGPT))
    counts = dry_run([data], "regenerate", 1, None, tokenizer_dir)
    # the same prompts rendered by the tokenizer's own chat template, counted here independently
    prompts = [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}],
        [{"role": "user", "content": "hi"}],
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "old"},
            {"role": "user", "content": "bye"},
        ],
    ]

    def length(prompt: list[dict]) -> int:
        encoded = tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True)
        return len(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)  # BatchEncoding in transformers 5

    lengths = [length(p) for p in prompts]
    assert counts.requests == 3 and counts.prompt_tokens_max == max(lengths)
    assert counts.prompt_tokens_mean == pytest.approx(sum(lengths) / 3)


def test_batch_output_has_a_line_for_refused_rows_and_drop_length_counts(tmp_path: Path) -> None:
    data = tmp_path / "batch.jsonl"
    data.write_text("".join(json.dumps(b) + "\n" for b in BATCH))
    refused_out, cut_out = tmp_path / "refused.jsonl", tmp_path / "cut.jsonl"
    # A served context of 32 tokens: each prompt is len('[{"role": "user", "content": "q1"}]') // 4 = 8
    # tokens to the server, so b1 (8 + its own max_tokens 4 = 12) fits and b2 (8 + 64 = 72) is refused
    # with 400. (Every row refused alike would be a configuration error: test_generate_refusals.py.)
    with FaultServerProcess(str(tmp_path), context=32) as server:
        generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "refused",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                mode="complete",
                export=refused_out,
                export_format="openai-batch",
            )
        )
    lines = {line["custom_id"]: line for line in _lines(refused_out)}
    assert set(lines) == {"b1", "b2"}
    assert lines["b1"]["response"]["status_code"] == 200
    assert lines["b2"]["response"]["status_code"] == 400 and lines["b2"]["error"] is None
    assert lines["b2"]["response"]["body"]["error"]["message"].startswith("This model's maximum context length is 32")
    with FaultServerProcess(str(tmp_path), tokens=16) as server:  # b1 asks for 4 of 16 tokens: cut
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "cut",
                endpoints=[server.url],
                model="fault-model",
                max_tokens=64,
                mode="complete",
                export=cut_out,
                drop_length=True,
            )
        )
    assert [row["id"] for row in _lines(cut_out)] == ["b2"]
    assert (result.summary["export"]["written"], result.summary["export"]["dropped_length"]) == (1, 1)


def test_an_input_whose_every_row_is_rejected_exits_2_naming_the_rejects(tmp_path: Path) -> None:
    data = tmp_path / "odd.jsonl"
    data.write_text('{"text": "a"}\n{"text": "b"}\n')
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path("src").resolve()), os.environ.get("PYTHONPATH")])),
    }
    with FaultServerProcess(str(tmp_path)) as server:
        done = subprocess.run(
            [
                *CLI,
                "generate",
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--model",
                "fault-model",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "at least one usable row (all 2 rows were rejected; the reasons are in" in done.stderr
    assert len((tmp_path / "run" / "rejects.jsonl").read_text().splitlines()) == 2
