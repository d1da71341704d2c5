"""A fast, fault-injecting OpenAI-compatible chat server for tests and benchmarks.

Answers are a pure function of the request, so a test can recompute what the runner must have
stored: ``content = "reply-" + sha256(messages JSON)[:12]``, ``reasoning_content = "thought-" +
the same digest`` and ``completion_tokens = min(tokens, max_tokens)`` with ``finish_reason
"length"`` when ``max_tokens < tokens``. Faults are drawn per request from a seeded RNG:
HTTP 500, HTTP 429 (with ``Retry-After: 0``), HTTP 400, HTTP 401, a dropped connection (closed after reading the
request, nothing answered) and a stall (no answer for ``stall_s``). Restarting mid-run is the
test's job: kill the process and start another on the same port.

Scripted answers (``--script FILE``, a JSON list): the k-th chat request is answered with entry
``k mod len``: ``{"status": 200, "raw": "<body text>", "content_type": "…"}`` sent as it is, so a
test can serve any malformed, unfinished or over-size answer, any error-body shape or SSE stream.
``{{authorization}}`` in ``raw`` is replaced by the request's Authorization header (a server that
echoes it), ``{{credential}}`` by that header without its scheme (the bare key, or the bare
base64 Basic token) and ``{{target}}`` by the request target with its query string; ``"headers":
{"Location": "…"}`` adds headers (``{{target}}`` replaced there too: a redirect); an entry
``{"answer": true}`` is the normal answer (``answer_for``).

``--redirect-to URL`` answers every request but ``GET /stats`` (the ``GET /models`` health check
too) with ``--redirect-status`` (301) and ``Location: URL + target``: an http→https proxy.

``GET /stats`` answers ``{"requests", "max_active"}``: the most requests it was answering at once.

``--log-bodies PATH`` appends every chat request body to ``PATH`` (JSONL), so a test can check what
was sent (a scripted answer's request as it came, the others once parsed). ``--log-requests PATH`` appends one line per request: ``method``, ``target`` (path and
query string) and ``authorization`` (the header, or null).

Refusals of a configuration (the job-wide 4xx): ``--context N`` answers 400 with vLLM's message when
the prompt (``usage.prompt_tokens`` as below) plus ``max_tokens`` passes N tokens (``--context-status
422``: 422 with Hugging Face TGI's message and error body); ``--reject-seed``
answers 400 to any request carrying ``seed``, as servers that do not take the field do.
``--filter-word W`` answers a request whose messages hold ``W`` with a 200 that withholds the
answer (``finish_reason: content_filter``, no content), as a hosted API's filter does; with
``--withhold empty``, with an empty answer that says it is complete (``""``, ``stop``).

Run: ``python tests/support/fault_server.py --port 0 --port-file P [--p500 0.1 …]``; the bound port
is written to ``P`` once the server listens. HTTP/1.1 framing is parsed with h11.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
from dataclasses import dataclass

import h11

try:
    from tests.support.child import ChildProcess, spawn_with_port_file
    from tests.support.h11_io import listen_until_signal, send_bytes
except ModuleNotFoundError:  # started as a script: its own folder is sys.path[0]
    from child import ChildProcess, spawn_with_port_file
    from h11_io import listen_until_signal, send_bytes


@dataclass(frozen=True)
class Faults:
    p500: float = 0.0
    p429: float = 0.0
    pdrop: float = 0.0
    pstall: float = 0.0
    p400: float = 0.0
    p401: float = 0.0
    stall_s: float = 30.0
    delay_s: float = 0.0
    tokens: int = 16
    model: str = "fault-model"
    seed: int = 0
    script: str = ""
    log_bodies: str = ""  # a path: every chat request body is appended there as one JSON line
    log_requests: str = ""  # a path: method, target and Authorization header of every request
    context: int = 0  # > 0: refuse (400) a prompt + max_tokens beyond this many tokens
    reject_seed: bool = False  # refuse (400) a request that carries `seed`
    context_status: int = 400  # the status of a --context refusal: 422 answers as Hugging Face TGI does
    filter_word: str = ""  # a prompt holding it is answered 200 with finish_reason content_filter, no text
    withhold: str = "content_filter"  # or "empty": the --filter-word answer is "" with finish_reason stop
    redirect_to: str = ""  # a URL: every request is answered redirect_status, Location = it + target
    redirect_status: int = 301


def answer_for(body: dict, tokens: int) -> dict:
    """The chat completion this server returns for ``body`` (used by tests to check outputs)."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:12]
    max_tokens = int(body.get("max_tokens") or tokens)
    completion_tokens = min(tokens, max_tokens)
    return {
        "id": "chatcmpl-" + digest,
        "object": "chat.completion",
        "model": body.get("model"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "length" if max_tokens < tokens else "stop",
                "message": {
                    "role": "assistant",
                    "content": "reply-" + digest,
                    "reasoning_content": "thought-" + digest,
                },
            }
        ],
        "usage": {
            "prompt_tokens": len(json.dumps(body["messages"])) // 4,
            "completion_tokens": completion_tokens,
            "total_tokens": len(json.dumps(body["messages"])) // 4 + completion_tokens,
        },
    }


