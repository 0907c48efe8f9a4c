"""The MCP server: the agent tool contract over the official `mcp` SDK (stdio or streamable HTTP).

Built on the SDK's low-level `Server` rather than `MCPServer`'s decorators: the decorators derive
schemas from function signatures and reject arguments before our code runs, while the contract
publishes its own JSON schemas and answers every call, bad ones included, with a JSON envelope
(text content, `isError` when `success` is false). Tool calls run on a small pool of worker
threads, each with its own read-only connection, so the event loop never blocks on SQLite.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from io import TextIOWrapper
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from markindex_core import __version__
from markindex_core.config import (
    MCP_BACKGROUND_GRACE_SECONDS,
    MCP_HTTP_BODY_SECONDS,
    MCP_HTTP_HEAD_SECONDS,
    MCP_HTTP_HOST,
    MCP_HTTP_LOOPBACK_NAMES,
    MCP_HTTP_PORT,
    MCP_HTTP_WILDCARD_HOSTS,
    MCP_ID_SCAN_TOKENS,
    MCP_LOG_EXCERPT_CHARS,
    MCP_TOOL_QUEUE,
    MCP_TOOL_THREADS,
)
from markindex_core.errors import OutputClosed
from markindex_core.tools.contract import (
    AGENT_INSTRUCTIONS,
    busy_result,
    call_tool_result,
    tool_specs,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from markindex_core.library import Library

log = logging.getLogger("markindex.mcp")

SERVER_NAME = "markindex"
_ANNOTATIONS = {
    "read_only_hint": True,
    "destructive_hint": False,
    "idempotent_hint": True,
    "open_world_hint": False,
}


# What every major tool-calling API accepts: the keywords of Gemini's function-declaration
# Schema (an OpenAPI 3.0 subset), which Anthropic and OpenAI accept too.
PUBLISHED_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "items",
        "enum",
        "default",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    }
)


def public_schema(schema: Any) -> Any:
    """The schema as published, in the subset every major tool-calling API accepts.

    The tools' own validator keeps enforcing the full contract; publishing leaves out what some
    clients reject: our private `format` checks (library paths, node ids), `additionalProperties`
    (Gemini's function declarations refuse it) and `null` in type lists (single-type dialects
    refuse `["string", "null"]`): an optional argument is simply not required, and a null default
    is not published.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: public_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = public_schema(value)
        elif key == "type" and isinstance(value, list):
            kinds = [v for v in value if v != "null"]
            out[key] = kinds[0] if len(kinds) == 1 else kinds
        elif key == "default" and value is None:
            continue
        elif key in PUBLISHED_KEYWORDS:
            out[key] = value
    return out


def mcp_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=public_schema(spec.input_schema),
            annotations=types.ToolAnnotations(title=spec.title, **_ANNOTATIONS),
        )
        for spec in tool_specs()
    ]


# A tools/call whose `name` is no string or whose `arguments` is no object: the SDK would refuse it
# with a bare "Invalid request parameters" protocol error, which a model never sees. Such a call
# goes through with placeholders, and the handler answers the values as sent with an envelope.
_MISTYPED_CALL: ContextVar[tuple[Any, Any] | None] = ContextVar("markindex_call", default=None)


async def _mistyped_calls(ctx: Any, call_next: Any) -> Any:
    params = ctx.params
    if ctx.method == "tools/call" and params is None:
        params = {}  # left out or null: a call without a name, as `params: {}` is
    if ctx.method != "tools/call" or not isinstance(params, Mapping):
        return await call_next(ctx)
    name, arguments = params.get("name"), params.get("arguments")
    if isinstance(name, str) and (arguments is None or isinstance(arguments, dict)):
        return await call_next(ctx)
    token = _MISTYPED_CALL.set((name, arguments))
    try:
        placeholders = {**params, "name": name if isinstance(name, str) else "", "arguments": None}
        return await call_next(replace(ctx, params=placeholders))
    finally:
        _MISTYPED_CALL.reset(token)


