"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests that must never
touch the network.

Queue the answers the "model" gives, in order; each request takes the next one. When the queue is
empty the `fallback` answers (a callable can script a model that never stops). Every request is
logged with its arrival time (time.monotonic), headers and JSON body.

    with ScriptedServer() as server:
        server.push(tool_call("browse_documents", {"folder": ""}), reply("done"))
        server.push(error(429, retry_after=1), reply("summary"))
        server.push(Step(stall=True))  # headers, then a space now and then, never the body
        model = f"openai-chat:scripted"  # with base_url=server.base_url
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

JSON = dict[str, Any]
STALLED = 0  # the status `answer` gives a stalled step: the handler trickles instead of answering


@dataclass(frozen=True)
class Step:
    """One scripted answer: an assistant message, or an HTTP error."""

    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, raw arguments text)
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: JSON | None = None  # an error body (status != 200)
    prompt_tokens: int | None = None  # default: the request's JSON length / 4
    completion_tokens: int = 10
    delay_s: float = 0.0  # answer this much later (concurrency tests)
    stall: bool = False  # send the headers, then a byte now and then, never the whole body


def reply(text: str, **kw: Any) -> Step:
    """The model answers with plain text (a final answer, a summary)."""
    return Step(content=text, **kw)


def tool_call(name: str, args: JSON | str, **kw: Any) -> Step:
    """The model calls one tool; `args` as a dict, or raw text (e.g. malformed JSON)."""
    return tool_calls((name, args), **kw)


def tool_calls(*calls: tuple[str, JSON | str], **kw: Any) -> Step:
    """The model calls several tools in one answer."""
    raw = tuple(
        (name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        for name, args in calls
    )
    return Step(tool_calls=raw, **kw)


def error(status: int, *, retry_after: float | None = None, message: str = "scripted") -> Step:
    """An HTTP error, with a Retry-After header when given."""
    headers = (("retry-after", f"{retry_after:g}"),) if retry_after is not None else ()
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return Step(
        status=status,
        headers=headers,
        body={"error": {"message": message, "type": kind, "code": kind}},
    )


@dataclass
class LoggedRequest:
    at: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]
    body: JSON
    status: int = 0  # what the server answered

    @property
    def messages(self) -> list[JSON]:
        messages: list[JSON] = self.body.get("messages", [])
        return messages

    @property
    def text(self) -> str:
        """Everything the request sent, as one string (to look for leaks or a prompt)."""
        return json.dumps(self.body, ensure_ascii=False)


Fallback = Callable[[LoggedRequest], Step]


@dataclass
class ScriptedServer:
    """The server; start it with `with ScriptedServer() as s:` and point a model at `s.base_url`."""

    fallback: Fallback | None = None
    requests: list[LoggedRequest] = field(default_factory=list)
    _queue: deque[Step] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    closed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def push(self, *steps: Step) -> None:
        with self._lock:
            self._queue.extend(steps)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # ----- answering ---------------------------------------------------------------------------
    def _next(self, logged: LoggedRequest) -> Step:
        with self._lock:
            self.requests.append(logged)
            if self._queue:
                return self._queue.popleft()
        if self.fallback is not None:
            return self.fallback(logged)
        return error(500, message="the script has no answer left for this request")

    def answer(self, logged: LoggedRequest) -> tuple[int, list[tuple[str, str]], JSON]:
        step = self._next(logged)
        if step.delay_s:
            time.sleep(step.delay_s)
        if step.stall:
            return STALLED, [], {}
        logged.status = step.status
        if step.status != 200:
            return step.status, list(step.headers), step.body or {"error": {"message": "error"}}
        return 200, list(step.headers), self._completion(step, logged)

    def _completion(self, step: Step, logged: LoggedRequest) -> JSON:
        n = next(self._ids)
        message: JSON = {"role": "assistant", "content": step.content}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
                for i, (name, args) in enumerate(step.tool_calls)
            ]
        prompt = (
            step.prompt_tokens if step.prompt_tokens is not None else max(1, len(logged.text) // 4)
        )
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(logged.body.get("model", "scripted")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if step.tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": step.completion_tokens,
                "total_tokens": prompt + step.completion_tokens,
            },
        }


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"unparseable": raw.decode("utf-8", "replace")}
            logged = LoggedRequest(
                time.monotonic(), self.path, {k.lower(): v for k, v in self.headers.items()}, body
            )
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, [], {"error": {"message": f"no route {self.path}"}})
                return
            status, headers, payload = server.answer(logged)
            if status == STALLED:
                self._stall()
                return
            self._send(status, headers, payload)

        def _stall(self) -> None:
            """A 200 promising a long body that comes a space at a time, until the client goes."""
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "1000000")
            self.end_headers()
            try:
                while not server.closed.wait(0.2):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:
                pass  # the client gave up
            self.close_connection = True

        def _send(self, status: int, headers: list[tuple[str, str]], payload: JSON) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; the request log is `server.requests`

    return Handler


def repeat(step: Step) -> Fallback:
    """A fallback that answers every request with `step` (e.g. a model that never stops)."""
    return lambda _request: step
