"""Shared pieces of the MCP tests: envelopes, page walking, a synthetic large library, hostile calls."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from markindex_core.library import Library

TOOL_NAMES = {
    "browse_documents",
    "get_document",
    "get_document_structure",
    "get_node_content",
    "search_documents",
}
LARGEST_DOC = "dotnet-csharpstandard/standard/csharp-language-standard-draft-v8.combined.md"
# The `initialize` request every raw-wire test sends first.
INITIALIZE_REQUEST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def envelope(text: str) -> dict[str, Any]:
    """Parse one tool response and check the envelope shape every response shares."""
    assert len(text) < 95_000, len(text)  # the spec's bound, a live index's warning included
    env: dict[str, Any] = json.loads(text)
    assert isinstance(env["next_steps"], dict) and env["next_steps"]["message"]
    extra = set()
    if "warning" in env:  # a live index that is not current says so (see tools/contract.py)
        assert isinstance(env["warning"], str) and env["warning"], env["warning"]
        extra = {"warning"}
    if env["success"]:
        assert set(env) - extra == {"success", "data", "next_steps"}
    else:
        assert set(env) - extra == {"success", "error", "code", "details", "next_steps"}
        assert env["error"] and env["code"]
    return env


def call(lib: Library, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return envelope(lib.call_tool(name, args))


def ok(lib: Library, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    env = call(lib, name, args)
    assert env["success"], env
    data: dict[str, Any] = env["data"]
    return data


def content_lines(nodes: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(line number, text) of every `n│ text` line in get_node_content data (pieces of a split
    line come back as several entries with the same number, continuation text starting `…`)."""
    out: list[tuple[int, str]] = []
    for node in nodes:
        if not node["content"]:
            continue
        for line in node["content"].split("\n"):
            number, sep, rest = line.partition("│")
            assert sep and number.isdigit(), line[:80]
            out.append((int(number), rest))
    return out


def read_all_parts(lib: Library, args: dict[str, Any]) -> list[tuple[int, str]]:
    """Walk every part of one get_node_content call; return all lines in order."""
    first = ok(lib, "get_node_content", args)
    lines = content_lines(first["nodes"])
    for part in range(2, first["parts"] + 1):
        data = ok(lib, "get_node_content", {**args, "part": part})
        assert data["part"] == part and data["parts"] == first["parts"]
        lines += content_lines(data["nodes"])
    return lines


def join_pieces(lines: list[tuple[int, str]]) -> dict[int, str]:
    """Line number -> full text (split pieces joined); asserts no line is served twice."""
    out: dict[int, str] = {}
    for number, rest in lines:
        if rest.startswith("… ") and number in out:
            out[number] += rest[2:]
        else:
            assert number not in out, f"line {number} served twice"
            assert rest.startswith(" ")
            out[number] = rest[1:]
    return out


def wait_until_listening(proc: subprocess.Popen[bytes], host: str, port: int) -> None:
    """Wait, bounded, for the server `proc` to accept connections on `port`; fail with its
    stderr if it ends first."""
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "server did not start listening"
            time.sleep(0.05)


