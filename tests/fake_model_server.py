"""A loopback HTTP server that speaks OpenAI chat completions and Anthropic messages.

Replies come from a script: a queue of `Scripted` items (`enqueue`), recorded replies keyed by
a text the request carries (`replay_keyed`, the same reply for every ask, repairs included), or a
function of the request (`respond_with`). Every request is recorded. Real SDKs point at it by
base URL. Used by the tests and by bench/ scripts (bench/verdicts.py replays real judge replies).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One scripted answer. status != 200 sends an error body; stop is end | max_tokens | refusal."""

    text: str = ""
    status: int = 200
    stop: str = "end"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error_code: str | None = None
    input_tokens: int = 11
    output_tokens: int = 7
    cached_tokens: int = 0
    empty_choices: bool = False  # an OpenAI-compatible body with "choices": [] (seen from some servers)
    # OpenAI `logprobs.content`: per token (text, logprob, {alternative: logprob}); sent when the request asks.
    logprobs: list[tuple[str, float, dict[str, float]]] | None = None


@dataclass
class Recorded:
    api: str  # "openai" | "anthropic"
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    cut_off: bool = False  # the client was gone (its connection closed) before the reply was written


    def text(self) -> str:
        """All text of the request (system and messages), for assertions."""
        parts: list[str] = []
        if isinstance(self.body.get("system"), str):
            parts.append(self.body["system"])
        for m in self.body.get("messages", []):
            content = m.get("content")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts.extend(c.get("text", "") for c in content or [] if isinstance(c, dict))
        return "\n".join(parts)


Responder = Callable[[Recorded], Scripted]


class FakeModelServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._queue: deque[Scripted] = deque()
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def enqueue(self, *replies: Scripted | str) -> None:
        with self._lock:
            self._queue.extend(Scripted(text=r) if isinstance(r, str) else r for r in replies)

    def respond_with(self, fn: Responder | None) -> None:
        self._responder = fn

    def replay_keyed(self, replies: dict[str, str], default: Scripted | None = None) -> None:
        """Answer each request with the recorded reply whose key occurs in the request's text, verbatim.

        Keys are tried longest first, so a key that contains another wins; a request that carries
        no key gets `default` (a 500 when none is given)."""
        keys = sorted(replies, key=len, reverse=True)
        missing = default or Scripted(status=500, text="no recorded reply carries a key of this request")

        def respond(rec: Recorded) -> Scripted:
            text = rec.text()
            for key in keys:
                if key in text:
                    return Scripted(text=replies[key])
            return missing

        self.respond_with(respond)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
        self._responder = None

    def _next(self, rec: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(rec)
            if self._queue:
                return self._queue.popleft()
        if self._responder is not None:
            return self._responder(rec)
        return Scripted(status=500, text="the fake model server has no scripted reply left")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits ~40 ms for
            # the client's delayed ACK, which no real API server makes its clients pay.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                api = "anthropic" if self.path.rstrip("/").endswith("/messages") else "openai"
                rec = Recorded(api, self.path, body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic())
                reply = server._next(rec)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                    rec.cut_off = _closed(self.connection)
                status, payload = (
                    (reply.status, _error(api, reply)) if reply.status != 200 else (200, _success(api, body, reply))
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _closed(conn: socket.socket) -> bool:
    """Whether the client closed its end (a killed process's sockets are closed by the kernel): an HTTP client
    sends nothing more while it waits for a reply, so a readable socket here has met its end."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:  # reset by the peer
        return True


def _success(api: str, body: dict[str, Any], r: Scripted) -> dict[str, Any]:
    model = body.get("model", "fake")
    if api == "anthropic":
        stop = {"end": "end_turn", "max_tokens": "max_tokens", "refusal": "refusal"}[r.stop]
        return {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": r.text}], "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                      "cache_read_input_tokens": r.cached_tokens, "cache_creation_input_tokens": 0},
        }
    refused = r.stop == "refusal"
    if r.empty_choices:
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [], "usage": {"prompt_tokens": r.input_tokens, "completion_tokens": 0,
                                         "total_tokens": r.input_tokens}}
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": None if refused else r.text, "refusal": r.text if refused else None},
            "finish_reason": "length" if r.stop == "max_tokens" else "stop",
            **({"logprobs": {"content": [
                {"token": t, "logprob": lp, "bytes": None,
                 "top_logprobs": [{"token": a, "logprob": alp, "bytes": None} for a, alp in top.items()]}
                for t, lp, top in r.logprobs]}} if r.logprobs is not None and body.get("logprobs") else {}),
        }],
        "usage": {"prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
                  "total_tokens": r.input_tokens + r.output_tokens,
                  "prompt_tokens_details": {"cached_tokens": r.cached_tokens}},
    }


def _error(api: str, r: Scripted) -> dict[str, Any]:
    if api == "anthropic":
        kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error"}.get(r.status, "api_error")
        return {"type": "error", "error": {"type": r.error_code or kind, "message": r.text or kind}}
    return {"error": {"message": r.text or f"error {r.status}", "type": "server_error", "code": r.error_code}}


def main() -> None:
    """Serve every request with one scripted reply after a fixed delay (for benchmarks in another process)."""
    import argparse

    parser = argparse.ArgumentParser(description="A loopback fake OpenAI/Anthropic server.")
    parser.add_argument("--reply", required=True, help="the text every reply carries")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--noise-mean", type=float, default=None,
                        help="replace {score} in the reply by a draw from N(mean, sd) (bench/consistency.py)")
    parser.add_argument("--noise-sd", type=float, default=1.0, help="the noise's standard deviation")
    parser.add_argument("--seed", type=int, default=0, help="the noise's random seed")
    args = parser.parse_args()
    server = FakeModelServer()
    if args.noise_mean is None:
        server.respond_with(lambda rec: Scripted(text=args.reply, delay_s=args.delay))
    else:
        import random

        rng, lock = random.Random(args.seed), threading.Lock()

        def noisy(rec: Recorded) -> Scripted:
            with lock:
                score = rng.gauss(args.noise_mean, args.noise_sd)
            return Scripted(text=args.reply.replace("{score}", f"{score:.4f}"), delay_s=args.delay)

        server.respond_with(noisy)
    server.requests = _Discard()
    print(server.port, flush=True)  # the parent reads the port from the first line
    server._httpd.serve_forever()


class _Discard(list):  # type: ignore[type-arg]
    """A request log that keeps nothing, for long benchmark runs."""

    def append(self, item: object) -> None:
        pass


if __name__ == "__main__":
    main()
