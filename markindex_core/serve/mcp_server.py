"""The MCP server: the agent tool contract over the official `mcp` SDK (stdio or streamable HTTP).

Built on the SDK's low-level `Server` rather than `MCPServer`'s decorators: the decorators derive
schemas from function signatures and reject arguments before our code runs, while the contract
publishes its own JSON schemas and answers every call, bad ones included, with a JSON envelope
(text content, `isError` when `success` is false). Tool calls run on a small pool of worker
threads, each with its own read-only connection, so the event loop never blocks on SQLite.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from io import TextIOWrapper
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from markindex_core import __version__
from markindex_core.config import (
    MCP_BACKGROUND_GRACE_SECONDS,
    MCP_HTTP_HOST,
    MCP_HTTP_LOOPBACK_NAMES,
    MCP_HTTP_PORT,
    MCP_HTTP_WILDCARD_HOSTS,
    MCP_TOOL_THREADS,
)
from markindex_core.tools.contract import AGENT_INSTRUCTIONS, call_tool_result, tool_specs

if TYPE_CHECKING:
    from markindex_core.library import Library

log = logging.getLogger("markindex.mcp")

SERVER_NAME = "markindex"
_ANNOTATIONS = {
    "read_only_hint": True,
    "destructive_hint": False,
    "idempotent_hint": True,
    "open_world_hint": False,
}


def public_schema(schema: Any) -> Any:
    """The schema as published: our private `format` checks (library paths, node ids) are
    enforced by the tools' validator and left out, so strict client validators don't trip on them."""
    if isinstance(schema, dict):
        return {k: public_schema(v) for k, v in schema.items() if k != "format"}
    if isinstance(schema, list):
        return [public_schema(v) for v in schema]
    return schema


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


def build_server(lib: Library) -> Server[Any]:
    """An MCP server exposing the five read-only tools of `lib`, with the agent instructions."""
    tools = mcp_tools()
    limiter: list[anyio.CapacityLimiter] = []  # created on first use, inside the event loop

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if not limiter:
            limiter.append(anyio.CapacityLimiter(MCP_TOOL_THREADS))
        text, ok = await anyio.to_thread.run_sync(
            call_tool_result,
            lib,
            params.name,
            params.arguments,
            limiter=limiter[0],
            abandon_on_cancel=True,  # a client that goes away must not wait for a query
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=not ok
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        title="markindex",
        description="Structure-first, vectorless retrieval over a library of Markdown documents",
        instructions=AGENT_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# ----- stdout guard ------------------------------------------------------------------------------
_wire: BinaryIO | None = None


def guard_stdout() -> BinaryIO:
    """Reserve the real stdout for JSON-RPC and send everything else to stderr.

    The wire keeps a private duplicate of fd 1; fd 1 itself and `sys.stdout` then point at stderr,
    so a stray `print`, a C library or a child process cannot corrupt the protocol. Idempotent.
    """
    global _wire
    if _wire is None:
        sys.stdout.flush()
        wire_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        _wire = os.fdopen(wire_fd, "wb", closefd=False)
    return _wire


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
    server = build_server(lib)
    ready = _first_answer(server)
    # The text layer must not close the wire when it is garbage-collected.
    text = TextIOWrapper(wire, encoding="utf-8", newline="\n", write_through=True)
    stdout = anyio.wrap_file(text)
    try:
        async with (
            stdio_server(stdout=stdout) as (read_stream, write_stream),
            anyio.create_task_group() as tg,
        ):
            for job in background:
                tg.start_soon(_background, job, ready)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()
    finally:
        text.detach()


def _host_port(host: str, port: int | str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
    app = server.streamable_http_app(host=host, transport_security=security)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    async with anyio.create_task_group() as tg:
        for job in background:
            tg.start_soon(_background, job, ready)
        await uvicorn.Server(config).serve()
        tg.cancel_scope.cancel()
