"""`markindex daemon ROOT` serves MCP over stdio while it indexes, in one process."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from markindex_core.library import Library
from markindex_core.serve.status import read_status_file
from tests.core.helpers import two_libraries

from .helpers import wait_for
from .workload import Workload


def _payload(result: object) -> dict[str, Any]:
    text = result.content[0].text  # type: ignore[attr-defined]
    return json.loads(text)  # type: ignore[no-any-return]


async def _search_until(
    client: Client, query: str, done: Callable[[dict[str, Any]], bool], timeout: float
) -> dict[str, Any]:
    """`search_documents` over MCP until `done(envelope)`; past `timeout` seconds the test fails
    showing the last envelope."""
    deadline = time.monotonic() + timeout
    while not done(env := _payload(await client.call_tool("search_documents", {"query": query}))):
        assert time.monotonic() < deadline, env
        await anyio.sleep(0.1)
    return env


def _warns(words: str) -> Callable[[dict[str, Any]], bool]:
    return lambda env: words in env.get("warning", "")


@pytest.mark.timeout(90)
async def test_tool_calls_answer_while_the_daemon_indexes(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    work = Workload(root, seed=5)
    work.setup()
    db = tmp_path / "idx" / "index.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "markindex_core", "daemon", str(root), "--db", str(db)],
    )
    latencies: list[float] = []
    errors: list[str] = []
    async with Client(params, read_timeout_seconds=30) as client:
        # `initialize` answered at once; the first reconcile runs in the background.
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: (read_status_file(db) or {}).get("reconciles"), 30)
        )
        done = threading.Event()

        def churn() -> None:
            try:
                work.run(300, checkouts_every=100)
            finally:
                done.set()

        worker = threading.Thread(target=churn, daemon=True)
        worker.start()
        while not done.is_set():
            t0 = time.perf_counter()
            result = await client.call_tool("search_documents", {"query": "alpha river"})
            latencies.append(time.perf_counter() - t0)
            if result.is_error:
                errors.append(result.content[0].text[:300])  # type: ignore[union-attr]
            elif "warning" in _payload(result):  # keeping up with churn is not being stale
                errors.append(_payload(result)["warning"])
        worker.join()
        marker = root / "notes" / "fresh-after-churn.md"
        marker.write_text("# Zymurgy\n\nThe zymurgy handbook.\n", encoding="utf-8")

        async def found() -> bool:
            r = await client.call_tool("search_documents", {"query": "zymurgy"})
            return "fresh-after-churn.md" in json.dumps(_payload(r), ensure_ascii=False)

        deadline = time.monotonic() + 10
        while not await found():
            assert time.monotonic() < deadline, "new file never became searchable over MCP"
            await anyio.sleep(0.05)
        # Nothing left to do, as published after this point (the churn's last events may still
        # ask for a pass): a stop with work pending would rightly say so.
        now = time.time()

        def idle() -> bool:
            s = read_status_file(db) or {}
            return s.get("heartbeat_at", 0) > now and not s["busy"] and s["queue"] == 0

        await anyio.to_thread.run_sync(lambda: wait_for(idle, 30))
    # Closing stdin stops the daemon cleanly: it says so in its status and frees the lock.
    st = await anyio.to_thread.run_sync(
        lambda: wait_for(lambda: (s := read_status_file(db)) and s["state"] == "stopped" and s, 10)
    )
    assert st and st["writing"] is False
    assert not errors, errors[:3]
    latencies.sort()
    p50, p95 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.95)]
    print(
        f"{len(latencies)} MCP searches during churn: p50 {p50 * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
    )
    assert len(latencies) > 20
    assert p95 < 0.5, latencies[-10:]


@pytest.mark.timeout(60)
async def test_mcp_watch_keeps_the_index_live(tmp_path: Path) -> None:
    """`markindex mcp ROOT --watch` is the daemon under the name agents' configs use."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nriver stones\n", encoding="utf-8")
    db = tmp_path / "idx" / "index.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "markindex_core", "mcp", str(root), "--db", str(db), "--watch"],
    )
    async with Client(params, read_timeout_seconds=30) as client:
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: (read_status_file(db) or {}).get("reconciles"), 30)
        )
        (root / "b.md").write_text("# Beta\n\nquartzite glacier\n", encoding="utf-8")
        deadline = time.monotonic() + 20
        found = False
        while time.monotonic() < deadline and not found:
            result = await client.call_tool("search_documents", {"query": "quartzite"})
            data = _payload(result).get("data") or {}
            found = any(h.get("doc_path") == "b.md" for h in data.get("results", []))
            if not found:
                await anyio.sleep(0.1)
        assert found


