"""The real MCP server over stdio while its index is deleted, replaced, rebuilt or not yet built, and
when its user may not read the index: every answer says what is true at that moment."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from markindex_core.library import Library
from tests.mcp.helpers import envelope, server_command
from tests.paths import REPO
from tests.unprivileged import AS_NOBODY, CHILD_ENV


def client_for(root: Path, db: Path, *extra: str, prefix: list[str] | None = None) -> Client:
    command, args = server_command(root, db, *extra)
    if prefix:
        command, args = prefix[0], [*prefix[1:], command, *args]
    params = StdioServerParameters(command=command, args=args, env=CHILD_ENV, cwd=str(REPO))
    return Client(params, read_timeout_seconds=60)


async def call(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    env = envelope(result.content[0].text)  # type: ignore[union-attr]
    assert env["success"] is (not result.is_error)
    return env


def index(root: Path, db: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), *extra],
        cwd=REPO,
        env=CHILD_ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def index_now(root: Path, db: Path, *extra: str) -> None:
    proc = index(root, db, *extra)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def test_server_follows_a_removed_and_a_replaced_index(indexed_sample: Library) -> None:
    root, db = indexed_sample.root, indexed_sample.db_path
    with anyio.fail_after(120):
        async with client_for(root, db) as client:
            env = await call(client, "browse_documents", {})
            assert env["success"] and env["data"]["documents_below"] == 4
            shutil.rmtree(db.parent)
            env = await call(client, "browse_documents", {})
            assert env["code"] == "INDEX_MISSING", env
            write(root, "fresh/new.md", "# New\n\nquetzalcoatl was added after the delete.\n")
            index_now(root, db)
            env = await call(client, "search_documents", {"query": "quetzalcoatl"})
            assert env["success"] and env["data"]["results"][0]["doc_path"] == "fresh/new.md"
            # Replaced under a live server: `rm -rf .markindex && markindex index`.
            shutil.rmtree(db.parent)
            (root / "fresh" / "new.md").unlink()
            write(root, "other.md", "# Other\n\nxylophonist.\n")
            index_now(root, db)
            env = await call(client, "search_documents", {"query": "quetzalcoatl"})
            assert env["success"] and env["data"]["results"] == [], env
            env = await call(client, "search_documents", {"query": "xylophonist"})
            assert env["data"]["results"][0]["doc_path"] == "other.md"
            env = await call(client, "browse_documents", {})
            assert env["data"]["documents_below"] == 5


async def test_a_full_rebuild_never_shows_a_searching_client_an_empty_index(
    tmp_path: Path,
) -> None:
    root = tmp_path / "lib"
    for i in range(500):
        body = f"zebrafinch paragraph of note {i}. " + "filler words " * 60
        write(root, f"f{i % 10}/note{i:04d}.md", f"Note {i}\n======\n\n{body}\n")
    db = tmp_path / "db" / "index.db"
    index_now(root, db)
    counts: list[int] = []
    with anyio.fail_after(240):
        async with client_for(root, db) as client:
            query = {"query": "zebrafinch", "limit": 5}
            proc = index(root, db, "--no-setext")
            try:
                while proc.poll() is None:
                    env = await call(client, "search_documents", query)
                    assert env["success"], env
                    counts.append(len(env["data"]["results"]))
            finally:
                _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert len(counts) >= 5, counts
            assert counts == [5] * len(counts), counts
            # After the swap the server answers from the new index (no setext headings).
            doc = {"doc_path": "f0/note0000.md"}
            env = await call(client, "get_document_structure", doc)
            titles = [n["title"] for n in env["data"]["nodes"]]
            assert "Note 0" not in titles, titles


async def test_reindex_on_start_says_building_from_the_first_call(
    sample_library: Path, tmp_path: Path
) -> None:
    db = tmp_path / "fresh" / "index.db"
    codes: list[str] = []
    with anyio.fail_after(120):
        async with client_for(sample_library, db, "--reindex-on-start") as client:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                env = await call(client, "browse_documents", {})
                if env["success"] and env["data"]["documents_below"] == 4:
                    break  # (a first build commits as it goes: part of it may show first)
                if not env["success"]:
                    codes.append(env["code"])
                await anyio.sleep(0.02)
            assert env["success"] and env["data"]["documents_below"] == 4
    assert set(codes) <= {"INDEX_BUILDING"}, codes  # never INDEX_MISSING


async def test_a_failed_reindex_on_start_is_in_every_envelope(
    sample_library: Path, tmp_path: Path
) -> None:
    """The re-index at start cannot write (an immutable index file): answers come from the
    index as it was, and each envelope says so, instead of passing for current."""
    db = tmp_path / "idx" / "index.db"
    Library(sample_library, db).index()
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        with anyio.fail_after(120):
            async with client_for(sample_library, db, "--reindex-on-start") as client:
                t0 = time.monotonic()
                while True:
                    env = await call(client, "browse_documents", {})
                    if "failed" in env.get("warning", "") or time.monotonic() - t0 > 60:
                        break
                    await anyio.sleep(0.05)
        assert env["success"] and env["data"]["documents_below"] == 4, env
        assert "the re-index at start failed" in env["warning"], env
    finally:
        subprocess.run(["chattr", "-i", str(db)], capture_output=True)


async def test_a_finished_reindex_on_start_leaves_no_warning(
    sample_library: Path, tmp_path: Path
) -> None:
    db = tmp_path / "idx" / "index.db"
    Library(sample_library, db).index()
    with anyio.fail_after(120):
        async with client_for(sample_library, db, "--reindex-on-start") as client:
            t0 = time.monotonic()
            seen: list[str] = []
            while time.monotonic() - t0 < 60:
                env = await call(client, "browse_documents", {})
                if "warning" not in env:
                    break
                seen.append(env["warning"])
                await anyio.sleep(0.02)
            assert env["success"] and "warning" not in env, env
    assert all("being brought up to date" in w for w in seen), seen


def test_a_scheduled_build_is_reported_as_building(sample_library: Path, tmp_path: Path) -> None:
    lib = Library(sample_library, tmp_path / "fresh" / "index.db")
    assert envelope(lib.call_tool("browse_documents", {}))["code"] == "INDEX_MISSING"
    lib.expect_build()  # what `mcp --reindex-on-start` does before it starts serving
    env = envelope(lib.call_tool("browse_documents", {}))
    assert env["code"] == "INDEX_BUILDING" and "being built" in env["error"], env
    lib.index()
    assert envelope(lib.call_tool("browse_documents", {}))["data"]["documents_below"] == 4
    lib.close()


async def test_a_user_who_may_not_read_the_index_is_told_so(shared_tmp: Path) -> None:
    root = shared_tmp / "lib"
    write(root, "a.md", "# A\n\nalpha.\n")
    lib = Library(root)
    lib.index()  # as root
    lib.db_path.chmod(0o600)
    with anyio.fail_after(120):
        async with client_for(root, lib.db_path, prefix=AS_NOBODY) as client:
            env = await call(client, "browse_documents", {})
    assert env["code"] == "PERMISSION_DENIED", env
    assert f"permission denied reading the index {lib.db_path}" in env["error"], env
    assert "owned by root" in env["error"] and "--db" in env["next_steps"]["message"], env
    assert "must run `markindex index" not in env["next_steps"]["message"], env
