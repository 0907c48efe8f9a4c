"""Streamable HTTP against clients that misbehave, checked against a real server process over
real sockets: the server stays up, its memory stays bounded, and a well-behaved client is still
answered promptly."""

from __future__ import annotations

import contextlib
import http.client
import json
import selectors
import signal
import socket
import threading
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from markindex_core.config import (
    MCP_HTTP_BODY_SECONDS,
    MCP_HTTP_HEAD_SECONDS,
    MCP_TOOL_QUEUE,
    MCP_TOOL_THREADS,
)
from markindex_core.library import Library
from tests.mcp.helpers import INITIALIZE_REQUEST, http_server_process, rss_mb

INITIALIZE = json.dumps(INITIALIZE_REQUEST)
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def well_behaved_call(port: int, seconds: float = 20, *, busy_ok: bool = False) -> None:
    """The real MCP client: initialize and one tool call, answered within `seconds` (with
    `busy_ok`, SERVER_BUSY is an answer too)."""
    with anyio.fail_after(seconds):
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamable_http_client(url) as streams, ClientSession(*streams[:2]) as s:
            await s.initialize()
            result = await s.call_tool("browse_documents", {})
            text = result.content[0].text  # type: ignore[union-attr]
            assert not result.is_error or (busy_ok and '"SERVER_BUSY"' in text), text


def initialize_and_walk_away(port: int, times: int) -> None:
    """`initialize` over and over on one connection, never closing a session (no DELETE), as a
    client in a loop or many short-lived clients that just exit do."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for _ in range(times):
            conn.request("POST", "/mcp", INITIALIZE, MCP_HEADERS)
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
    finally:
        conn.close()


async def test_sessions_never_closed_cost_no_memory(
    indexed_sample: Library, tmp_path: Path
) -> None:
    """Each `initialize` opened a session the SDK kept for 30 idle minutes (about 36 KB each),
    and once 10 000 were open every new client got 503 for as long: 2 000 sessions left open
    cost some 70 MB. Served statelessly, they cost nothing, and the next client is served."""
    with (
        (tmp_path / "stderr").open("wb") as err,
        http_server_process(indexed_sample.root, indexed_sample.db_path, err) as (proc, port),
    ):
        await well_behaved_call(port)
        before = rss_mb(proc.pid)
        await anyio.to_thread.run_sync(initialize_and_walk_away, port, 2000)
        grown = rss_mb(proc.pid) - before
        assert grown < 25, f"{grown:.0f} MB for sessions nobody uses"
        await well_behaved_call(port)
    assert b"Traceback" not in (tmp_path / "stderr").read_bytes()


def post_head(port: int, length: int, first_bytes: bytes) -> socket.socket:
    """A POST to /mcp that declares `length` body bytes and sends only `first_bytes`."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + first_bytes)
    return sock


def test_a_body_never_sent_gets_408_and_no_traceback(
    indexed_sample: Library, tmp_path: Path
) -> None:
    """A request whose body never came held its connection for ever, and the client going away
    at last was logged as an ERROR with a ClientDisconnect traceback. It is now answered 408
    after MCP_HTTP_BODY_SECONDS, and a client gone mid-body is an INFO line."""
    stderr = tmp_path / "stderr"
    with (
        stderr.open("wb") as err,
        http_server_process(indexed_sample.root, indexed_sample.db_path, err) as (_, port),
    ):
        with post_head(port, 1000, b'{"jsonrpc":'):  # and goes away
            time.sleep(0.5)
        with post_head(port, 1000, b'{"jsonrpc":') as stalled:
            started = time.monotonic()
            answer = stalled.recv(200)
            waited = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert waited < MCP_HTTP_BODY_SECONDS + 5, waited
        anyio.run(well_behaved_call, port)
    log = stderr.read_bytes()
    assert b"Traceback" not in log and b"ERROR" not in log, log.decode()
    assert b"went away before its request body was complete" in log, log.decode()


def closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def test_connections_without_a_complete_head_are_closed(
    indexed_sample: Library, tmp_path: Path
) -> None:
    """Connections that sent nothing, or a request head a byte at a time (slowloris), stayed
    open for ever: enough of them used up the server's file descriptors, and it accepted no
    one until they went. They are closed MCP_HTTP_HEAD_SECONDS after they opened."""
    with (
        (tmp_path / "stderr").open("wb") as err,
        http_server_process(indexed_sample.root, indexed_sample.db_path, err) as (_, port),
    ):
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: json\r\n".encode()
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
        dripping = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
        deadline = time.monotonic() + MCP_HTTP_HEAD_SECONDS + 5
        for byte in head:  # a byte every 0.25 s per connection: the head is never complete
            open_ = [s for s in silent + dripping if not closed_by_server(s)]
            if not open_ or time.monotonic() > deadline:
                break
            for sock in dripping:
                with contextlib.suppress(OSError):
                    sock.send(bytes([byte]))
            time.sleep(0.25)
        assert not open_, f"{len(open_)} connections still open"
        for sock in silent + dripping:
            sock.close()
        anyio.run(well_behaved_call, port)
    assert b"Traceback" not in (tmp_path / "stderr").read_bytes()


def test_get_opens_no_event_stream(indexed_sample: Library, tmp_path: Path) -> None:
    """Served statelessly, the SDK still opened an event stream for each GET and kept it, idle
    (this server never notifies), for as long as the client liked: 44 KB and a file descriptor
    each. GET now gets 405, which the MCP spec allows a server with no event stream to say."""
    with (
        (tmp_path / "stderr").open("wb") as err,
        http_server_process(indexed_sample.root, indexed_sample.db_path, err) as (_, port),
    ):
        for _ in range(20):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/mcp", headers={"Accept": "text/event-stream"})
                response = conn.getresponse()
                response.read()  # complete, not a stream left open
                assert response.status == 405, response.status
                assert response.getheader("Allow") == "POST"
            finally:
                conn.close()
        anyio.run(well_behaved_call, port)


def heavy_library(root: Path) -> Library:
    """A document whose outline takes a worker some 0.3 s to serve."""
    root.mkdir()
    sections = "".join(f"## Heading {k}\n\n{'lorem ipsum dolor ' * 30}\n\n" for k in range(3000))
    (root / "big.md").write_text("# Big\n\n" + sections, encoding="utf-8")
    lib = Library(root)
    lib.index()
    return lib


def heavy_call(request_id: int) -> bytes:
    """A JSON-RPC request for the structure of `heavy_library`'s big document."""
    call = {"name": "get_document_structure", "arguments": {"doc_path": "big.md"}}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}
    ).encode()


def flood(port: int, calls: int, refused: threading.Event) -> list[bytes]:
    """`calls` heavy tool calls sent at once, each on its own connection; their answers.
    `refused` is set as soon as one of them is answered SERVER_BUSY."""
    body = heavy_call(5)
    socks = [post_head(port, len(body), body) for _ in range(calls)]
    received = {sock: bytearray() for sock in socks}
    deadline = time.monotonic() + 240
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while selector.get_map():
            assert time.monotonic() < deadline, f"{len(selector.get_map())} calls unanswered"
            for key, _ in selector.select(timeout=1):
                ready = key.fileobj
                assert isinstance(ready, socket.socket)
                chunk = ready.recv(65536)
                received[ready] += chunk
                if b"SERVER_BUSY" in received[ready]:
                    refused.set()
                if not chunk:
                    selector.unregister(ready)
                    ready.close()
    return [bytes(answer) for answer in received.values()]