def _refusal(payload: dict, f: Faults) -> str | None:
    """The 400 message a configuration refusal gets (``--context``, ``--reject-seed``), or None."""
    if f.reject_seed and "seed" in payload:
        return "Unrecognized request argument supplied: seed"
    prompt = len(json.dumps(payload["messages"])) // 4
    asked = int(payload.get("max_tokens") or 0)
    if f.context and prompt + asked > f.context and f.context_status == 422:
        # TGI's wording (router validation.rs, answered 422 as InferError::ValidationError)
        return (
            f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {f.context}. "
            f"Given: {prompt} `inputs` tokens and {asked} `max_new_tokens`"
        )
    if f.context and prompt + asked > f.context:
        # vLLM's wording (serving_engine._validate_input), with this request's numbers
        return (
            f"This model's maximum context length is {f.context} tokens. However, you requested "
            f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). "
            "Please reduce the length of the messages or completion."
        )
    return None


class Server:
    def __init__(self, faults: Faults):
        self.faults = faults
        self.rng = random.Random(faults.seed)
        self.requests = 0
        self.active = 0  # chat requests being answered now
        self.max_active = 0
        self.chats = 0
        self.script: list[dict] = []
        if faults.script:
            with open(faults.script) as fh:
                self.script = json.load(fh)

    async def respond(self, conn, writer, request: h11.Request, body: bytes) -> bool:
        self.requests += 1
        target = request.target.decode()
        if self.faults.log_requests:
            auth = dict(request.headers).get(b"authorization")
            with open(self.faults.log_requests, "a") as log:
                log.write(
                    json.dumps(
                        {
                            "method": request.method.decode(),
                            "target": target,
                            "authorization": None if auth is None else auth.decode(),
                        }
                    )
                    + "\n"
                )
        if request.method == b"GET" and target.endswith("/stats"):
            return await self._send(conn, writer, 200, {"requests": self.requests, "max_active": self.max_active})
        if self.faults.redirect_to:  # a proxy sending everything elsewhere
            location = self.faults.redirect_to.rstrip("/") + target
            await send_bytes(conn, writer, self.faults.redirect_status, b"", extra=(("location", location),))
            return True
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            return await self._answer(conn, writer, request, target, body)
        finally:
            self.active -= 1

    async def _answer(self, conn, writer, request: h11.Request, target: str, body: bytes) -> bool:
        path = target.partition("?")[0]  # a client may send its endpoint's query string
        if request.method == b"GET" and path.endswith("/models"):
            return await self._send(
                conn, writer, 200, {"object": "list", "data": [{"id": self.faults.model, "object": "model"}]}
            )
        if request.method != b"POST" or not path.endswith("/chat/completions"):
            return await self._send(conn, writer, 404, {"error": {"message": f"no route {target}"}})
        self.chats += 1
        if self.script:
            entry = self.script[(self.chats - 1) % len(self.script)]
            if not entry.get("answer"):
                if self.faults.log_bodies:  # what was sent, as for an answered request
                    with open(self.faults.log_bodies, "a") as log:
                        log.write(body.decode("utf-8", "surrogatepass").strip() + "\n")
                return await self._scripted(conn, writer, request, entry)
        draw = self.rng.random()
        f = self.faults
        if draw < f.pdrop:
            return False  # close without answering
        draw -= f.pdrop
        if draw < f.pstall:
            await asyncio.sleep(f.stall_s)
            return False
        draw -= f.pstall
        if draw < f.p500:
            return await self._send(conn, writer, 500, {"error": {"message": "injected 500"}})
        draw -= f.p500
        if draw < f.p429:
            return await self._send(conn, writer, 429, {"error": {"message": "injected 429"}}, [("retry-after", "0")])
        draw -= f.p429
        if draw < f.p400:
            return await self._send(conn, writer, 400, {"error": {"message": "injected 400: context too long"}})
        draw -= f.p400
        if draw < f.p401:
            return await self._send(conn, writer, 401, {"error": {"message": "injected 401"}})
        try:
            payload = json.loads(body)
            if not isinstance(payload.get("messages"), list):
                raise ValueError("messages")
        except ValueError:
            return await self._send(conn, writer, 400, {"error": {"message": "bad request body"}})
        if f.log_bodies:
            with open(f.log_bodies, "a") as log:
                log.write(json.dumps(payload) + "\n")
        refusal = _refusal(payload, f)
        if refusal and refusal.startswith("Input validation error"):  # TGI's error body
            return await self._send(conn, writer, 422, {"error": refusal, "error_type": "validation"})
        if refusal:
            return await self._send(
                conn, writer, 400, {"object": "error", "message": refusal, "type": "BadRequestError", "code": 400}
            )
        if f.filter_word and f.filter_word in json.dumps(payload["messages"]):  # a hosted API's filter
            withheld = answer_for(payload, f.tokens)
            empty = f.withhold == "empty"  # what a model that answers a prompt with nothing sends
            withheld["choices"][0].update(
                message={"role": "assistant", "content": "" if empty else None},
                finish_reason="stop" if empty else "content_filter",
            )
            return await self._send(conn, writer, 200, withheld)
        if f.delay_s:
            await asyncio.sleep(f.delay_s)
        if payload.get("stream"):
            return await self._stream(conn, writer, payload)
        return await self._send(conn, writer, 200, answer_for(payload, f.tokens))

    async def _scripted(self, conn, writer, request: h11.Request, entry: dict) -> bool:
        auth = dict(request.headers).get(b"authorization", b"").decode()
        raw = (
            entry.get("raw", "")
            .replace("{{authorization}}", auth)
            .replace("{{credential}}", auth.partition(" ")[2])
            .replace("{{target}}", request.target.decode())
        )
        raw = raw.encode("utf-8", "surrogatepass")
        target = request.target.decode()
        headers = tuple((k, v.replace("{{target}}", target)) for k, v in entry.get("headers", {}).items())
        await send_bytes(
            conn,
            writer,
            entry.get("status", 200),
            raw,
            content_type=entry.get("content_type", "application/json"),
            extra=headers,
        )
        return True

    async def _send(self, conn, writer, status: int, obj: dict, extra=()) -> bool:
        await send_bytes(conn, writer, status, json.dumps(obj).encode(), extra=extra)
        return True

    async def _stream(self, conn, writer, payload: dict) -> bool:
        whole = answer_for(payload, self.faults.tokens)
        choice = whole["choices"][0]
        n = whole["usage"]["completion_tokens"]
        writer.write(
            conn.send(
                h11.Response(
                    status_code=200, headers=[("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
                )
            )
        )
        # The reasoning goes out as one chunk, then the content split into n − 1 chunks.
        pieces = [("reasoning_content", choice["message"]["reasoning_content"])]
        text = choice["message"]["content"]
        step = max(1, len(text) // max(1, n - 1))
        pieces += [("content", text[i : i + step]) for i in range(0, len(text), step)]
        for key, piece in pieces:
            chunk = {"model": whole["model"], "choices": [{"index": 0, "delta": {key: piece}, "finish_reason": None}]}
            writer.write(conn.send(h11.Data(data=f"data: {json.dumps(chunk)}\n\n".encode())))
        last = {
            "model": whole["model"],
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
        }
        writer.write(conn.send(h11.Data(data=f"data: {json.dumps(last)}\n\n".encode())))
        usage = {"model": whole["model"], "choices": [], "usage": whole["usage"]}
        writer.write(conn.send(h11.Data(data=f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        return True


async def serve(faults: Faults, port: int, port_file: str | None) -> None:
    await listen_until_signal(Server(faults).respond, port, port_file, backlog=8192)


class FaultServerProcess(ChildProcess):
    """The fault server in a child process; ``url`` is its ``base_url`` (``http://127.0.0.1:P/v1``).

    ``restart()`` kills it with SIGKILL and starts a new one on the same port (the mid-run restart).
    """

    def __init__(self, workdir: str, *, port: int = 0, **faults: float | int | str):
        self.workdir, self.port, self.faults = workdir, port, faults
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        port_file = os.path.join(self.workdir, f"fault-port-{os.getpid()}-{id(self)}")
        args = [sys.executable, os.path.abspath(__file__), "--port", str(self.port), "--port-file", port_file]
        for key, value in self.faults.items():
            args += ["--" + key.replace("_", "-"), str(value)]
        self.proc, self.port = spawn_with_port_file(args, port_file, "fault server")

    def restart(self) -> None:
        self.kill()
        self.start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    for name in ("p500", "p429", "pdrop", "pstall", "p400", "p401", "stall_s", "delay_s"):
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--model", default="fault-model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--script", default="")
    parser.add_argument("--log-bodies", default="")
    parser.add_argument("--log-requests", default="")
    parser.add_argument("--context", type=int, default=0)
    parser.add_argument("--reject-seed", type=int, default=0, help="1: refuse requests carrying seed")
    parser.add_argument("--context-status", type=int, default=400, help="400 (vLLM) or 422 (TGI)")
    parser.add_argument("--filter-word", default="", help="answer a prompt holding it with content_filter")
    parser.add_argument("--withhold", default="content_filter", help="content_filter, or empty (a stop with no text)")
    parser.add_argument("--redirect-to", default="", help="answer every request with a redirect to URL + target")
    parser.add_argument("--redirect-status", type=int, default=301, help="the status of --redirect-to's answers")
    args = parser.parse_args(argv)
    faults = Faults(
        args.p500,
        args.p429,
        args.pdrop,
        args.pstall,
        args.p400,
        args.p401,
        args.stall_s or 30.0,
        args.delay_s,
        args.tokens,
        args.model,
        args.seed,
        args.script,
        args.log_bodies,
        args.log_requests,
        args.context,
        bool(args.reject_seed),
        args.context_status,
        args.filter_word,
        args.withhold,
        args.redirect_to,
        args.redirect_status,
    )
    asyncio.run(serve(faults, args.port, args.port_file))


if __name__ == "__main__":
    sys.exit(main())
