"""Raw bytes on a real stdio server: a request the SDK can't read still gets a JSON-RPC error
reply when its id can be found, always a log line on stderr, and the server keeps serving."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from markindex_core.library import Library
from markindex_core.serve.mcp_server import refusal
from tests.mcp.helpers import INITIALIZE_REQUEST, server_command
from tests.paths import REPO

INIT = INITIALIZE_REQUEST


def _pump(stream: IO[bytes], into: queue.Queue[bytes]) -> None:
    for line in stream:
        into.put(line)


class Wire:
    """A server process with stdout and stderr read on threads, so every wait is bounded."""

    def __init__(self, lib: Library) -> None:
        command, args = server_command(lib.root, lib.db_path)
        self.proc = subprocess.Popen(
            [command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.out: queue.Queue[bytes] = queue.Queue()
        self.err: queue.Queue[bytes] = queue.Queue()
        for stream, q in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            assert stream
            threading.Thread(target=_pump, args=(stream, q), daemon=True).start()

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 30) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.out.get(timeout=timeout))
        return message

    def log_lines(self, containing: bytes, count: int, timeout: float = 30) -> list[bytes]:
        found: list[bytes] = []
        while len(found) < count:
            line = self.err.get(timeout=timeout)
            if containing in line:
                found.append(line)
        return found

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)

    def initialize(self) -> None:
        self.send(json.dumps(INIT).encode())
        assert self.reply()["id"] == 1
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _call(rid: int, query: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "search_documents", "arguments": {"query": query}},
    }


def test_unreadable_requests_get_error_replies_and_log_lines(indexed_sample: Library) -> None:
    with Wire(indexed_sample) as wire:
        wire.initialize()

        surrogate = json.dumps(_call(5, "x")).replace('"x"', '"\\ud800"').encode()
        deep = json.dumps(_call(6, "x")).replace('"x"', "[" * 1000 + "]" * 1000).encode()
        nested = b'{"a": ' * 1000 + b"1" + b"}" * 1000
        deep_id_last = (
            b'{"jsonrpc": "2.0", "method": "ping", "params": ' + nested + b', "id": "last"}'
        )
        broken = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {'
        for raw in (surrogate, deep, deep_id_last, broken, b"{no id at all", b"\x00\xff\xfe"):
            wire.send(raw)
        replies = {r["id"]: r for r in (wire.reply() for _ in range(4))}
        assert replies[5]["error"]["code"] == -32600
        assert replies[6]["error"]["code"] == -32600
        assert replies["last"]["error"]["code"] == -32600
        assert replies[7]["error"]["code"] == -32700
        assert all(r["error"]["message"] for r in replies.values())
        # Every refused line is logged, the two without an id as well.
        logged = wire.log_lines(b"refused a JSON-RPC message", 6)
        assert sum(b"no reply" in line for line in logged) == 2

        # Invalid UTF-8 inside a string is replaced, not refused: the call is answered.
        wire.send(json.dumps(_call(8, "install")).encode().replace(b"install", b"inst\xffall"))
        wire.send(json.dumps(_call(9, "install")).encode())
        answered = {r["id"]: r for r in (wire.reply() for _ in range(2))}
        assert "result" in answered[8] and answered[9]["result"]["isError"] is False
        assert wire.out.empty()
        assert wire.close() == 0


def test_refusal_finds_only_the_outermost_id() -> None:
    nested_first = '{"params": {"id": 3, "s": "\\"id\\": 4"}, "id": 9, "method": "x", "bad'
    found = refusal(nested_first)
    assert found is not None and found.request_id == 9 and found.code == -32700
    found = refusal('{"jsonrpc": "2.0", "result": {}, "id": 2, "extra": ' + "[" * 900 + "]" * 900)
    assert found is not None and found.request_id is None  # a response is never answered
    assert refusal('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None
    found = refusal('{"x": "unterminated, "id": 5')
    assert found is not None and found.request_id is None
    found = refusal('{"jsonrpc": "2.0", "id": 8}')  # valid JSON, no method: still answered
    assert found is not None and found.request_id == 8 and found.code == -32600


def test_finding_the_id_of_a_huge_deep_line_is_bounded() -> None:
    nested = '{"a": ' * 1_000_000 + "1" + "}" * 1_000_000
    for line, rid in (
        ('{"jsonrpc": "2.0", "method": "ping", "params": ' + nested + ', "id": "last"}', "last"),
        ('{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": ' + nested + "}", 6),
    ):
        t0 = time.perf_counter()
        found = refusal(line)
        assert found is not None and found.request_id == rid
        assert time.perf_counter() - t0 < 5  # a token-by-token scan of it took over 10 s


def test_a_batch_gets_an_error_for_each_request_in_it(indexed_sample: Library) -> None:
    """MCP has no batches since 2025-06-18, and the SDK drops a JSON array silently: a client that
    sends one must still get an answer for every request id in it, not wait forever."""
    with Wire(indexed_sample) as wire:
        wire.initialize()
        batch = [
            _call(2, "install"),
            {"jsonrpc": "2.0", "method": "notifications/progress"},  # no id: nothing to answer
            {"jsonrpc": "2.0", "id": "three", "method": "ping"},
        ]
        wire.send(json.dumps(batch).encode())
        replies = {r["id"]: r for r in (wire.reply() for _ in range(2))}
        assert set(replies) == {2, "three"}
        for reply in replies.values():
            assert reply["error"]["code"] == -32600
            assert "batches are not supported" in reply["error"]["message"]
        assert wire.log_lines(b"batches are not supported", 1)
        wire.send(json.dumps(_call(4, "install")).encode())  # and the server keeps serving
        answer = wire.reply()
        assert answer["id"] == 4 and answer["result"]["isError"] is False
        assert wire.close() == 0


def test_mistyped_tool_calls_get_invalid_input_envelopes(indexed_sample: Library) -> None:
    """`arguments` that is no object and a `name` that is no string are wrong types: the model
    must read why in an envelope, not get the SDK's bare "Invalid request parameters"."""

    def tool_call(wire: Wire, rid: int, params: dict[str, Any]) -> dict[str, Any]:
        wire.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
            ).encode()
        )
        reply = wire.reply()
        assert reply["id"] == rid and "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    with Wire(indexed_sample) as wire:
        wire.initialize()
        for rid, params, code, words in (
            (
                2,
                {"name": "get_document", "arguments": ["README.md"]},
                "INVALID_INPUT",
                "got an array",
            ),
            (
                3,
                {"name": "get_document", "arguments": "doc_path=README.md"},
                "INVALID_INPUT",
                "a string",
            ),
            (4, {"name": "browse_documents", "arguments": 7}, "INVALID_INPUT", "an integer"),
            (5, {"name": None, "arguments": {}}, "UNKNOWN_TOOL", "got null"),
            (6, {"name": ["get_document"]}, "UNKNOWN_TOOL", "got an array"),
        ):
            result = tool_call(wire, rid, params)
            env = json.loads(result["content"][0]["text"])
            assert result["isError"] is True and env["code"] == code and words in env["error"], env
        ok = tool_call(wire, 7, {"name": "get_document", "arguments": {"doc_path": "README.md"}})
        assert ok["isError"] is False
        assert wire.close() == 0