def build_server(lib: Library) -> Server[Any]:
    """An MCP server exposing the five read-only tools of `lib`, with the agent instructions.

    Calls wait for one of MCP_TOOL_THREADS workers, at most MCP_TOOL_QUEUE of them at a time;
    one more is answered SERVER_BUSY at once. Unbounded, the queue let one HTTP client's burst
    of calls (300 heavy ones: 90 s of work) keep every other client waiting until it was done.
    """
    tools = mcp_tools()
    limiter: list[anyio.CapacityLimiter] = []  # created on first use, inside the event loop

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if not limiter:
            limiter.append(anyio.CapacityLimiter(MCP_TOOL_THREADS))
        name, arguments = _MISTYPED_CALL.get() or (params.name, params.arguments)
        waiting = limiter[0].statistics().tasks_waiting
        if waiting >= MCP_TOOL_QUEUE:  # a bounded wait for every call, whoever sends the rest
            text, ok = busy_result(waiting)
        else:
            text, ok = await anyio.to_thread.run_sync(
                call_tool_result,
                lib,
                name,
                arguments,
                limiter=limiter[0],
                abandon_on_cancel=True,  # a client that goes away must not wait for a query
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=not ok
        )

    server: Server[Any] = Server(
        SERVER_NAME,
        version=__version__,
        title="markindex",
        description="Structure-first, vectorless retrieval over a library of Markdown documents",
        instructions=AGENT_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(_mistyped_calls)
    return server


# ----- stdout guard ------------------------------------------------------------------------------
_wire: BinaryIO | None = None


def guard_stdout() -> BinaryIO:
    """Reserve the real stdout for JSON-RPC and send everything else to stderr.

    The wire keeps a private duplicate of fd 1; fd 1 itself and `sys.stdout` then point at stderr,
    so a stray `print`, a C library or a child process cannot corrupt the protocol. Idempotent.
    """
    global _wire
    if _wire is None:
        if sys.stdout is None:  # fd 1 closed (`>&-`): there is nowhere to answer
            raise OutputClosed(
                "standard output is closed: MCP over stdio answers there",
                "start it from an MCP host, which reads its stdout, or serve over HTTP "
                "(markindex mcp ROOT --transport streamable-http)",
            )
        sys.stdout.flush()
        wire_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        _wire = os.fdopen(wire_fd, "wb", closefd=False)
    return _wire


def guard_stdin() -> BinaryIO:
    """Take the real stdin for JSON-RPC and point fd 0 at the null device, so a tool, a C library
    or a child process reading stdin gets EOF instead of eating requests. Idempotent."""
    global _wire_in
    if _wire_in is None:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        _wire_in = os.fdopen(private, "rb", closefd=False)
    return _wire_in


_wire_in: BinaryIO | None = None


# ----- requests the SDK can't read ---------------------------------------------------------------
# The SDK drops a line it cannot validate (a lone surrogate, nesting deeper than its parser allows,
# broken JSON) with a debug log only, so the client would wait forever for that request. Lines are
# checked before the SDK sees them; a bad one is logged and, when its id can be found, answered.

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_KEY_END = re.compile(r"\s*:\s*")
_ID_VALUE = re.compile(r'-?\d+|"[^"\\]*(?:\\.[^"\\]*)*"')
_STRUCTURE = re.compile(r'["{}\[\]]')
_RESPONSE_KEYS = frozenset({'"result"', '"error"'})


_TAIL_ID = re.compile(r'(?<!\\)"id"\s*:\s*(-?\d+|"[^"\\]*(?:\\.[^"\\]*)*")\s*\}\s*$')


def _scan(line: str) -> tuple[int | str | None, bool]:
    """(`"id"`, is_response) of the outermost object without parsing nested values (they may be
    too deep or broken). Bounded work for any line: the head is scanned token by token up to a
    budget; an id written last (`…, "id": 7}`) is found at the tail."""
    rid, response = _scan_head(line, MCP_ID_SCAN_TOKENS)
    if rid is None and (m := _TAIL_ID.search(line[-MCP_LOG_EXCERPT_CHARS:])):
        rid = json.loads(m.group(1))
    return rid, response


def _scan_head(line: str, budget: int) -> tuple[int | str | None, bool]:
    depth, rid, response = 0, None, False
    pos = _STRUCTURE.search(line)
    while pos is not None and budget > 0:
        budget -= 1
        i, c = pos.start(), pos.group()
        if c == '"':
            m = _JSON_STRING.match(line, i)
            if m is None:
                break  # unterminated string: nothing after it can be trusted
            colon = _KEY_END.match(line, m.end()) if depth == 1 else None
            if colon and m.group() == '"id"' and (v := _ID_VALUE.match(line, colon.end())):
                rid = json.loads(v.group())
            response = response or bool(colon and m.group() in _RESPONSE_KEYS)
            i = m.end() - 1
        else:
            depth += 1 if c in "{[" else -1
        pos = _STRUCTURE.search(line, i + 1)
    return rid, response


@dataclass(frozen=True)
class Refusal:
    """Why a line is no JSON-RPC message the server can handle, and the reply it gets."""

    code: int
    message: str
    request_id: int | str | None  # None: nothing to reply to (no id found, or not a request)
    batch_ids: tuple[int | str, ...] = ()  # a batch: the ids of the requests in it, each answered
    null_id: bool = False  # a request with an id of the wrong type: answered with id null

    def reply_ids(self) -> tuple[int | str | None, ...]:
        """The ids to send the error to: none, one, or one per request of a batch."""
        if self.batch_ids:
            return self.batch_ids
        if self.null_id:
            return (None,)
        return () if self.request_id is None else (self.request_id,)


_BATCH_REFUSED = (
    "Invalid request: JSON-RPC batches are not supported (MCP dropped them in 2025-06-18); "
    "send each message on a line of its own"
)


def _batch_ids(line: str) -> tuple[int | str, ...] | None:
    """The request ids of a JSON-RPC batch (a JSON array), or None when the line is none."""
    try:
        batch = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(batch, list):
        return None
    ids: list[int | str] = []
    for item in batch:
        if not isinstance(item, dict) or "method" not in item:
            continue
        rid = item.get("id")
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
            ids.append(rid)  # a request (responses and notifications get no reply)
    return tuple(dict.fromkeys(ids))


def _recover_id(line: str) -> tuple[Any, bool]:
    """(id, is_response) as far as the line allows: parsed when it parses, else scanned. Our
    server sends no requests, so anything with an id that is not plainly a response is
    answered."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return _scan(line)
    if not isinstance(obj, dict):
        return None, False
    rid = obj.get("id")
    valid = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    return (rid if valid else None), ("result" in obj or "error" in obj)


_BAD_ID = (
    "Invalid request: an id must be a string or an integer (MCP), not {given}; "
    "this reply has id null, as JSON-RPC asks when the request's id can't be used"
)


def _mistyped_id(line: str) -> str | None:
    """The id of a request whose id is neither a string nor an integer (`1.5`, `true`, `null`).

    The SDK reads such a line as a notification and never answers it, so its client would wait
    for ever. Only notifications are checked: they are few, and parsing them again is cheap."""
    if '"id"' not in line:
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or "id" not in obj:
        return None
    return json.dumps(obj["id"])[:40]


def refusal(line: str) -> Refusal | None:
    """None for a valid JSON-RPC message; otherwise the error to log and (maybe) send back."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        detail = str(first.get("msg", "invalid message"))
        parse_error = first.get("type") == "json_invalid"
    else:
        if isinstance(message, types.JSONRPCNotification) and (given := _mistyped_id(line)):
            return Refusal(types.INVALID_REQUEST, _BAD_ID.format(given=given), None, null_id=True)
        return None
    if (batch := _batch_ids(line)) is not None:  # a client would wait for every id in it
        return Refusal(types.INVALID_REQUEST, _BATCH_REFUSED, None, batch)
    rid, is_response = _recover_id(line)
    if parse_error and _parses(line):  # valid JSON our parser accepts but the SDK's refuses
        parse_error = False
    code = types.PARSE_ERROR if parse_error else types.INVALID_REQUEST
    prefix = "Parse error" if parse_error else "Invalid request"
    return Refusal(code, f"{prefix}: {detail}", None if is_response else rid)


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except RecursionError:
        return True  # well-formed as far as it was read, only too deep
    except ValueError:
        return False
    return True


_CAPPED_DIGITS = 400  # an integer longer than this is out of every range a tool accepts


def _capped_int(digits: str) -> int:
    if len(digits.lstrip("-")) <= _CAPPED_DIGITS:
        return int(digits)
    return -(10**100) if digits.startswith("-") else 10**100


def _capped_numbers(line: str) -> str | None:
    """The line with its integers of more than 400 digits written as ±10**100; None when it is
    no JSON. JSON integers have no size limit, but the SDK's parser refuses one past 4 300
    digits ("number out of range"): such a valid request got a Parse error. Capped, it gets the
    envelope any out-of-range argument gets."""
    try:
        message = json.loads(line, parse_int=_capped_int)
    except (ValueError, RecursionError):
        return None
    return json.dumps(message, ensure_ascii=False)


def _readable(line: str) -> tuple[str, Refusal | None]:
    """The line as the SDK gets it (its huge integers capped when only they are in the way),
    and why it is refused, if it is."""
    problem = refusal(line)
    if problem is not None and problem.code == types.PARSE_ERROR:
        capped = _capped_numbers(line)
        if capped is not None and refusal(capped) is None:
            return capped, None
    return line, problem


class CheckedLines:
    """The stdin lines handed to the SDK's reader, minus those it could not read: each of those
    is logged on stderr and answered with a JSON-RPC error when its id is known."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self._replies: Any = None
        self._ready = anyio.Event()
        self.lines = 0  # non-blank lines read: none means no client ever spoke
        self._initialized = False  # an `initialize` request went through

    def reply_to(self, write_stream: Any) -> None:
        self._replies = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            self.lines += 1
            line, problem = _readable(line)
            if problem is None and not self._initialized:
                problem = self._before_initialize(line)
            if problem is None:
                yield line
            else:
                await self._refuse(line, problem)

    def _before_initialize(self, line: str) -> Refusal | None:
        """A request other than `initialize` or `ping` before `initialize`: the SDK answered a
        bare "Invalid request parameters", which tells a client author nothing."""
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        if not isinstance(message, types.JSONRPCRequest):
            return None
        if message.method == "initialize":
            self._initialized = True
            return None
        if message.method == "ping":
            return None
        return Refusal(
            types.INVALID_REQUEST,
            f"Invalid request: {message.method[:80]!r} before initialize; send `initialize` first, "
            "then `notifications/initialized`",
            message.id,
        )

    async def _refuse(self, line: str, problem: Refusal) -> None:
        excerpt = line[:MCP_LOG_EXCERPT_CHARS].rstrip("\n")
        ids = problem.reply_ids()
        shown = ", ".join(json.dumps(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")
        log.warning(
            "refused a JSON-RPC message (%s; %s): %s",
            problem.message,
            f"error {problem.code} sent to id {shown}" if ids else "no reply: no request id found",
            excerpt + ("…" if len(line) > MCP_LOG_EXCERPT_CHARS else ""),
        )
        if not ids:
            return
        await self._ready.wait()
        for rid in ids:
            error = types.JSONRPCError(
                jsonrpc="2.0",
                id=rid,
                error=types.ErrorData(code=problem.code, message=problem.message),
            )
            try:
                await self._replies.send(SessionMessage(error))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                log.info("could not reply to id %r: the connection is closing", rid)
                return


def _first_answer(server: Server[Any]) -> anyio.Event:
    """An event set once the server has answered its first request (normally `initialize`), so
    background work (indexing, watching) never competes with the handshake for the CPU."""
    answered = anyio.Event()

    async def note(ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            answered.set()

    server.middleware.append(note)
    return answered


async def _background(job: Callable[[], Awaitable[None]], ready: anyio.Event) -> None:
    """One background job, started after the first answer (or a short grace period); its failure
    is logged, never allowed to stop the server."""
    with anyio.move_on_after(MCP_BACKGROUND_GRACE_SECONDS):
        await ready.wait()
    try:
        await job()
    except Exception:
        log.exception("background job failed")


async def run_stdio(
    lib: Library, *, background: Sequence[Callable[[], Awaitable[None]]] = ()
) -> None:
    """Serve MCP over stdio until the client closes stdin; run `background` jobs alongside in the
    same event loop and cancel them when the client goes away."""
    wire = guard_stdout()
    wire_in = guard_stdin()
    server = build_server(lib)
    ready = _first_answer(server)
    # The text layers must not close the wire when they are garbage-collected.
    text = TextIOWrapper(wire, encoding="utf-8", newline="\n", write_through=True)
    stdout = anyio.wrap_file(text)
    text_in = TextIOWrapper(wire_in, encoding="utf-8", errors="replace")
    stdin = CheckedLines(anyio.wrap_file(text_in))
    try:
        async with (
            stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream),  # type: ignore[arg-type]
            anyio.create_task_group() as tg,
        ):
            stdin.reply_to(write_stream)
            for job in background:
                tg.start_soon(_background, job, ready)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()
    finally:
        text.detach()
        text_in.detach()
    if stdin.lines:
        log.info("the MCP client closed stdin: stopping")
    else:  # started with stdin at its end: systemd, `nohup … &`, docker without -i
        log.warning(
            "stdin closed before any MCP message: stopping (an MCP client starts this command "
            "and talks over stdin; to keep an index live without one, run "
            f"`{lib.command('daemon')} --no-mcp`)"
        )


def _host_port(host: str, port: int | str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (a loopback name or address)."""
    import ipaddress

    if host in MCP_HTTP_LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def http_security(
    host: str,
    port: int,
    *,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> TransportSecuritySettings:
    """DNS-rebinding protection for every bind address: requests must name the bound host.

    The SDK turns the Host/Origin checks on only for 127.0.0.1, localhost and ::1; for any other
    address it would accept a foreign Host or Origin. Here the bound host:port is always allowed,
    and the loopback names on any port (as the SDK does) when bound to loopback or to every
    interface; a reverse proxy adds the names it forwards with `allowed_hosts` /
    `allowed_origins`.
    """
    bound: list[str] = []
    if host not in MCP_HTTP_WILDCARD_HOSTS and host not in MCP_HTTP_LOOPBACK_NAMES:
        bound.append(_host_port(host, port))
        if port == 80:  # a client may leave the default port out of Host and Origin
            bound.append(_host_port(host, "").removesuffix(":"))
    if host in MCP_HTTP_LOOPBACK_NAMES or host in MCP_HTTP_WILDCARD_HOSTS:
        bound += [_host_port(h, "*") for h in MCP_HTTP_LOOPBACK_NAMES]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*bound, *allowed_hosts],
        allowed_origins=[*(f"http://{b}" for b in bound), *allowed_origins],
    )


