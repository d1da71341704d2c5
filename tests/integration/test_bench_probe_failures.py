"""``bench`` against a server that answers its first probe and fails the next: one line naming the
server (ServerError), never a traceback; and a dataset whose text no request can carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.bench import BenchRequest, bench
from tokenplan.bench.workload import dataset_workload
from tokenplan.errors import ConfigError, ServerError


def test_a_probe_that_fails_after_the_first_is_one_line(tmp_path: Path) -> None:
    # the 1-token probe is answered; the next (no /tokenize endpoint: the second probe) gets a 500
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"answer": True}] + [{"status": 500, "raw": '{"error": "boom"}'}] * 50))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        with pytest.raises(ServerError, match=r"a 1-token probe request failed"):
            bench(BenchRequest((server.url,), "fault-model", (1,), 16, 4, num_prompts=2, warmup_requests=0))


def test_a_dataset_line_with_a_lone_surrogate_is_refused_and_a_bom_is_read(tmp_path: Path) -> None:
    bad = tmp_path / "sur.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "\\ud800"}\n')  # JSON's escape decodes to a lone surrogate
    with pytest.raises(ConfigError, match=r"line 2: holds a lone surrogate"):
        dataset_workload(str(bad), 8)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"prompt": "hi"}\n')  # generate reads a UTF-8 BOM; bench does too
    assert len(dataset_workload(str(bom), 8).prompts) == 1


def test_one_transient_500_on_the_probe_is_tried_again(tmp_path: Path) -> None:
    # A break-it pass saw one random 500 end the whole sweep at its first probe. The probe is now
    # tried again (3 tries, as generate retries a 5xx): a 500, then normal answers, runs the sweep.
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"status": 500, "raw": '{"error": "boom"}'}] + [{"answer": True}] * 200))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        outcome = bench(BenchRequest((server.url,), "fault-model", (1,), 16, 4, num_prompts=2, warmup_requests=0))
    assert outcome.stopped is None and outcome.data["levels"][0]["requests"] == 2


def test_a_server_claiming_more_tokens_than_the_probe_allowed_is_one_line(tmp_path: Path) -> None:
    # The 1-token probe (max_tokens 1) answered with completion_tokens 999,999 on each of its 3
    # tries: malformed usage, the sweep does not start
    answer = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 999_999},
    }
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"status": 200, "raw": json.dumps(answer)}]))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        with pytest.raises(ServerError) as stop:
            bench(BenchRequest((server.url,), "fault-model", (1,), 16, 4, num_prompts=2, warmup_requests=0))
    assert str(stop.value) == (
        f"{server.url}: a 1-token probe request failed: protocol: usage.completion_tokens is 999,999, "
        "more than the request's max_tokens (allowed: 0 to 1)"
    )
