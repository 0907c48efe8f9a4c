"""One writer at a time (the second fails fast); readers read consistent snapshots during a write."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from markindex_core.errors import WriterBusy
from markindex_core.library import Library
from markindex_core.store.db import Store
from markindex_core.store.lock import WriterLock, writer_lock_state

from .helpers import REPO_ROOT, check_documents_whole, make_library, write


def test_second_writer_fails_fast_with_one_clear_line(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib", 3)
    db = tmp_path / "index.db"
    holder = WriterLock(db)
    assert holder.try_acquire()
    try:
        with pytest.raises(WriterBusy, match="another markindex process"):
            Library(root, db).index()
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert time.perf_counter() - t0 < 10  # fails fast, never waits for the lock
    finally:
        holder.release()
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: another markindex process") and "pid" in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert Library(root, db).index().added  # once the lock is free, indexing works


def test_lock_is_exclusive_within_one_process_too(tmp_path: Path) -> None:
    a, b = WriterLock(tmp_path / "x.db"), WriterLock(tmp_path / "x.db")
    assert a.try_acquire() and not b.try_acquire() and b.is_locked_by_other()
    a.release()
    assert not b.is_locked_by_other() and b.try_acquire()
    b.release()


def test_status_probes_never_block_a_writer(tmp_path: Path) -> None:
    """`markindex status`, the daemon and the terminal app probe the lock all the time; a probe
    must never make a real writer fail with WriterBusy, nor rewrite the lock file."""
    db = tmp_path / "x.db"
    stop = threading.Event()
    probes = 0

    def probe() -> None:
        nonlocal probes
        while not stop.is_set():
            writer_lock_state(db)
            WriterLock(db).is_locked_by_other()
            probes += 1

    first = WriterLock(db)
    assert first.try_acquire()
    first.release()
    threads = [threading.Thread(target=probe) for _ in range(2)]
    for t in threads:
        t.start()
    failures = 0
    try:
        for _ in range(300):
            writer = WriterLock(db)
            if not writer.try_acquire():
                failures += 1
                continue
            before = writer.path.read_bytes()
            assert writer_lock_state(db) == (True, os.getpid())
            assert writer.path.read_bytes() == before  # probes only read the lock file
            writer.release()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    assert probes > 100
    assert failures == 0
    assert writer_lock_state(db) == (False, None)


def test_reader_sees_consistent_snapshots_during_a_big_write(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    write(root, "seed.md", "# Seed\n\nfirst document\n")
    db = tmp_path / "index.db"
    Library(root, db).index()
    make_library(root / "bulk", 120)  # several batches of whole documents
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def reader() -> None:
        store = Store(db, readonly=True)
        try:
            while not done.is_set():
                store.conn.execute("BEGIN")  # one snapshot for the whole check
                try:
                    seen.append(check_documents_whole(store))
                finally:
                    store.conn.execute("COMMIT")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            store.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--json"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        done.set()
        thread.join(30)
    assert proc.returncode == 0, proc.stderr
    assert not errors, errors[0]
    assert seen and seen[0] >= 1 and len(seen) > 5
    assert seen == sorted(seen)  # documents only ever appear, whole
    assert len(set(seen)) >= 3 and Store(db, readonly=True).count_documents() == 121