def test_a_tool_call_without_params_gets_an_envelope(indexed_sample: Library) -> None:
    """`params` left out or null is a call without a name, like `params: {}`: that one got the
    UNKNOWN_TOOL envelope, these the SDK's bare "Invalid request parameters" (data "")."""
    with Wire(indexed_sample) as wire:
        wire.initialize()
        for rid, params in ((2, b""), (3, b', "params": null')):
            wire.send(b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call"%s}' % (rid, params))
            reply = wire.reply()
            assert reply["id"] == rid and "result" in reply, reply
            env = json.loads(reply["result"]["content"][0]["text"])
            assert reply["result"]["isError"] is True and env["code"] == "UNKNOWN_TOOL", env
            assert "got null" in env["error"]
        assert wire.close() == 0


def test_an_integer_too_long_for_the_sdk_gets_an_envelope(indexed_sample: Library) -> None:
    """JSON integers have no size limit, but the SDK's parser refuses one past 4 300 digits
    ("number out of range"): a `part` of 5 000 digits got a -32700 Parse error, though the line
    is valid JSON, where a `part` of 4 000 digits gets the INVALID_INPUT envelope."""
    with Wire(indexed_sample) as wire:
        wire.initialize()
        for rid, digits in ((2, "9" * 5000), (3, "-" + "9" * 5000)):
            arguments = '{"folder": "", "part": ' + digits + "}"
            wire.send(
                b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": '
                b'"browse_documents", "arguments": %s}}' % (rid, arguments.encode())
            )
            reply = wire.reply()
            assert reply["id"] == rid and "result" in reply, reply
            env = json.loads(reply["result"]["content"][0]["text"])
            assert env["code"] == "INVALID_INPUT" and "too large to show" in env["error"], env
        assert wire.close() == 0


def test_a_request_with_an_id_of_the_wrong_type_is_answered(indexed_sample: Library) -> None:
    """The SDK reads `"id": 1.5` (or true, null) as a notification: its client waited for ever."""
    with Wire(indexed_sample) as wire:
        wire.initialize()
        for rid in (b"1.5", b"true", b"null", b"[2]"):
            wire.send(b'{"jsonrpc": "2.0", "id": ' + rid + b', "method": "tools/list"}')
            reply = wire.reply()
            assert reply["id"] is None and reply["error"]["code"] == -32600, reply
            assert rid.decode() in reply["error"]["message"]
            assert "string or an integer" in reply["error"]["message"]
        wire.send(b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}')
        wire.send(json.dumps(_call(9, "install")).encode())
        assert wire.reply()["id"] == 9  # a notification is still not answered; serving goes on
        assert wire.out.empty()
        assert wire.close() == 0


def test_a_request_before_initialize_is_told_to_initialize(indexed_sample: Library) -> None:
    """The SDK answered 'Invalid request parameters' with no data; ping is allowed before."""
    with Wire(indexed_sample) as wire:
        wire.send(json.dumps(_call(2, "install")).encode())
        refused = wire.reply()
        assert refused["id"] == 2 and refused["error"]["code"] == -32600
        assert "'tools/call' before initialize" in refused["error"]["message"]
        wire.send(b'{"jsonrpc": "2.0", "id": "p", "method": "ping"}')
        assert wire.reply() == {"jsonrpc": "2.0", "id": "p", "result": {}}
        wire.send(json.dumps(INIT).encode())
        assert "result" in wire.reply()
        wire.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        wire.send(json.dumps(_call(3, "install")).encode())
        assert wire.reply()["result"]["isError"] is False
        assert wire.close() == 0


@pytest.mark.parametrize("command", ["mcp", "daemon"])
def test_a_closed_stdout_is_one_clear_error(
    sample_library: Path, tmp_path: Path, command: str
) -> None:
    """`markindex mcp ROOT >&-` (fd 1 closed: nowhere to answer) ended in an AttributeError
    traceback from the stdout guard; `daemon` the same. Both now fail in one line that says
    stdout is the MCP wire."""
    import os

    done = subprocess.run(
        [
            *(sys.executable, "-m", "markindex_core", command, str(sample_library)),
            "--db",
            str(tmp_path / "index.db"),
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "standard output is closed" in done.stderr and "MCP" in done.stderr, done.stderr


def test_a_closed_stdin_stops_like_an_empty_one(sample_library: Path, tmp_path: Path) -> None:
    """`markindex mcp ROOT <&-` (fd 0 closed) ended in an ExceptionGroup traceback (EBADF from
    the stdin reader). It now stops as with stdin at its end: one warning, exit 0."""
    import os

    done = subprocess.run(
        [
            *(sys.executable, "-m", "markindex_core", "mcp", str(sample_library)),
            "--db",
            str(tmp_path / "index.db"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "stdin closed before any MCP message" in done.stderr and done.stdout == ""


def test_ctrl_c_stops_a_serving_server_at_once(indexed_sample: Library) -> None:
    """Ctrl-C on a stdio server that had answered requests left it hanging until the client sent
    a line or closed stdin: the thread reading stdin cannot be cancelled, and asyncio and the
    interpreter waited for it. It now stops at once with 130, as the help says."""
    import signal

    with Wire(indexed_sample) as wire:
        wire.initialize()
        wire.send(json.dumps(_call(2, "install")).encode())
        assert wire.reply()["id"] == 2
        wire.proc.send_signal(signal.SIGINT)
        assert wire.proc.wait(timeout=10) == 130
        assert wire.log_lines(b"interrupted", 1)
