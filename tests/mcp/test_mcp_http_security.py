"""Streamable HTTP keeps DNS-rebinding protection on for every bind address, checked with real
requests against a real server process: a foreign Host or Origin is refused, the bound host:port
and the names given with --allowed-host / --allowed-origin are served."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from markindex_core.serve.mcp_server import http_security
from tests.mcp.helpers import INITIALIZE_REQUEST, server_command, wait_until_listening

INITIALIZE = json.dumps(INITIALIZE_REQUEST).encode()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(root: Path, db: Path, host: str, *extra: str) -> Iterator[int]:
    port = _free_port(host)
    command, args = server_command(
        root, db, "--transport", "streamable-http", "--host", host, "--port", str(port), *extra
    )
    proc = subprocess.Popen([command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_listening(proc, host, port)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def post(host: str, port: int, headers: dict[str, str]) -> int:
    """Send `initialize` with these headers (Host included); return the HTTP status."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
        base = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Content-Length": str(len(INITIALIZE)),
        }
        for name, value in {**base, **headers}.items():
            conn.putheader(name, value)
        conn.endheaders(INITIALIZE)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("host", ["127.0.0.2", "127.0.0.1"])
def test_foreign_host_and_origin_are_refused_on_any_bind_address(
    sample_library: Path, tmp_path: Path, host: str
) -> None:
    with http_server(sample_library, tmp_path / "index.db", host) as port:
        own = f"{host}:{port}"
        assert post(host, port, {"Host": own}) == 200
        assert post(host, port, {"Host": own, "Origin": f"http://{own}"}) == 200
        assert 400 <= post(host, port, {"Host": f"evil.example:{port}"}) < 500
        assert 400 <= post(host, port, {"Host": "evil.example"}) < 500
        assert 400 <= post(host, port, {"Host": own, "Origin": "http://evil.example"}) < 500
        if host != "127.0.0.1":  # loopback names are accepted on any port, as the SDK does
            assert 400 <= post(host, port, {"Host": f"{host}:{port + 1}"}) < 500


def test_allowed_host_and_origin_for_a_proxy(sample_library: Path, tmp_path: Path) -> None:
    host = "127.0.0.2"
    extra = ["--allowed-host", "mcp.example.org", "--allowed-origin", "https://mcp.example.org"]
    with http_server(sample_library, tmp_path / "index.db", host, *extra) as port:
        proxied = {"Host": "mcp.example.org", "Origin": "https://mcp.example.org"}
        assert post(host, port, proxied) == 200
        assert post(host, port, {"Host": f"{host}:{port}"}) == 200
        assert 400 <= post(host, port, {"Host": "other.example.org"}) < 500
        bad_origin = {"Host": "mcp.example.org", "Origin": "https://other.example.org"}
        assert 400 <= post(host, port, bad_origin) < 500


def test_security_settings_for_wildcard_and_ipv6_binds() -> None:
    wildcard = http_security("0.0.0.0", 9000)
    assert wildcard.enable_dns_rebinding_protection
    assert "0.0.0.0:9000" not in wildcard.allowed_hosts
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*"} <= set(wildcard.allowed_hosts)
    v6 = http_security("fd00::5", 9000, allowed_origins=["https://x.example"])
    assert v6.allowed_hosts == ["[fd00::5]:9000"]
    assert v6.allowed_origins == ["http://[fd00::5]:9000", "https://x.example"]
    assert http_security("10.0.0.5", 80).allowed_hosts == ["10.0.0.5:80", "10.0.0.5"]


def test_allowed_host_with_stdio_is_refused(sample_library: Path, tmp_path: Path) -> None:
    command, args = server_command(
        sample_library, tmp_path / "index.db", "--allowed-host", "mcp.example.org"
    )
    done = subprocess.run(
        [command, *args], capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2  # a usage error, as the README's exit statuses say
    assert b"--transport streamable-http" in done.stderr


def test_a_port_in_use_or_out_of_range_is_a_clear_error(
    sample_library: Path, tmp_path: Path
) -> None:
    """Not "serving MCP at …" followed by a traceback from the HTTP server's exit."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for extra, code, said in (
            (["--port", port], 1, "cannot listen on 127.0.0.1:"),
            (["--port", "99999"], 2, "99999 is out of range (1-65535)"),
        ):
            command, args = server_command(
                sample_library, tmp_path / "index.db", "--transport", "streamable-http", *extra
            )
            done = subprocess.run([command, *args], capture_output=True, text=True, timeout=60)
            assert done.returncode == code and said in done.stderr, done.stderr
            assert "Traceback" not in done.stderr and "serving MCP" not in done.stderr


def test_every_log_line_is_json_and_a_public_bind_is_warned_about(
    sample_library: Path, tmp_path: Path
) -> None:
    """`--host 0.0.0.0` served an unauthenticated library to the whole network without a word,
    and uvicorn's own records ('Invalid HTTP request received.', 'ASGI callable returned without
    completing response.' on stop) kept uvicorn's format, so `--json` logs were not JSON lines.
    A bind beyond loopback is now warned about, and uvicorn logs through markindex's handler."""
    port = _free_port("0.0.0.0")
    command, args = server_command(
        sample_library,
        tmp_path / "index.db",
        "--transport",
        "streamable-http",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--json",
    )
    proc = subprocess.Popen([command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as bad:
                    bad.sendall(b"NOT HTTP AT ALL\r\n\r\n")  # uvicorn logs a warning for it
                    bad.recv(1024)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "server did not start listening"
                time.sleep(0.05)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    records = [json.loads(line) for line in err.decode().splitlines()]  # each line is JSON
    warned = [r["message"] for r in records if r["level"] == "warning"]
    assert any("0.0.0.0" in m and "no authentication" in m for m in warned), records
    assert any(r["logger"].startswith("uvicorn") for r in records), records


async def test_sigterm_with_a_client_connected_stops_without_an_error_line(
    sample_library: Path, tmp_path: Path
) -> None:
    """A stop (SIGTERM) while a client held its event stream open logged
    'uvicorn.error ERROR: ASGI callable returned without completing response.' on every
    deploy: an error where nothing failed, since cutting that stream is what a stop does. The
    stop stays quick and its log says nothing at ERROR."""
    import signal

    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port("127.0.0.1")
    command, args = server_command(
        sample_library, tmp_path / "index.db", "--transport", "streamable-http", "--port", str(port)
    )
    proc = subprocess.Popen([command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(wait_until_listening, proc, "127.0.0.1", port)
            url = f"http://127.0.0.1:{port}/mcp"
            async with streamable_http_client(url) as streams, ClientSession(*streams[:2]) as s:
                await s.initialize()
                assert (await s.list_tools()).tools
                await anyio.sleep(0.5)  # connected and idle (GET opens no event stream)
                proc.send_signal(signal.SIGTERM)
                started = time.monotonic()
                while proc.poll() is None:
                    await anyio.sleep(0.05)
                assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert b"ERROR" not in err and b"Traceback" not in err, err.decode()