async def test_a_burst_of_calls_leaves_other_clients_a_bounded_wait(tmp_path: Path) -> None:
    """300 heavy calls sent at once all queued for the 8 worker threads (some 90 s of work),
    and every other client's call waited behind them. Calls past MCP_TOOL_QUEUE waiting are now
    answered SERVER_BUSY at once, so another client is answered within seconds."""
    lib = heavy_library(tmp_path / "library")
    with (
        (tmp_path / "stderr").open("wb") as err,
        http_server_process(lib.root, lib.db_path, err) as (_, port),
        anyio.fail_after(300),
    ):
        async with anyio.create_task_group() as tg:
            answers: list[bytes] = []
            refused = threading.Event()

            async def burst() -> None:
                answers.extend(await anyio.to_thread.run_sync(flood, port, 300, refused))

            tg.start_soon(burst)
            # The queue is full once the server refuses a call of the burst (a busy machine may
            # take a while to get there): from then on, another client is to be answered soon.
            deadline = time.monotonic() + 120
            while not refused.is_set():
                assert not answers, "the whole burst was served, none of it refused SERVER_BUSY"
                assert time.monotonic() < deadline, "no call of the burst refused in 120 s"
                await anyio.sleep(0.05)
            started = time.monotonic()
            await well_behaved_call(port, seconds=30, busy_ok=True)
            assert time.monotonic() - started < 30
        busy = sum(b"SERVER_BUSY" in a for a in answers)
        assert 0 < busy <= 300 - MCP_TOOL_QUEUE - MCP_TOOL_THREADS, busy
        assert all(b"SERVER_BUSY" in a or b'\\"success\\":true' in a for a in answers)
    assert b"Traceback" not in (tmp_path / "stderr").read_bytes()


def test_a_batch_is_refused_as_over_stdio(indexed_sample: Library, tmp_path: Path) -> None:
    """A JSON-RPC batch over HTTP got -32602 (invalid params) and a 1 KB dump of the SDK's
    validator errors; it now gets what stdio says: -32600, batches are not supported."""
    with (
        (tmp_path / "stderr").open("wb") as err,
        http_server_process(indexed_sample.root, indexed_sample.db_path, err) as (_, port),
    ):
        for batch in (f"[{INITIALIZE}]", "[]", " [1, 2]"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("POST", "/mcp", batch, MCP_HEADERS)
                response = conn.getresponse()
                answer = json.loads(response.read())
            finally:
                conn.close()
            assert response.status == 400
            assert answer["id"] is None and answer["error"]["code"] == -32600, answer
            assert "batches are not supported" in answer["error"]["message"]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("POST", "/mcp", "[1, 2", MCP_HEADERS)  # broken JSON: no batch
            assert json.loads(conn.getresponse().read())["error"]["code"] == -32700
        finally:
            conn.close()
        initialize_and_walk_away(port, 1)  # a single message still goes through


def test_a_stop_answers_the_calls_being_served(tmp_path: Path) -> None:
    """SIGTERM while calls were being served cut each of them ("SSE stream ended without a
    response"): sse-starlette ends every open event stream when uvicorn stops. Answers are now
    plain JSON, which the stop waits for; the server still exits soon, as SIGTERM does, with
    nothing at ERROR in its log."""
    lib = heavy_library(tmp_path / "library")
    stderr = tmp_path / "stderr"
    with (
        stderr.open("wb") as err,
        http_server_process(lib.root, lib.db_path, err) as (proc, port),
    ):
        body = heavy_call(9)
        socks = [post_head(port, len(body), body) for _ in range(4)]
        time.sleep(0.3)  # the calls are being served
        proc.send_signal(signal.SIGTERM)
        answers = []
        for sock in socks:
            with sock:
                answers.append(b"".join(iter(lambda s=sock: s.recv(65536), b"")))  # type: ignore[misc]
        assert proc.wait(timeout=15) == -signal.SIGTERM
    assert all(b'"id":9' in a and b"success" in a for a in answers), answers
    log = stderr.read_bytes()
    assert b"ERROR" not in log and b"Traceback" not in log, log.decode()
