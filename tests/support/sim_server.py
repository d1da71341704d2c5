"""A simulated continuous-batching engine behind an OpenAI-compatible API, for bench tests.

Its step time follows a known law: a step with ``B`` running sequences lasts ``a + b·B`` seconds
and gives every running sequence one token. At most ``cap`` sequences run; the rest wait in FIFO
order and join at the next step. A request generates exactly ``max_tokens`` tokens (as with
``ignore_eos``). Steps run back to back on a timeline (a step starts when the previous one ended,
or when work arrives), so the measured step durations equal the law unless the machine is too
busy to wake the loop in time; ``/stats`` reports the measured durations.

Endpoints (vLLM's spellings):

- ``GET /v1/models``; ``POST /v1/chat/completions`` (streamed or not; unknown model → 404);
- ``POST /tokenize`` (``messages`` with the chat template, or ``prompt``) and ``POST /detokenize``
  — unless started with ``--no-tokenize``. The tokenizer is "one whitespace-separated word = one
  token"; the chat template adds ``TEMPLATE_TOKENS`` per message plus ``GENERATION_PROMPT_TOKENS``;
- ``GET /metrics``: Prometheus text with ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (running tokens / ``kv_tokens``), ``vllm:num_preemptions_total``,
  ``vllm:generation_tokens_total`` and ``vllm:prompt_tokens_total``;
- ``GET /stats?since=T0&until=T1`` (wall-clock seconds, ``time.time()``): tokens emitted by steps
  that ended inside the window, and the mean measured step time per batch size.

``--spec ENGINE:K:P0[:DECAY]`` (ENGINE vllm, sglang or trtllm) makes the engine speculate with
the acceptance law of :mod:`tests.support.spec_metrics` and expose that engine's metric names
(running, waiting, KV usage and token counters too; TensorRT-LLM's Prometheus text moves to
``GET /prometheus/metrics`` and ``GET /metrics`` answers JSON iteration stats, as ``trtllm-serve``
does); with ``sglang`` it serves ``GET /get_server_info`` and, as SGLang's chat route does, a
whole (not streamed) answer to a request with ``return_meta_info`` carries
``choices[0].meta_info.spec_verify_ct``. Step times stay the law's: the simulated acceptance
changes what the server reports, not its speed.

``--no-stream-usage`` leaves the usage chunk out of streamed answers (a server ignoring
``stream_options.include_usage``). ``--exit-after-requests N`` makes the process exit abruptly when the N-th chat request arrives
(a server failing mid-sweep). ``--log-headers PATH`` appends one JSON line per request
(``method``, ``path``, ``authorization``: the Authorization header or null), so a test can check
what a client sent with every request. Run: ``python tests/support/sim_server.py --port-file P --a-ms 10
--b-ms 0.15 --cap 32``; the bound port is written to ``P``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time
import urllib.parse
from dataclasses import dataclass, field

import h11

try:
    from tests.support.child import ChildProcess, spawn_with_port_file
    from tests.support.h11_io import listen_until_signal, send_bytes
    from tests.support.spec_metrics import SpecCounters, SpecLaw
except ModuleNotFoundError:  # started as a script: its own folder is sys.path[0]
    from child import ChildProcess, spawn_with_port_file
    from h11_io import listen_until_signal, send_bytes
    from spec_metrics import SpecCounters, SpecLaw

TEMPLATE_TOKENS = 3  # per message: role marker, start and end tokens
GENERATION_PROMPT_TOKENS = 2


@dataclass(frozen=True)
class Law:
    a_s: float
    b_s: float
    cap: int
    kv_tokens: int = 1_000_000

    def step_s(self, batch: int) -> float:
        return self.a_s + self.b_s * batch


@dataclass(eq=False)
class Seq:
    prompt_tokens: int
    remaining: int
    tokens: asyncio.Queue = field(default_factory=asyncio.Queue)
    generated: int = 0
    rates: list[float] | None = None  # speculative acceptance per draft position (spec mode)
    verify: float = 0.0  # verification steps so far (spec mode)


class Engine:
    """The batching loop and its counters."""

    def __init__(self, law: Law, spec: SpecLaw | None = None):
        self.law = law
        self.spec = SpecCounters(spec) if spec is not None else None
        self.waiting: collections.deque[Seq] = collections.deque()
        self.running: list[Seq] = []
        self.work = asyncio.Event()
        self.generation_tokens = 0
        self.prompt_tokens = 0
        self.steps: list[tuple[float, int, float]] = []  # (end wall time s, batch, measured duration s)

    def submit(self, seq: Seq) -> None:
        self.waiting.append(seq)
        self.prompt_tokens += seq.prompt_tokens
        self.work.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time()
        while True:
            if not self.running and not self.waiting:
                self.work.clear()
                await self.work.wait()
            while self.waiting and len(self.running) < self.law.cap:
                self.running.append(self.waiting.popleft())
            batch = len(self.running)
            start = max(end, loop.time())
            end = start + self.law.step_s(batch)
            await asyncio.sleep(max(end - loop.time(), 0.0))
            now = loop.time()
            self.steps.append((time.time(), batch, now - start))
            end = max(end, now)
            for seq in self.running:
                seq.generated += 1
                seq.remaining -= 1
                self.generation_tokens += 1
                if self.spec is not None and seq.rates is not None:
                    seq.verify += self.spec.token(seq.rates)
                    if seq.remaining == 0:
                        self.spec.finished(seq.rates, seq.verify)
                seq.tokens.put_nowait(seq.remaining == 0)
            if self.spec is not None:
                self.spec.step_done()
            self.running = [s for s in self.running if s.remaining > 0]

    def metrics_text(self, model: str) -> str:
        label = f'{{model_name="{model}"}}'
        used = sum(s.prompt_tokens + s.generated for s in self.running)
        engine = self.spec.law.engine if self.spec is not None else "vllm"
        names = ENGINE_NAMES[engine]
        rows = [
            ("gauge", names[0], len(self.running)),
            ("gauge", names[1], len(self.waiting)),
            ("gauge", names[2], used / self.law.kv_tokens),
            ("counter", names[3], 0),
            ("counter", names[4], self.generation_tokens),
            ("counter", names[5], self.prompt_tokens),
        ]
        out = []
        for kind, name, value in rows:
            if name is not None:
                out += [f"# HELP {name} simulated", f"# TYPE {name} {kind}", f"{name}{label} {float(value)}"]
        if self.spec is not None:
            out += self.spec.prometheus_rows(label[1:-1])
        return "\n".join(out) + "\n"

    def iteration_stats(self) -> list[dict]:
        """TensorRT-LLM's JSON ``/metrics``: a list of iteration stats (here the latest one)."""
        stats = {"numActiveRequests": len(self.running), "numQueuedRequests": len(self.waiting)}
        if self.spec is not None:
            stats["specDecodingStats"] = {
                "numDraftTokens": self.spec.draft_tokens,
                "numAcceptedTokens": self.spec.accepted,
            }
        return [stats]

    def stats(self, since: float, until: float) -> dict:
        inside = [(b, d) for t, b, d in self.steps if since <= t <= until]
        by_batch: dict[int, list[float]] = {}
        for b, d in inside:
            by_batch.setdefault(b, []).append(d)
        return {
            "tokens": sum(b for b, _ in inside),
            "steps": len(inside),
            "step_s_by_batch": {str(b): sum(v) / len(v) for b, v in sorted(by_batch.items())},
            "steps_by_batch": {str(b): len(v) for b, v in sorted(by_batch.items())},
            "law": {"a_s": self.law.a_s, "b_s": self.law.b_s, "cap": self.law.cap},
        }