def server_command(root: Path, db: Path, *extra: str) -> tuple[str, list[str]]:
    return sys.executable, ["-m", "markindex_core", "mcp", str(root), "--db", str(db), *extra]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server_process(
    root: Path, db: Path, stderr: IO[bytes], *extra: str
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A real `markindex mcp --transport streamable-http` on 127.0.0.1 and a free port, its
    stderr written to `stderr` (a file: a pipe nobody reads would fill and stall the server)."""
    port = free_port()
    command, args = server_command(
        root, db, "--transport", "streamable-http", "--port", str(port), *extra
    )
    proc = subprocess.Popen([command, *args], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_until_listening(proc, "127.0.0.1", port)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid`, in MB (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(kb) / 1024


def write_big_library(root: Path) -> None:
    """A library that needs pagination everywhere: 450 documents in one folder, one document with
    1 200 headings, one with 12 000 long lines, one with a 300 000-character line."""
    many = root / "many"
    many.mkdir(parents=True)
    for i in range(450):
        (many / f"doc-{i:03d}.md").write_text(
            f"---\ndescription: {'desc ' * 60}\n---\n# Document {i}\n\nBody of document {i}.\n",
            encoding="utf-8",
        )
    outline = "".join(
        f"{'#' * (1 + k % 3)} Heading number {k} {'with a longish title ' * 4}\n\ntext {k} alpha\n\n"
        for k in range(1200)
    )
    (root / "outline.md").write_text(outline, encoding="utf-8")
    long_lines = "# Long\n\n" + "".join(
        f'Line {k}: "quoted" \\ back\tslash {"lorem ipsum " * 10}\n' for k in range(12000)
    )
    (root / "long.md").write_text(long_lines, encoding="utf-8")
    giant = "# Giant\n\nbefore\n" + ("x" * 150_000 + '"' * 150_000) + "\nafter\n"
    (root / "giant.md").write_text(giant, encoding="utf-8")


def hostile_calls() -> list[tuple[str, Any]]:
    """More than 40 calls that must each come back as an error envelope."""
    huge = "a" * 1_000_000
    doc = "guides/install.md"
    calls: list[tuple[str, Any]] = [
        ("browse_documents", {"folder": "../"}),
        ("browse_documents", {"folder": "../../etc"}),
        ("browse_documents", {"folder": "/etc"}),
        ("browse_documents", {"folder": "C:\\Windows"}),
        ("browse_documents", {"folder": "guides\\..\\.."}),
        ("browse_documents", {"folder": "guides\x00"}),
        ("browse_documents", {"folder": huge}),
        ("browse_documents", {"folder": 7}),
        ("browse_documents", {"part": 0}),
        ("browse_documents", {"part": -1}),
        ("browse_documents", {"part": 10**12}),
        ("browse_documents", {"part": "2"}),
        ("browse_documents", {"part": True}),
        ("browse_documents", {"part": 1.5}),
        ("browse_documents", {"part": 999}),
        ("browse_documents", {"unknown": 1}),
        ("browse_documents", {"folder": "nope-folder"}),
        ("get_document", {}),
        ("get_document", {"doc_path": "../../../etc/passwd"}),
        ("get_document", {"doc_path": "/etc/passwd"}),
        ("get_document", {"doc_path": "~/.ssh/id_rsa"}),
        ("get_document", {"doc_path": "guides/../../secret.md"}),
        ("get_document", {"doc_path": "guides/install.md\x00.txt"}),
        ("get_document", {"doc_path": huge}),
        ("get_document", {"doc_path": None}),
        ("get_document", {"doc_path": ["guides/install.md"]}),
        ("get_document", {"doc_path": ""}),
        ("get_document", {"doc_path": "guides/instal.md"}),
        ("get_document", {"doc_path": doc, "extra": True}),
        ("get_document_structure", {"doc_path": doc, "depth": -1}),
        ("get_document_structure", {"doc_path": doc, "depth": 0}),
        ("get_document_structure", {"doc_path": doc, "depth": 10**9}),
        ("get_document_structure", {"doc_path": doc, "part": 10**9}),
        ("get_document_structure", {"doc_path": doc, "node_id": "000000000000"}),
        ("get_document_structure", {"doc_path": doc, "node_id": "../x"}),
        ("get_document_structure", {"doc_path": doc, "depth": "2"}),
        ("get_node_content", {"doc_path": doc}),
        ("get_node_content", {"doc_path": doc, "node_ids": []}),
        ("get_node_content", {"doc_path": doc, "node_ids": [f"{i:012x}" for i in range(21)]}),
        ("get_node_content", {"doc_path": doc, "node_ids": "6a6ea8c53eea"}),
        ("get_node_content", {"doc_path": doc, "node_ids": [1, 2]}),
        ("get_node_content", {"doc_path": doc, "node_ids": [huge]}),
        ("get_node_content", {"doc_path": doc, "node_ids": ["deadbeef0000"]}),
        ("get_node_content", {"doc_path": doc, "node_ids": ["x"], "part": -5}),
        ("get_node_content", {"doc_path": doc, "node_ids": ["x"], "subtree": "yes"}),
        ("search_documents", {}),
        ("search_documents", {"query": ""}),
        ("search_documents", {"query": "   "}),
        ("search_documents", {"query": huge}),
        ("search_documents", {"query": 42}),
        ("search_documents", {"query": "install", "limit": 0}),
        ("search_documents", {"query": "install", "limit": 10_000}),
        ("search_documents", {"query": "install", "folder": "../"}),
        ("search_documents", {"query": "install", "doc_path": "/etc/passwd"}),
        ("search_documents", {"query": "install", "doc_path": "missing.md"}),
        ("search_documents", {"query": "install", "sql": "DROP TABLE documents"}),
        ("drop_tables", {}),
        ("", {}),
        ("browse_documents", ["not", "an", "object"]),
        ("browse_documents", "folder=guides"),
    ]
    return calls
