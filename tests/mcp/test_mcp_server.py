"""The MCP server driven by the SDK client: the tool contract in-process (`Client(build_server(lib))`,
no JSON-RPC framing, fast), and the wire as a real process over stdio (and once over HTTP)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from markindex_core.config import RESPONSE_CHAR_BUDGET
from markindex_core.library import Library
from markindex_core.serve.mcp_server import build_server, public_schema
from markindex_core.tools.contract import AGENT_INSTRUCTIONS, TOOLS
from tests.mcp.helpers import (
    INITIALIZE_REQUEST,
    LARGEST_DOC,
    TOOL_NAMES,
    content_lines,
    envelope,
    hostile_calls,
    join_pieces,
    server_command,
    wait_until_listening,
)

DOC = "guides/install.md"


def stdio_client(root: Path, db: Path, *extra: str) -> Client:
    command, args = server_command(root, db, *extra)
    return Client(StdioServerParameters(command=command, args=args), read_timeout_seconds=60)


def inprocess_client(lib: Library, mode: str = "auto") -> Client:
    """The same server object the process serves, connected in memory."""
    return Client(build_server(lib), mode=mode, raise_exceptions=True)


async def call(client: Client, name: str, args: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(name, args)
    text = result.content[0].text  # type: ignore[union-attr]
    env = envelope(text)
    assert env["success"] is (not result.is_error)
    return env["success"], env


@pytest.mark.parametrize(
    ("mode", "wire"), [("auto", "in-process"), ("legacy", "in-process"), ("auto", "stdio")]
)
async def test_initialize_lists_tools_and_every_tool_answers(
    indexed_sample: Library, mode: str, wire: str
) -> None:
    if wire == "stdio":
        command, args = server_command(indexed_sample.root, indexed_sample.db_path)
        connected = Client(StdioServerParameters(command=command, args=args), mode=mode)
    else:
        connected = inprocess_client(indexed_sample, mode)
    with anyio.fail_after(60):
        async with connected as client:
            assert client.instructions == AGENT_INSTRUCTIONS
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOL_NAMES
            for name, tool in tools.items():
                assert tool.input_schema == public_schema(TOOLS[name].input_schema)
                assert tool.annotations and tool.annotations.read_only_hint is True
                assert tool.annotations.destructive_hint is False
                assert tool.description == TOOLS[name].description
            ok, env = await call(client, "browse_documents", {})
            assert ok and env["data"]["documents_below"] == 4
            ok, env = await call(client, "get_document", {"doc_path": DOC})
            assert ok and env["data"]["links"]["backlinks_total"] == 2
            ok, env = await call(client, "get_document_structure", {"doc_path": DOC, "depth": 3})
            node = next(n for n in env["data"]["nodes"] if n["title"] == "Requirements")
            ok, env = await call(
                client, "get_node_content", {"doc_path": DOC, "node_ids": [node["node_id"]]}
            )
            assert ok and env["data"]["nodes"][0]["content"].startswith("12│ ## Requirements")
            ok, env = await call(client, "search_documents", {"query": "数据安全"})
            assert ok and env["data"]["results"][0]["doc_path"].startswith("laws/")


async def test_hostile_calls_get_errors_and_the_server_keeps_serving(
    indexed_sample: Library,
) -> None:
    calls = hostile_calls()
    errors = 0
    with anyio.fail_after(120):
        async with inprocess_client(indexed_sample) as client:
            for name, args in calls:
                if isinstance(args, dict):  # non-objects: the client refuses to send them
                    ok, env = await call(client, name, args)
                    assert not ok, (name, str(args)[:80])
                    errors += 1
            ok, env = await call(client, "browse_documents", {"folder": "guides"})
            assert ok and env["data"]["documents"][0]["path"] == DOC
    assert errors >= 40


async def test_fifty_concurrent_calls(indexed_sample: Library) -> None:
    results: list[tuple[bool, dict[str, Any]]] = []
    plans = [
        ("search_documents", {"query": q})
        for q in ("install", "数据", "config 配置", "upgrade proxy", "安全事件")
    ] + [
        ("get_document", {"doc_path": DOC}),
        ("browse_documents", {}),
        ("get_document_structure", {"doc_path": DOC}),
    ]

    with anyio.fail_after(60):
        async with inprocess_client(indexed_sample) as client:

            async def one(i: int) -> None:
                name, args = plans[i % len(plans)]
                results.append(await call(client, name, args))

            async with anyio.create_task_group() as tg:
                for i in range(50):
                    tg.start_soon(one, i)
    assert len(results) == 50 and all(ok for ok, _ in results)


async def test_corpus_over_stdio_largest_document(corpus_library: Library) -> None:
    with anyio.fail_after(180):
        async with stdio_client(corpus_library.root, corpus_library.db_path) as client:
            ok, info = await call(client, "get_document", {"doc_path": LARGEST_DOC})
            assert ok and info["data"]["read_structure_first"]
            ok, outline = await call(client, "get_document_structure", {"doc_path": LARGEST_DOC})
            assert ok and outline["data"]["nodes"]
            ok, found = await call(
                client,
                "search_documents",
                {"query": "async Main entry point", "doc_path": LARGEST_DOC},
            )
            assert ok and found["data"]["results"]
            ids = [n["node_id"] for n in info["data"]["top_level_nodes"]]
            lines: list[tuple[int, str]] = []
            for i in range(0, len(ids), 20):
                args = {"doc_path": LARGEST_DOC, "node_ids": ids[i : i + 20], "subtree": True}
                ok, env = await call(client, "get_node_content", args)
                parts = env["data"]["parts"]
                lines += content_lines(env["data"]["nodes"])
                for part in range(2, parts + 1):
                    ok, env = await call(client, "get_node_content", {**args, "part": part})
                    assert ok
                    lines += content_lines(env["data"]["nodes"])
    joined = join_pieces(lines)
    assert sorted(joined) == list(range(1, info["data"]["line_count"] + 1))


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _replies(proc: subprocess.Popen[bytes], count: int) -> list[dict[str, Any]]:
    """The next `count` JSON-RPC messages the server writes, in the order they come."""
    assert proc.stdout
    return [json.loads(proc.stdout.readline()) for _ in range(count)]


def _start_server(lib: Library) -> subprocess.Popen[bytes]:
    """A server on the corpus after the initialize handshake, plus one refused request."""
    command, args = server_command(lib.root, lib.db_path)
    proc = subprocess.Popen(
        [command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout
    _rpc(proc, INITIALIZE_REQUEST)
    reply = json.loads(proc.stdout.readline())
    assert reply["id"] == 1 and "instructions" in reply["result"]
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    # Arguments that are not an object get an INVALID_INPUT envelope; the server goes on.
    for i, arguments in ((99, ["x"]), (100, {})):
        _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "browse_documents", "arguments": arguments},
            },
        )
    # Calls run concurrently: the two answers may come back in either order.
    answers = {reply["id"]: reply["result"] for reply in _replies(proc, 2)}
    assert set(answers) == {99, 100}, answers
    refused = answers[99]
    assert refused["isError"] is True and "INVALID_INPUT" in refused["content"][0]["text"]
    assert answers[100]["isError"] is False
    return proc


def _heavy_calls(proc: subprocess.Popen[bytes], lib: Library) -> None:
    """Ten calls that each read a page of the largest document, all in flight at once."""
    info = json.loads(lib.call_tool("get_document", {"doc_path": LARGEST_DOC}))
    ids = [n["node_id"] for n in info["data"]["top_level_nodes"]][:20]
    for i in range(2, 12):
        arguments = {"doc_path": LARGEST_DOC, "node_ids": ids, "subtree": True, "part": i}
        _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "get_node_content", "arguments": arguments},
            },
        )


def test_closing_stdin_mid_call_ends_the_process_and_stdout_is_only_jsonrpc(
    corpus_library: Library,
) -> None:
    proc = _start_server(corpus_library)
    assert proc.stdin and proc.stdout
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    _heavy_calls(proc, corpus_library)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    reader.join(timeout=10)
    assert lines and all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)


def test_a_client_that_vanishes_mid_call_does_not_leave_the_process_hanging(
    corpus_library: Library,
) -> None:
    proc = _start_server(corpus_library)
    assert proc.stdin and proc.stdout
    _heavy_calls(proc, corpus_library)
    proc.stdin.close()  # both pipes gone while the calls run
    proc.stdout.close()
    t0 = time.perf_counter()
    proc.wait(timeout=30)
    assert time.perf_counter() - t0 < 15


async def test_missing_index_then_reindex_on_start(sample_library: Path, tmp_path: Path) -> None:
    db = tmp_path / "fresh" / "index.db"
    with anyio.fail_after(60):
        async with stdio_client(sample_library, db) as client:
            ok, env = await call(client, "browse_documents", {})
            assert not ok and env["code"] == "INDEX_MISSING"
        t0 = time.perf_counter()
        async with stdio_client(sample_library, db, "--reindex-on-start") as client:
            assert time.perf_counter() - t0 < 30
            while True:
                ok, env = await call(client, "browse_documents", {})
                if ok and env["data"]["documents_below"] == 4:
                    break
                assert ok or env["code"] in ("INDEX_MISSING", "INDEX_BUILDING"), env
                await anyio.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_streamable_http_on_localhost(indexed_sample: Library) -> None:
    port = _free_port()
    command, args = server_command(
        indexed_sample.root,
        indexed_sample.db_path,
        "--transport",
        "streamable-http",
        "--port",
        str(port),
    )
    proc = subprocess.Popen([command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(wait_until_listening, proc, "127.0.0.1", port)
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOL_NAMES
                result = await client.call_tool("search_documents", {"query": "install"})
                assert not result.is_error
                assert len(result.content[0].text) <= RESPONSE_CHAR_BUDGET  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_stdout_guard_sends_stray_output_to_stderr() -> None:
    code = (
        "import os, sys\n"
        "from markindex_core.serve.mcp_server import guard_stdout\n"
        "wire = guard_stdout()\n"
        "print('stray print')\n"
        "os.system('echo child process output')\n"
        "os.write(1, b'raw fd write\\n')\n"
        'wire.write(b\'{"jsonrpc": "2.0"}\\n\'); wire.flush()\n'
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=True)
    assert done.stdout == b'{"jsonrpc": "2.0"}\n'
    for text in (b"stray print", b"child process output", b"raw fd write"):
        assert text in done.stderr