class Vocab:
    """One word = one token; ids are handed out as words are first seen."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.words: list[str] = []

    def encode(self, text: str) -> list[int]:
        out = []
        for word in text.split():
            if word not in self.ids:
                self.ids[word] = len(self.words)
                self.words.append(word)
            out.append(self.ids[word])
        return out

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids if 0 <= i < len(self.words))


# running, waiting, KV usage (0–1), preemptions, generated tokens, prompt tokens
ENGINE_NAMES = {
    "vllm": (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
    ),
    "sglang": (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:num_retracted_reqs",
        "sglang:generation_tokens_total",
        "sglang:prompt_tokens_total",
    ),
    "trtllm": (
        "trtllm_num_requests_running",
        "trtllm_num_requests_waiting",
        "trtllm_kv_cache_utilization",
        None,
        "trtllm_generation_tokens_total",
        "trtllm_prompt_tokens_total",
    ),
}


def chat_tokens(vocab: Vocab, messages: list[dict]) -> int:
    return (
        sum(TEMPLATE_TOKENS + len(vocab.encode(str(m.get("content") or ""))) for m in messages)
        + GENERATION_PROMPT_TOKENS
    )


class Server:
    def __init__(
        self,
        law: Law,
        model: str,
        tokenize: bool,
        exit_after_requests: int | None,
        stream_usage: bool = True,
        log_headers: str | None = None,
        spec: SpecLaw | None = None,
    ):
        self.engine, self.model, self.tokenize = Engine(law, spec), model, tokenize
        self.spec = spec
        self.log_headers = log_headers
        self.stream_usage = stream_usage
        self.vocab = Vocab()
        self.exit_after_requests = exit_after_requests
        self.chat_requests = 0

    async def respond(self, conn, writer, request: h11.Request, body: bytes) -> None:
        url = urllib.parse.urlsplit(request.target.decode())
        path, method = url.path, request.method
        if self.log_headers:
            auth = dict(request.headers).get(b"authorization")
            with open(self.log_headers, "a", encoding="utf-8") as log:
                log.write(
                    json.dumps(
                        {
                            "method": method.decode(),
                            "path": path,
                            "authorization": None if auth is None else auth.decode(),
                        }
                    )
                    + "\n"
                )
        if method == b"GET" and path == "/v1/models":
            await self._send(conn, writer, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        elif method == b"GET" and path == "/get_server_info" and self.spec is not None and self.spec.engine == "sglang":
            await self._send(conn, writer, 200, {"max_running_requests": self.engine.law.cap, "version": "sim"})
        elif method == b"GET" and path == "/metrics" and self.spec is not None and self.spec.engine == "trtllm":
            await self._send(conn, writer, 200, json.dumps(self.engine.iteration_stats()))
        elif method == b"GET" and (
            path == "/metrics"
            or (path == "/prometheus/metrics" and self.spec is not None and self.spec.engine == "trtllm")
        ):
            await self._send(conn, writer, 200, self.engine.metrics_text(self.model), "text/plain; version=0.0.4")
        elif method == b"GET" and path == "/stats":
            q = urllib.parse.parse_qs(url.query)
            await self._send(
                conn,
                writer,
                200,
                self.engine.stats(float(q.get("since", ["0"])[0]), float(q.get("until", ["1e18"])[0])),
            )
        elif method == b"POST" and path == "/tokenize" and self.tokenize:
            req = json.loads(body)
            if "messages" in req:
                n = chat_tokens(self.vocab, req["messages"])
                ids = list(range(n))
            else:
                ids = self.vocab.encode(str(req.get("prompt", "")))
            await self._send(conn, writer, 200, {"count": len(ids), "max_model_len": 4096, "tokens": ids})
        elif method == b"POST" and path == "/detokenize" and self.tokenize:
            await self._send(conn, writer, 200, {"prompt": self.vocab.decode(json.loads(body)["tokens"])})
        elif method == b"POST" and path == "/v1/chat/completions":
            await self._chat(conn, writer, json.loads(body))
        else:
            await self._send(conn, writer, 404, {"detail": "Not Found"})

    async def _chat(self, conn, writer, req: dict) -> None:
        self.chat_requests += 1
        if self.exit_after_requests is not None and self.chat_requests >= self.exit_after_requests:
            os._exit(3)
        if req.get("model") != self.model:
            await self._send(
                conn,
                writer,
                404,
                {"error": {"message": f"The model `{req.get('model')}` does not exist.", "code": 404}},
            )
            return
        max_tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
        seq = Seq(chat_tokens(self.vocab, req["messages"]), max_tokens)
        if self.spec is not None:
            seq.rates = self.spec.rates(seq.prompt_tokens + max_tokens)
        self.engine.submit(seq)
        usage = {
            "prompt_tokens": seq.prompt_tokens,
            "completion_tokens": max_tokens,
            "total_tokens": seq.prompt_tokens + max_tokens,
        }
        if not req.get("stream"):
            while not await seq.tokens.get():
                pass
            choice = {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "t " * max_tokens},
            }
            if self.spec is not None and self.spec.engine == "sglang" and req.get("return_meta_info"):
                choice["meta_info"] = {
                    "prompt_tokens": seq.prompt_tokens,
                    "completion_tokens": seq.generated,
                    "spec_verify_ct": round(seq.verify),
                }
            answer = {
                "id": "sim",
                "object": "chat.completion",
                "model": self.model,
                "usage": usage,
                "choices": [choice],
            }
            await self._send(conn, writer, 200, answer)
            return
        writer.write(
            conn.send(
                h11.Response(
                    status_code=200, headers=[("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
                )
            )
        )
        done = False
        while not done:
            done = await seq.tokens.get()
            chunk = {
                "model": self.model,
                "choices": [{"index": 0, "delta": {"content": "t "}, "finish_reason": "length" if done else None}],
            }
            writer.write(conn.send(h11.Data(data=f"data: {json.dumps(chunk)}\n\n".encode())))
        tail = {"model": self.model, "choices": [], "usage": usage}
        if self.stream_usage:
            writer.write(conn.send(h11.Data(data=f"data: {json.dumps(tail)}\n\n".encode())))
        writer.write(conn.send(h11.Data(data=b"data: [DONE]\n\n")))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()

    async def _send(self, conn, writer, status: int, obj: dict | str, content_type: str = "application/json"):
        await send_bytes(
            conn, writer, status, (obj if isinstance(obj, str) else json.dumps(obj)).encode(), content_type
        )


async def serve(server: Server, port: int, port_file: str | None) -> None:
    engine_task = asyncio.create_task(server.engine.run())
    await listen_until_signal(server.respond, port, port_file, backlog=4096)
    engine_task.cancel()


class SimServerProcess(ChildProcess):
    """The simulated engine in a child process; ``url`` is its ``base_url`` (``http://127.0.0.1:P/v1``)."""

    def __init__(
        self,
        workdir: str,
        *,
        a_ms: float,
        b_ms: float,
        cap: int,
        model: str = "sim-model",
        tokenize: bool = True,
        exit_after_requests: int | None = None,
        stream_usage: bool = True,
        log_headers: str | None = None,
        spec: str | None = None,
    ):
        port_file = os.path.join(workdir, f"sim-port-{os.getpid()}-{id(self)}")
        args = [
            sys.executable,
            os.path.abspath(__file__),
            "--port-file",
            port_file,
            "--a-ms",
            str(a_ms),
            "--b-ms",
            str(b_ms),
            "--cap",
            str(cap),
            "--model",
            model,
        ]
        if not tokenize:
            args.append("--no-tokenize")
        if exit_after_requests is not None:
            args += ["--exit-after-requests", str(exit_after_requests)]
        if not stream_usage:
            args.append("--no-stream-usage")
        if log_headers is not None:
            args += ["--log-headers", log_headers]
        if spec is not None:
            args += ["--spec", spec]
        self.proc, self.port = spawn_with_port_file(args, port_file, "sim server")
        self.model, self.law = model, Law(a_ms / 1e3, b_ms / 1e3, cap)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self, since: float, until: float) -> dict:
        import urllib.request

        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.port}/stats?since={since:.6f}&until={until:.6f}", timeout=10
        ) as r:
            return json.loads(r.read())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--a-ms", type=float, default=10.0)
    p.add_argument("--b-ms", type=float, default=0.15)
    p.add_argument("--cap", type=int, default=32)
    p.add_argument("--model", default="sim-model")
    p.add_argument("--no-tokenize", action="store_true")
    p.add_argument("--exit-after-requests", type=int)
    p.add_argument("--no-stream-usage", action="store_true", help="send no usage chunk in streams")
    p.add_argument("--log-headers", help="append method, path and Authorization of every request (JSONL)")
    p.add_argument("--spec", help="ENGINE:K:P0[:DECAY]: speculate (tests/support/spec_metrics.py)")
    a = p.parse_args(argv)
    spec = None
    if a.spec:
        engine, k, p0, *decay = a.spec.split(":")
        spec = SpecLaw(engine, int(k), float(p0), float(decay[0]) if decay else 0.0)
    server = Server(
        Law(a.a_ms / 1e3, a.b_ms / 1e3, a.cap),
        a.model,
        not a.no_tokenize,
        a.exit_after_requests,
        not a.no_stream_usage,
        a.log_headers,
        spec,
    )
    asyncio.run(serve(server, a.port, a.port_file))


if __name__ == "__main__":
    main()