class BodyDeadline:
    """Read a POST's body, up to the SDK's size limit, within `seconds` before the app sees it.

    Neither uvicorn nor the SDK bounds how long a request body may take: a client that declared
    a Content-Length it never sent, or a chunked body that never ended, held its connection and
    its handler for ever, and when it finally went away the SDK logged the ClientDisconnect as
    an ERROR with a traceback. Here such a request gets 408 after `seconds`, a client gone
    before its body was complete is one INFO line, and the app reads the body as it came. A
    body past the size limit is handed on unread beyond it, for the SDK's own 413.
    """

    def __init__(self, app: ASGIApp, seconds: float, limit: int = DEFAULT_MAX_REQUEST_BODY_SIZE):
        self.app, self.seconds, self.limit = app, seconds, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()  # one buffer: a body sent a byte a chunk costs no more than another
        ended: bool | None = None
        with anyio.move_on_after(self.seconds) as deadline:
            ended = await self._read(receive, body)
        if deadline.cancelled_caught:
            await self._timed_out(scope, send)
            return
        if ended is None:
            log.info("a client went away before its request body was complete")
            return
        whole: Message = {"type": "http.request", "body": bytes(body), "more_body": not ended}
        await self.app(scope, _replaying(whole, receive), send)

    async def _read(self, receive: Receive, body: bytearray) -> bool | None:
        """Add the body to `body` up to its end (True) or past the size limit (False); None
        when the client went away first."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if not message.get("more_body", False):
                return True
            if len(body) > self.limit:
                return False

    async def _timed_out(self, scope: Scope, send: Send) -> None:
        from starlette.responses import PlainTextResponse

        log.info("a request body was not complete after %gs: answered 408", self.seconds)
        response = PlainTextResponse(
            f"Request body not complete within {self.seconds:g} seconds",
            status_code=408,
            headers={"Connection": "close"},
        )
        await response(scope, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


def _replaying(first: Message, receive: Receive) -> Receive:
    """`receive` for an app behind a wrapper that read the request's `first` message itself:
    that message once, then what `receive` gives."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


