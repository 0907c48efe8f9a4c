"""Readers follow the index file: a replaced or removed index is reopened (or reported missing) on
every thread, `close` closes every thread's connection, and a full rebuild is invisible to readers
until the new index is whole (real SQLite files, real `markindex index` processes)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from markindex_core.library import Library
from markindex_core.store.files import rebuild_path, side_files

from .helpers import REPO_ROOT, check_store_consistent, make_library, write


def index_cmd(root: Path, db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), *extra]


def run_index(root: Path, db: Path, *extra: str) -> dict[str, object]:
    proc = subprocess.run(
        [*index_cmd(root, db, *extra), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, object] = json.loads(proc.stdout)
    return report


def open_fds(path: Path, *, deleted_only: bool = False) -> int:
    """Descriptors of this process open on `path` (also once it was deleted)."""
    names = {f"{path} (deleted)"} if deleted_only else {str(path), f"{path} (deleted)"}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") in names:
                count += 1
        except OSError:
            continue
    return count


def wait_for(cond: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return bool(cond())  # type: ignore[operator]


def big_library(root: Path, n: int = 600) -> Path:
    """Enough documents that a rebuild takes a noticeable while; every one says `zebrafinch`.
    Each has a setext heading, so `--no-setext` really changes the stored trees."""
    for i in range(n):
        body = "\n\n".join(
            f"## Part {j}\n\nzebrafinch paragraph {j} of note {i}. " + "filler words " * 40
            for j in range(4)
        )
        write(root, f"f{i % 10}/note{i:04d}.md", f"Note {i}\n======\n\n{body}\n")
    return root


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_replaced_index_is_reopened_and_removed_index_is_missing(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    lib = Library(root)
    lib.index()
    assert lib.store.count_documents() == 12
    assert lib.document("doc3.md") is not None
    shutil.rmtree(root / ".markindex")
    env = json.loads(lib.call_tool("browse_documents", {}))
    assert env["code"] == "INDEX_MISSING", env
    assert open_fds(lib.db_path) == 0, "the deleted file must not stay open"
    (root / "doc3.md").unlink()
    write(root, "brandnew.md", "# Brand new\n\nquetzalcoatl lives here.\n")
    run_index(root, lib.db_path)
    assert lib.store.count_documents() == 12
    assert lib.document("doc3.md") is None
    assert lib.search("quetzalcoatl").hits[0].doc_path == "brandnew.md"
    # `rm -rf .markindex && markindex index` while the reader stays open on the old file.
    before = lib.store
    shutil.rmtree(root / ".markindex")
    write(root, "later.md", "# Later\n\nxylophone.\n")
    run_index(root, lib.db_path)
    assert lib.search("xylophone").hits[0].doc_path == "later.md"
    assert lib.store is not before
    # The deleted file is let go: by the store at once, by the old searcher's helper as it ends.
    assert wait_for(lambda: open_fds(lib.db_path, deleted_only=True) == 0)
    assert open_fds(lib.db_path) == 2  # the new file: the store and its searcher's helper
    lib.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_every_thread_reopens_and_close_closes_every_thread(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    lib = Library(root, tmp_path / "db" / "index.db")
    lib.index()
    threads = 4
    barrier = threading.Barrier(threads)

    def count_docs(_: int) -> int:
        barrier.wait(timeout=10)  # each task on its own thread
        n = lib.store.count_documents()
        barrier.wait(timeout=10)
        return n

    with ThreadPoolExecutor(threads) as pool:
        assert list(pool.map(count_docs, range(threads))) == [12] * threads
        assert lib.open_connections() == threads
        write(root, "extra.md", "# Extra\n\nmore.\n")
        shutil.rmtree(lib.db_path.parent)
        run_index(root, lib.db_path)
        assert list(pool.map(count_docs, range(threads))) == [13] * threads
        assert lib.open_connections() == threads
        assert open_fds(lib.db_path) == threads  # the old file's descriptors are all gone
        lib.close()  # from the main thread, while the pool's threads are alive
        assert lib.open_connections() == 0
        assert open_fds(lib.db_path) == 0
        assert list(pool.map(count_docs, range(threads))) == [13] * threads  # reads reopen
    lib.close()
    assert open_fds(lib.db_path) == 0


def test_full_rebuild_keeps_the_old_index_visible_until_the_new_one_is_whole(
    tmp_path: Path,
) -> None:
    root = big_library(tmp_path / "lib", n=300)
    db = tmp_path / "db" / "index.db"
    writer = Library(root, db)
    writer.index()
    reader = Library(root, db)
    assert reader.store.count_documents() == 300
    seen: list[tuple[int, int, str | None]] = []

    def progress(done: int, total: int, path: str) -> None:
        if done % 25 == 0:  # a reader looks while the rebuild is under way
            hits = len(reader.search("zebrafinch", limit=5).hits)
            seen.append((reader.store.count_documents(), hits, reader.store.get_meta("setext")))

    report = writer.index(setext=False, progress=progress, workers=1)
    assert report.full_rebuild and "setext" in report.full_rebuild
    assert len(report.updated) == 300 and not report.added
    assert seen and all(s == (300, 5, "1") for s in seen), seen  # the old index, whole
    assert reader.store.get_meta("setext") == "0"  # then the new one
    assert reader.store.count_documents() == 300
    assert not rebuild_path(db).exists()
    assert not any(p.exists() for p in side_files(rebuild_path(db)))
    assert check_store_consistent(db) == 300
    again = writer.index(setext=False)
    assert not again.changed and again.full_rebuild is None
    reader.close()
    writer.close()


def test_killed_rebuild_leaves_the_old_index_and_the_next_run_redoes_it(tmp_path: Path) -> None:
    root = big_library(tmp_path / "lib")
    db = tmp_path / "db" / "index.db"
    run_index(root, db)
    reader = Library(root, db)
    assert reader.store.get_meta("setext") == "1"
    proc = subprocess.Popen(
        [*index_cmd(root, db, "--no-setext"), "--json"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_for(lambda: rebuild_path(db).exists() and proc.poll() is None, 60)
        assert wait_for(lambda: reader.store.count_documents() == 600, 5)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the rebuild finished before it could be killed"
    assert rebuild_path(db).exists()
    assert check_store_consistent(db) == 600
    assert reader.store.get_meta("setext") == "1"  # the old index, untouched
    report = run_index(root, db, "--no-setext")
    assert report["full_rebuild"] and len(report["updated"]) == 600  # type: ignore[arg-type]
    assert not rebuild_path(db).exists()
    assert reader.store.get_meta("setext") == "0"
    assert check_store_consistent(db) == 600
    reader.close()


def test_stale_rebuild_file_does_not_disturb_an_incremental_run(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib")
    lib = Library(root, tmp_path / "db" / "index.db")
    lib.index()
    rebuild_path(lib.db_path).write_bytes(b"left by a crash")
    write(root, "doc3.md", "# Changed\n\nnew words.\n")
    assert lib.index().updated == ["doc3.md"]
    assert lib.index(setext=False).full_rebuild  # a rebuild replaces the stale file first
    assert not rebuild_path(lib.db_path).exists()
    assert check_store_consistent(lib.db_path) == 12
    lib.close()
