"""The one redaction (tokenplan.client.auth): which texts are secrets, how endpoints are shown, and
the client applying it to what a server echoes (issue 26)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.client.auth import MASK, Redactor, display_url, url_problem, url_secrets
from tokenplan.client.openai import OpenAIClient, RequestFailed

# base64("alice:hunter2") (RFC 4648): "ali"→YWxp, "ce:"→Y2U6, "hun"→aHVu, "ter"→dGVy, "2"→Mg==
BASIC = "YWxpY2U6aHVudGVyMg=="


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:hunter2@host:8000/v1/", "http://host:8000/v1"),
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("https://alice@host/v1?key=sk-123456&api-version=2024-02-01#top", "https://host/v1?key=***&api-version=***"),
        # a bare part may be a key passed without a name (a break-it pass stored ?SECRETKEY in every record)
        ("http://host:8000/v1/?SECRETKEY", "http://host:8000/v1?***"),
        ("http://a:b@[::1]:8000/v1?sig=abcd", "http://[::1]:8000/v1?sig=***"),
        # a path parameter may carry a token too (a break-it pass found /v1;token=… stored as written)
        ("http://host:8000/v1;token=abc123/x;v=2", "http://host:8000/v1;token=***/x;v=***"),
    ],
)
def test_endpoints_are_shown_without_userinfo_and_with_every_query_value_masked(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_an_endpoint_carries_its_password_basic_token_and_credential_named_query_values() -> None:
    # %40 is "@" and %2B is "+": each secret is kept as written and as decoded, since either may be
    # echoed. base64("alice:p@ss") = YWxp Y2U6 cEBz cw== ("ali", "ce:", "p@s", "s"). api-version and n
    # are not credential names: their values are masked when shown, not searched for in texts.
    url = "http://alice:p%40ss@h:8000/v1?key=qk%2B1234&api-version=2024-02-01&X-Amz-Signature=abcdef01&n=12345"
    assert sorted(set(url_secrets(url))) == sorted(
        ["p@ss", "p%40ss", "YWxpY2U6cEBzcw==", "qk%2B1234", "qk+1234", "abcdef01"]
    )
    assert url_secrets("http://h:8000/v1") == []
    # a credential-named path parameter's value, as written and decoded (%2B is "+"); "mode" is no
    # credential name: masked when shown, not searched for
    assert url_secrets("http://h:8000/v1;token=abc%2B12;mode=fast") == ["abc%2B12", "abc+12"]
    # a bare query part of key length is a key passed without a name: searched for in texts too,
    # as written and decoded (%2B is "+", and + is a space); a short one (?debug) is a flag, left
    # alone in texts, or every answer saying "debug" would be rewritten (a break-it pass)
    assert sorted(url_secrets("http://h:8000/v1?sk-abc%2B123456+xyz")) == ["sk-abc%2B123456+xyz", "sk-abc+123456 xyz"]
    assert url_secrets("http://h:8000/v1?debug") == []
    # a padded base64 token reads as name "QWxhZGRpbjpvcGVuIHNlc2FtZQ" (26 characters ≥ 16), value
    # "=": the name is the token without its padding, in each form it is written, decoded or sent
    # ("…ZQ==", "…ZQ==", "…ZQ=%3D"); a short name=value pair stays a setting (a break-it pass)
    assert set(url_secrets("http://h:8000/v1?QWxhZGRpbjpvcGVuIHNlc2FtZQ==")) == {"QWxhZGRpbjpvcGVuIHNlc2FtZQ"}
    assert url_secrets("http://h:8000/v1?mode=") == []
    redact = Redactor(url_secrets("http://h:8000/v1?QWxhZGRpbjpvcGVuIHNlc2FtZQ=="))
    assert "QWxhZGRpbjpvcGVuIHNlc2FtZQ" not in redact.text("GET /v1/chat/completions?QWxhZGRpbjpvcGVuIHNlc2FtZQ=%3D")
    assert display_url("http://h:8000/v1?debug") == "http://h:8000/v1?***"


def test_a_user_with_no_password_is_a_token_and_a_secret() -> None:
    # https://TOKEN@host (a token in the user position, as git and some gateways take it):
    # base64("onlyuserTOK:") = b25s eXVz ZXJU T0s6 ("onl", "yus", "erT", "OK:")
    assert sorted(set(url_secrets("http://onlyuserTOK@h:8000/v1"))) == sorted(["onlyuserTOK", "b25seXVzZXJUT0s6"])
    # with a password the user is a name, not a secret: base64("alice:pw") = YWxp Y2U6 cHc=
    assert sorted(set(url_secrets("http://alice:pw@h/v1"))) == sorted(["pw", "YWxpY2U6cHc="])


def test_text_replaces_the_secrets_only_and_message_also_masks_auth_schemes_and_userinfo() -> None:
    redactor = Redactor(["sk-abc123", "hunter2", None, "ab"])  # "ab": under 4 characters, left alone
    answer = "the basic idea: sk-abc123 and hunter2, about ab"
    assert redactor.text(answer) == "the basic idea: *** and ***, about ab"
    error = "bad header Authorization: Bearer tok-x1, Basic dXNlcjpwdw== at http://u:pw@h/v1"
    assert redactor.message(error) == "bad header Authorization: Bearer ***, Basic *** at http://h/v1"


def test_a_secret_is_found_in_its_json_escaped_form_too() -> None:
    secret = 'pa"ss\\word'  # a quote and a backslash: written into JSON as pa\"ss\\word
    assert Redactor([secret]).text(json.dumps({"echo": secret})) == '{"echo": "' + MASK + '"}'


def test_the_longest_secret_goes_first() -> None:
    assert Redactor(["abcd", "abcd-efgh"]).text("x abcd-efgh y abcd") == "x *** y ***"


def test_json_redacts_every_string_of_a_document() -> None:
    doc = {"notes": ["sent Bearer sk-zzzz9"], "detail": {"sk-zzzz9": 1}, "n": 3}
    assert Redactor(["sk-zzzz9"]).json(doc) == {"notes": ["sent Bearer ***"], "detail": {"***": 1}, "n": 3}


@pytest.mark.parametrize(
    ("url", "problem"),
    [("ftp://h/v1", "the scheme must be http or https"), ("http:///v1", "no host"), ("http://h:8000/v1", None)],
)
def test_url_problem(url: str, problem: str | None) -> None:
    assert url_problem(url) == problem


def _scripted(tmp_path: Path, entries: list[dict]) -> FaultServerProcess:
    (tmp_path / "script.json").write_text(json.dumps(entries))
    return FaultServerProcess(
        str(tmp_path), script=str(tmp_path / "script.json"), log_requests=str(tmp_path / "requests.jsonl")
    )


async def _chat(url: str, stream: bool = False, **options):  # noqa: ANN202 - a Completion
    async with OpenAIClient(url, max_connections=1, **options) as client:
        return await client.chat(
            {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
            deadline_s=30,
            stream=stream,
        )


ECHO = "auth={{authorization}} bare={{credential}} target={{target}}"


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_echoing_the_credentials_is_returned_redacted(tmp_path: Path, stream: bool) -> None:
    if stream:
        chunk = {"choices": [{"index": 0, "delta": {"content": ECHO}, "finish_reason": "stop"}]}
        entry = {"raw": f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n", "content_type": "text/event-stream"}
    else:
        entry = {"raw": json.dumps({"choices": [{"index": 0, "message": {"content": ECHO}, "finish_reason": "stop"}]})}
    with _scripted(tmp_path, [entry]) as server:
        url = f"http://alice:hunter2@127.0.0.1:{server.port}/v1?key=qk-secret-77&api-version=2024-02-01"
        done = asyncio.run(_chat(url, stream))
    sent = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    # Sent: Basic auth in the header, the query string on the request line, no userinfo anywhere.
    assert [(r["method"], r["target"], r["authorization"]) for r in sent] == [
        ("POST", "/v1/chat/completions?key=qk-secret-77&api-version=2024-02-01", f"Basic {BASIC}")
    ]
    assert done.content == "auth=Basic *** bare=*** target=/v1/chat/completions?key=***&api-version=2024-02-01"


def test_a_query_key_holding_plus_slash_and_equals_is_masked_in_the_form_sent(tmp_path: Path) -> None:
    # "+" in a query is a space, so the key reads "Ab Cd/Ef==99"; the client sends the query
    # re-encoded: the space as "+", "/" as it is, each "=" as %3D → "Ab+Cd/Ef%3D%3D99", which is
    # neither the form written nor the decoded one (a server echoing its request line stored it).
    assert "Ab+Cd/Ef%3D%3D99" in url_secrets("http://h/v1?key=Ab+Cd/Ef==99")
    entry = {"raw": json.dumps({"choices": [{"index": 0, "message": {"content": ECHO}, "finish_reason": "stop"}]})}
    with _scripted(tmp_path, [entry]) as server:
        done = asyncio.run(_chat(f"http://127.0.0.1:{server.port}/v1?key=Ab+Cd/Ef==99"))
    (sent,) = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert sent["target"] == "/v1/chat/completions?key=Ab+Cd/Ef%3D%3D99"
    assert done.content == "auth= bare= target=/v1/chat/completions?key=***"


def test_a_short_bare_query_key_echoed_in_the_request_path_is_masked_there_only(tmp_path: Path) -> None:
    # a new-user pass: ?QSECRET789 (10 characters, under MIN_BARE_SECRET_CHARS) goes out as
    # "?QSECRET789=" and a server echoing its request line had it stored and printed as written;
    # as a word of an answer it stays (a short bare part may be a flag such as ?debug)
    echo = ECHO + " and QSECRET789 as a word"
    entry = {"status": 401, "raw": json.dumps({"error": {"message": echo}})}
    with _scripted(tmp_path, [entry]) as server:
        with pytest.raises(RequestFailed) as caught:
            asyncio.run(_chat(server.url + "?QSECRET789"))
    (sent,) = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert sent["target"] == "/v1/chat/completions?QSECRET789="
    assert caught.value.detail == "auth= bare= target=/v1/chat/completions?***= and QSECRET789 as a word"
    assert Redactor([], ["debug"]).text("debug answer: GET /v1?debug&x=1, ?debugger") == (
        "debug answer: GET /v1?***&x=1, ?debugger"
    )
    # a second break-it pass: the separators percent-encoded (%3F, %26) or JSON-escaped (\u0026),
    # and the part followed by , ) < . or an encoded "=", were stored as written
    short = Redactor([], ["SHORTKEY1"])
    assert short.text("next=%2Fv1%2Fchat%2Fcompletions%3FSHORTKEY1%3D") == "next=%2Fv1%2Fchat%2Fcompletions%3F***%3D"
    assert short.text('{"url": "/v1/x?a=1\\u0026SHORTKEY1="}') == '{"url": "/v1/x?a=1\\u0026***="}'
    assert short.text("?SHORTKEY1, ?SHORTKEY1) ?SHORTKEY1<br> ?SHORTKEY1.") == "?***, ?***) ?***<br> ?***."
    assert (
        short.text("?SHORTKEY12 ?SHORTKEY1_x ?SHORTKEY1%41") == "?SHORTKEY12 ?SHORTKEY1_x ?SHORTKEY1%41"
    )  # other names


def test_a_failure_echoing_the_bare_bearer_key_is_redacted(tmp_path: Path) -> None:
    entry = {"status": 400, "raw": json.dumps({"error": {"message": ECHO}})}
    with _scripted(tmp_path, [entry]) as server:
        with pytest.raises(RequestFailed) as caught:
            asyncio.run(_chat(server.url + "?access_token=tok-4242", api_key="sk-secret-42"))
    assert caught.value.detail == "auth=Bearer *** bare=*** target=/v1/chat/completions?access_token=***"


def test_models_carries_the_query_string_and_the_client_shows_its_url_masked(tmp_path: Path) -> None:
    async def models(url: str) -> tuple[list[str], str]:
        async with OpenAIClient(url, max_connections=1) as client:
            return await client.models(), client.base_url

    with _scripted(tmp_path, [{"answer": True}]) as server:
        served, shown = asyncio.run(models(f"http://u:pw-1234@127.0.0.1:{server.port}/v1?key=qk-1"))
    assert served == ["fault-model"]
    assert shown == f"http://127.0.0.1:{server.port}/v1?key=***"
    (sent,) = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert sent["target"] == "/v1/models?key=qk-1"


def test_a_secret_cut_by_an_excerpts_end_is_masked_in_messages() -> None:
    # An error excerpt stops after 300 characters, possibly inside a bare token: its first 7 of
    # 20 characters ("YWxpY2U") must not stay; 3 characters ("YWx") are under the 4-character floor.
    redactor = Redactor([BASIC])
    assert redactor.message("echo YWxpY2U…") == "echo ***…"
    assert redactor.message("echo YWx") == "echo YWx"


def test_a_request_shown_in_a_notebook_holds_no_secret() -> None:
    # A notebook saves the repr of the last expression of a cell into the .ipynb file.
    from tokenplan.api.bench import BenchRequest
    from tokenplan.api.generate import GenerateRequest

    url = "http://alice:hunter2@h:8000/v1?key=qk-secret-77"
    shown = repr(GenerateRequest.build(inputs=["in.jsonl"], out_dir="run", endpoints=[url], model="m")) + repr(
        BenchRequest(endpoints=(url,), model="m", api_key="sk-bench-secret")
    )
    for secret in ("hunter2", "qk-secret-77", "sk-bench-secret"):
        assert secret not in shown


def test_a_key_echoed_escaped_or_percent_encoded_is_masked_too():
    # A break-it pass found the key in errors.jsonl and bench.json as a PHP-style encoder writes
    # it (JSON with "\/"), fully \u-escaped, and percent-encoded in a gateway's message.
    key = "sk-BENCH/SECRET+0123456789"
    r = Redactor([key])
    slash = "sk-BENCH\\/SECRET+0123456789"  # the body's own text: a backslash before the slash
    unicode_escaped = "".join(f"\\u{ord(c):04x}" for c in key)
    for echoed in (
        slash,
        unicode_escaped,
        unicode_escaped.upper().replace("\\U", "\\u"),
        "sk-BENCH%2FSECRET%2B0123456789",
    ):
        assert r.message(f"quota exceeded for {echoed} (x)") == "quota exceeded for *** (x)", echoed
    assert r.text("sk-BENCH%2fSECRET%2b0123456789") == "***"  # lower-case hex
    assert r.text("sk-BENCH/SECRET%2B0123456789") == "***"  # quote's default keeps "/"