_HTTP_BATCH_REFUSED = (
    "Invalid request: JSON-RPC batches are not supported (MCP dropped them in 2025-06-18); "
    "send each message in a POST of its own"
)


def no_batches(app: ASGIApp) -> ASGIApp:
    """`app`, answering a POST whose body is a JSON array (a JSON-RPC batch) with the error the
    stdio transport gives: -32600, "batches are not supported". The SDK answered -32602 (invalid
    params) with a 1 KB dump of its validator's errors, which tells a client author nothing.

    Behind BodyDeadline, a complete body comes as one message."""
    from starlette.responses import Response

    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=types.ErrorData(code=types.INVALID_REQUEST, message=_HTTP_BATCH_REFUSED),
    )
    refusal = Response(
        error.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=400,
        media_type="application/json",
    )

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        first = await receive()
        if not first.get("more_body") and _is_batch(first.get("body", b"")):
            await refusal(scope, receive, send)
            return
        await app(scope, _replaying(first, receive), send)

    return serve


def _is_batch(body: bytes) -> bool:
    """Whether `body` is a JSON array; only a body starting with `[` is parsed for it."""
    return body.lstrip()[:1] == b"[" and _batch_ids(body.decode("utf-8", "replace")) is not None


def no_event_stream(app: ASGIApp, path: str = "/mcp") -> ASGIApp:
    """`app`, answering GET `path` with 405, as the MCP spec allows a server that offers no
    event stream.

    Served statelessly, the SDK still opened a stream for every GET, on which this server (it
    never notifies a client) sends nothing, and kept it for as long as the client did: 44 KB
    and a file descriptor each, so holding enough of them used up memory or descriptors.
    """
    from starlette.responses import PlainTextResponse

    refusal = PlainTextResponse(
        "This server offers no event stream: send JSON-RPC requests with POST",
        status_code=405,
        headers={"Allow": "POST"},
    )

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == path:
            await refusal(scope, receive, send)
        else:
            await app(scope, receive, send)

    return serve


