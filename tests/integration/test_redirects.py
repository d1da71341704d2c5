"""A redirect is not followed, by ``generate``'s client, ``bench``'s, or the client itself: one line
names where it points and the ``--endpoint`` to give, and nothing is sent to the other server.

Followed, a 301/302 turned the chat ``POST`` into a ``GET`` the server answered 404 ("check
--endpoint", a break-it pass behind an http→https proxy), and a 307 to another host sent every row
there, the key with it, while the records named the first endpoint. Server A redirects; server B,
the redirect's target, logs every request it gets: none may reach it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.support.cli import one_error_line, tokenplan
from tests.support.fault_jobs import fault_request, jsonl, prompts
from tests.support.fault_server import FaultServerProcess

from tokenplan.api.bench import BenchRequest, bench
from tokenplan.api.generate import generate
from tokenplan.bench.http import SideRequestFailed, request_json
from tokenplan.client.openai import OpenAIClient, RequestFailed
from tokenplan.errors import ServerError

NOT_FOLLOWED = "(redirects are not followed)"


def _redirecting(tmp_path: Path, status: int, location: str) -> FaultServerProcess:
    """A fault server answering every chat request ``status`` with ``Location: location``
    (``GET /models`` answers normally, as a route-level redirect leaves it)."""
    script = tmp_path / "redirect.json"
    script.write_text(json.dumps([{"status": status, "raw": "", "headers": {"Location": location}}]))
    return FaultServerProcess(str(tmp_path), script=str(script), log_requests=str(tmp_path / "a.log"))


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_generate_stops_at_a_redirected_chat_request_with_one_line_and_sends_nothing_on(
    tmp_path: Path, status: int
) -> None:
    prompts(tmp_path / "in.jsonl", 5)
    with FaultServerProcess(str(tmp_path), log_requests=str(tmp_path / "b.log")) as target:
        with _redirecting(tmp_path, status, target.url + "/chat/completions") as server:
            with pytest.raises(ServerError) as stop:
                generate(fault_request(tmp_path, server.url, concurrency=1))
    assert str(stop.value) == (
        f"{server.url} redirected ({status}) to {target.url}/chat/completions; "
        f"give {target.url} as --endpoint {NOT_FOLLOWED}"
    )
    assert jsonl(tmp_path / "b.log") == []  # the redirect's target got nothing, GET or POST
    # A: the health check, then one chat request (a redirect is not retried: it is the same each time)
    assert [(r["method"], r["target"]) for r in jsonl(tmp_path / "a.log")] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert jsonl(tmp_path / "run" / "errors.jsonl") == []  # the run's failure, not the row's


def test_a_proxy_redirecting_everything_fails_the_health_check_with_the_endpoint_to_give(tmp_path: Path) -> None:
    # http→https proxies redirect every route: the health check (GET /models) is where it shows
    prompts(tmp_path / "in.jsonl", 3)
    with FaultServerProcess(str(tmp_path), log_requests=str(tmp_path / "b.log")) as target:
        root = target.url.removesuffix("/v1")
        with FaultServerProcess(str(tmp_path), redirect_to=root) as proxy:
            with pytest.raises(ServerError) as stop:
                generate(fault_request(tmp_path, proxy.url))
    assert str(stop.value) == (
        f"no endpoint is ready for model 'fault-model': {proxy.url} redirected (301) to "
        f"{target.url}/models; give {target.url} as --endpoint {NOT_FOLLOWED}"
    )
    assert jsonl(tmp_path / "b.log") == []


def test_the_command_line_says_the_redirect_in_one_line_without_the_key(tmp_path: Path, monkeypatch) -> None:
    # The Location carries the run's key (a proxy that copies the query) and a key of its own
    # (?key=…, a credential by its name): both masked; api-version is kept for the --endpoint to give.
    key = "sk-redirect-test-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    prompts(tmp_path / "in.jsonl", 3)
    location = f"https://other.invalid/v1/chat/completions?key=ITS-OWN-SECRET-77&x={key}&api-version=7"
    with _redirecting(tmp_path, 302, location) as server:
        result = tokenplan(
            "generate", "in.jsonl", "--out", "run", "--endpoint", server.url, "--model", "fault-model", cwd=tmp_path
        )
    assert one_error_line(result) == (
        f"error: {server.url} redirected (302) to https://other.invalid/v1/chat/completions"
        "?key=***&x=***&api-version=7; give https://other.invalid/v1?key=***&x=***&api-version=7 "
        f"as --endpoint {NOT_FOLLOWED}"
    )
    assert key not in result.stderr + result.stdout and "ITS-OWN-SECRET-77" not in result.stderr


def test_bench_stops_at_a_redirect_before_the_sweep(tmp_path: Path) -> None:
    with FaultServerProcess(str(tmp_path), log_requests=str(tmp_path / "b.log")) as target:
        # every route redirected: the model check says it
        with FaultServerProcess(str(tmp_path), redirect_to=target.url.removesuffix("/v1")) as proxy:
            with pytest.raises(ServerError) as stop:
                bench(BenchRequest((proxy.url,), "fault-model", (1,), 16, 4, num_prompts=2, warmup_requests=0))
        assert str(stop.value) == (
            f"{proxy.url} redirected (301) to {target.url}/models; give {target.url} as --endpoint {NOT_FOLLOWED}"
        )
        # the chat route only: the 1-token probe says it
        with _redirecting(tmp_path, 307, target.url + "/chat/completions") as server:
            with pytest.raises(ServerError) as stop:
                bench(BenchRequest((server.url,), "fault-model", (1,), 16, 4, num_prompts=2, warmup_requests=0))
        assert str(stop.value) == (
            f"{server.url} redirected (307) to {target.url}/chat/completions; "
            f"give {target.url} as --endpoint {NOT_FOLLOWED}"
        )
    assert jsonl(tmp_path / "b.log") == []


def test_the_client_reports_a_relative_or_missing_location_as_a_redirect_status(tmp_path: Path) -> None:
    async def chat(url: str) -> RequestFailed:
        async with OpenAIClient(url, max_connections=2) as client:
            with pytest.raises(RequestFailed) as failed:
                await client.chat(
                    {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}]}, deadline_s=10
                )
            return failed.value

    with _redirecting(tmp_path, 301, "/v2/chat/completions") as server:
        moved = asyncio.run(chat(server.url))
    root = server.url.removesuffix("/v1")  # the Location resolves against the request's URL
    assert (moved.kind, moved.status, moved.redirect) == ("status", 301, True)
    assert (
        moved.detail == f"redirected (301) to {root}/v2/chat/completions; give {root}/v2 as --endpoint {NOT_FOLLOWED}"
    )
    script = tmp_path / "bare.json"
    script.write_text(json.dumps([{"status": 303, "raw": ""}]))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        bare = asyncio.run(chat(server.url))
    assert (bare.status, bare.detail) == (303, "redirected (303) with no Location header; redirects are not followed")


def test_a_side_request_is_not_redirected_either(tmp_path: Path) -> None:
    # /metrics, /tokenize: urllib followed a redirect with the Authorization header, to any host
    with FaultServerProcess(str(tmp_path), log_requests=str(tmp_path / "b.log")) as target:
        with FaultServerProcess(str(tmp_path), redirect_to=target.url.removesuffix("/v1")) as proxy:
            root = proxy.url.removesuffix("/v1")
            with pytest.raises(SideRequestFailed) as failed:
                asyncio.run(request_json(f"{root}/tokenize", {"prompt": "hi"}, api_key="sk-side-0123456789"))
    assert failed.value.status == 301
    assert str(failed.value) == f"{root}/tokenize: HTTP 301 (a redirect, not followed)"
    assert jsonl(tmp_path / "b.log") == []


def test_a_token_in_the_locations_fragment_is_left_out() -> None:
    # a break-it pass: "#access_token=FRAGSECRET4" reached the terminal and summary.json, and the
    # --endpoint hint gave up; a fragment is never sent to a server, so the line leaves it out
    from yarl import URL

    from tokenplan.client.openai import redirect_detail

    line = redirect_detail(
        302, "https://new.example.com/v1/chat/completions#access_token=FRAGSECRET4", URL("http://a/v1/chat/completions")
    )
    assert line == (
        "redirected (302) to https://new.example.com/v1/chat/completions; give https://new.example.com/v1 "
        "as --endpoint (redirects are not followed)"
    )