def _chattr(path: Path, flag: str) -> bool:
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.mark.timeout(90)
async def test_tool_envelopes_warn_while_the_live_index_cannot_write(tmp_path: Path) -> None:
    """An agent must not read a stale index unwarned: while the daemon cannot write (here an
    immutable index file, which even root cannot write), every envelope says so and since when;
    once it writes again, the warning is gone."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nriver stones\n", encoding="utf-8")
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()
    (root / "b.md").write_text("# Beta\n\nquartzite glacier\n", encoding="utf-8")
    if not _chattr(db, "+i"):
        pytest.skip("chattr +i is not available here")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "markindex_core", "daemon", str(root), "--db", str(db)],
    )
    try:
        async with Client(params, read_timeout_seconds=30) as client:
            warned = await _search_until(client, "river", _warns("not updating"), 20)
            assert warned["success"] and "read-only" in warned["warning"]
            assert "answers may miss changes" in warned["warning"]
            bad = _payload(await client.call_tool("get_document", {"doc_path": "nope.md"}))
            assert not bad["success"] and "not updating" in bad["warning"]

            _chattr(db, "-i")
            fresh = await _search_until(
                client, "quartzite", lambda e: "warning" not in e and e["data"]["results"], 30
            )
            assert fresh["data"]["results"][0]["doc_path"] == "b.md"
    finally:
        _chattr(db, "-i")


@pytest.mark.timeout(90)
async def test_a_plain_mcp_server_warns_while_another_process_daemon_cannot_write(
    tmp_path: Path,
) -> None:
    """`markindex mcp` (no --watch) beside a daemon in another process that keeps the index:
    the daemon's trouble reaches this server's envelopes too, naming the daemon."""
    from .helpers import DaemonProcess

    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nriver stones\n", encoding="utf-8")
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()
    if not _chattr(db, "+i"):
        pytest.skip("chattr +i is not available here")
    daemon = DaemonProcess(root, db)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "markindex_core", "mcp", str(root), "--db", str(db)],
    )
    try:
        async with Client(params, read_timeout_seconds=30) as client:
            warned = await _search_until(client, "river", _warns("not updating"), 20)
            assert warned["success"] and f"daemon pid {daemon.proc.pid}" in warned["warning"]

            _chattr(db, "-i")
            await _search_until(client, "river", lambda e: "warning" not in e, 30)
    finally:
        _chattr(db, "-i")
        assert daemon.stop() == 0, daemon.log


@pytest.mark.timeout(90)
async def test_a_daemon_waiting_for_the_lock_passes_on_the_writing_daemons_trouble(
    tmp_path: Path,
) -> None:
    """Two daemons of one index: the second serves reads while the first writes. When the
    writer freezes (SIGSTOP: it keeps the lock, nothing updates the index), the second one's
    envelopes must say so; they said nothing, as the second daemon judged only its own state."""
    import os
    import signal

    from .helpers import DaemonProcess

    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nriver stones\n", encoding="utf-8")
    db = tmp_path / "idx" / "index.db"
    writer = DaemonProcess(root, db)
    writer.wait_writing()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "markindex_core", "daemon", str(root), "--db", str(db)],
    )
    try:
        async with Client(params, read_timeout_seconds=30) as client:
            calm = await _search_until(client, "river", lambda e: True, 0)
            assert "warning" not in calm and calm["success"], calm
            os.kill(writer.proc.pid, signal.SIGSTOP)
            try:
                warned = await _search_until(client, "river", _warns("not updating"), 30)
                assert warned["success"] and f"daemon pid {writer.proc.pid}" in warned["warning"]
            finally:
                os.kill(writer.proc.pid, signal.SIGCONT)
            await _search_until(client, "river", lambda e: "warning" not in e, 30)
    finally:
        assert writer.stop() == 0, writer.log


@pytest.mark.timeout(120)
async def test_damage_a_tool_call_meets_is_rebuilt_by_the_daemon(tmp_path: Path) -> None:
    """Damage only reads meet (the original lines) used to stay until the daemon's daily check:
    tools answered INTERNAL_ERROR, status said all was well. A tool call that meets it now says
    INDEX_UNUSABLE and has the daemon build the index again."""
    from tests.core.helpers import damage_pages

    root = tmp_path / "lib"
    root.mkdir()
    for i in range(30):
        (root / f"d{i}.md").write_text(f"# D{i}\n\nword{i} " + "filler " * 400, encoding="utf-8")
    db = tmp_path / "idx" / "index.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "markindex_core", "daemon", str(root), "--db", str(db)],
    )
    async with Client(params, read_timeout_seconds=30) as client:
        # After the check the daemon makes once writes pause: from then on, only reads look.
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: (read_status_file(db) or {}).get("last_check_ok"), 60)
        )
        assert damage_pages(db, "line_blocks", share=1.0) > 0
        env = _payload(await client.call_tool("get_document", {"doc_path": "d7.md"}))
        node = env["data"]["top_level_nodes"][0]["node_id"]
        read = {"doc_path": "d7.md", "node_ids": [node]}
        env = _payload(await client.call_tool("get_node_content", read))
        assert env["code"] == "INDEX_UNUSABLE" and "damaged" in env["error"], env
        deadline = time.monotonic() + 60
        while not (env := _payload(await client.call_tool("get_node_content", read)))["success"]:
            assert time.monotonic() < deadline, env
            await anyio.sleep(0.2)
        assert "word7" in json.dumps(env["data"], ensure_ascii=False)
    errors = (read_status_file(db) or {}).get("errors", [])
    assert any("is damaged" in e["error"] for e in errors), errors


@pytest.mark.timeout(90)
async def test_the_daemons_own_envelopes_say_a_folder_cannot_be_read(shared_tmp: Path) -> None:
    """A folder the daemon cannot read keeps what the index held there, and changes there are
    missed: `status` and a plain `mcp` said so, but the daemon's own envelopes did not (its
    warning looked at a few status keys only, not at the unreadable paths). Run as `nobody`
    (root reads everything)."""
    import os

    from tests.unprivileged import AS_NOBODY, CHILD_ENV

    root = shared_tmp / "lib"
    (root / "locked").mkdir(parents=True)
    (root / "a.md").write_text("# Alpha\n\nriver stones\n", encoding="utf-8")
    (root / "locked" / "x.md").write_text("# X\n\nxerus\n", encoding="utf-8")
    os.chmod(root / "locked", 0)
    db = shared_tmp / "idx" / "index.db"
    db.parent.mkdir()
    os.chmod(db.parent, 0o777)
    daemon = [sys.executable, "-m", "markindex_core", "daemon", str(root), "--db", str(db)]
    params = StdioServerParameters(
        command=AS_NOBODY[0], args=[*AS_NOBODY[1:], *daemon], env=CHILD_ENV
    )
    try:
        async with Client(params, read_timeout_seconds=30) as client:
            warned = await _search_until(client, "river", _warns("cannot be read (locked)"), 30)
            assert warned["success"] and warned["data"]["results"], warned
            os.chmod(root / "locked", 0o755)
            await _search_until(client, "xerus", lambda e: bool(e["data"]["results"]), 30)
            calm = await _search_until(client, "river", lambda e: "warning" not in e, 30)
            assert calm["success"], calm
    finally:
        os.chmod(root / "locked", 0o755)


def test_watch_over_http_is_refused_not_served_over_stdio(tmp_path: Path) -> None:
    """`mcp --watch --transport streamable-http` served the live index over stdio instead:
    nothing listened on the port, and with no client on stdin it stopped at once. The live
    index serves stdio only: the combination is refused, naming what to run instead."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n", encoding="utf-8")
    args = ["mcp", str(root), "--db", str(tmp_path / "idx" / "index.db"), "--watch"]
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", *args, "--transport", "streamable-http"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr  # a usage error
    assert "--watch" in done.stderr and "markindex daemon" in done.stderr, done.stderr
    assert "stdin" not in done.stderr, done.stderr


def test_watch_refuses_the_index_of_another_library(tmp_path: Path) -> None:
    """`mcp B --db a.db --watch`, a.db being library A's index: the live index reconciled B into
    it, removing every document of A without a word (`daemon B --db a.db` and `index` refuse
    it). It is refused the same way now, and A's index is left whole."""
    from markindex_core.store.db import Store

    _, b, db = two_libraries(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "markindex_core", "mcp", str(b), "--db", str(db), "--watch"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "is the index of the library" in done.stderr, done.stderr
    store = Store(db, readonly=True)
    try:
        assert store.document_paths() == ["a.md"]
    finally:
        store.close()