def head_deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11), closing a connection whose request head is not complete
    `seconds` after the connection opened or after its previous response.

    uvicorn has no setting for this: its keep-alive timeout starts only after a response and
    any byte cancels it, so a connection that sent nothing, or a header a byte at a time
    (slowloris), stayed open for ever. Enough of them used up the process's file descriptors:
    the server could accept no one, for as long as they stayed, and asyncio logged each
    failed accept with a traceback (94 MB of log in a minute). They are now closed in time.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadline(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _after: object = None  # the request cycle before the head being waited for

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._await_head()

        def on_response_complete(self) -> None:
            self._await_head()  # first: a pipelined request read next stops the timer
            super().on_response_complete()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not self._after:  # a new request's head was read
                self._stop_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timer()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._stop_timer()
            self._after = self.cycle
            self._timer = self.loop.call_later(seconds, self._head_late)

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _head_late(self) -> None:
            self._timer = None
            if self.cycle is self._after and not self.transport.is_closing():
                log.info("closed a connection whose request head took over %gs", seconds)
                self.transport.close()

    return HeadDeadline


async def run_http(
    lib: Library,
    *,
    host: str = MCP_HTTP_HOST,
    port: int = MCP_HTTP_PORT,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    background: Sequence[Callable[[], Awaitable[None]]] = (),
) -> None:
    """Serve MCP over streamable HTTP at http://host:port/mcp (localhost by default), with
    Host/Origin checks against DNS rebinding whatever the bind address."""
    import uvicorn

    server = build_server(lib)
    ready = _first_answer(server)
    security = http_security(
        host, port, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )
    log.info(
        "accepting Host %s; Origin %s (or none)",
        ", ".join(security.allowed_hosts),
        ", ".join(security.allowed_origins),
    )
    if not _is_loopback(host):
        log.warning(
            "listening on %s, beyond this machine: the server has no authentication of its own, "
            "so anyone who can reach this port can read the library; put it behind a proxy "
            "that authenticates, or bind to 127.0.0.1",
            host or "every interface",
        )
    # Stateless: no session table. The tools only read and the server never calls the client
    # back, so a session holds nothing worth keeping, while the SDK kept each one (about 36 KB)
    # for 30 idle minutes and refused every new client with 503 once 10 000 were open: one
    # client initializing in a loop, or many that never DELETE, locked every other client out.
    # Plain JSON answers, not one-event streams: a stop (SIGTERM, Ctrl-C) waits for a response
    # being written, while sse-starlette ended every open stream at once, so calls already
    # being served lost their answers ("SSE stream ended without a response").
    app = server.streamable_http_app(
        host=host, transport_security=security, stateless_http=True, json_response=True
    )
    # log_config=None: uvicorn's records go through markindex's handler (text or JSON lines).
    config = uvicorn.Config(
        BodyDeadline(no_batches(no_event_stream(app)), MCP_HTTP_BODY_SECONDS),
        host=host,
        port=port,
        http=head_deadline_protocol(MCP_HTTP_HEAD_SECONDS),
        log_level="warning",
        log_config=None,
        lifespan="on",
    )
    http = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        for job in background:
            tg.start_soon(_background, job, ready)
        await http.serve()
        tg.cancel_scope.cancel()
