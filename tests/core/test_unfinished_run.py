"""An index run that stops before its end is said, until a run of the whole library ends.

Such an index opens and what it holds is whole, but it may lack documents the run had still to
add, and nothing else tells a user that: its document count looks like a finished index's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from markindex_core.cli.main import main
from markindex_core.errors import WriterBusy
from markindex_core.index.indexer import Indexer, open_for_writing
from markindex_core.library import Library
from markindex_core.store.db import Store
from markindex_core.store.lock import WriterLock
from markindex_core.store.runs import UNFINISHED_RUN
from markindex_core.tools.contract import call_tool_result

from .helpers import REPO_ROOT, make_library, write


class Stop(Exception):
    """What Ctrl-C or a terminal app that quits does to a run: it ends at the next file."""


def stop_after(n: int):  # type: ignore[no-untyped-def]
    def progress(done: int, total: int, path: str) -> None:
        if done >= n:
            raise Stop

    return progress


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def interrupted_library(tmp_path: Path) -> tuple[Path, Path]:
    """A library of 120 documents whose index has 20 of them, and a run to add the 100 others
    that was stopped at its tenth file. (A first run stopped by an exception deletes the index it
    began; one killed leaves it, marked the same way.)"""
    root = make_library(tmp_path / "lib", 20)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    for i in range(100):
        write(root, f"more/m{i}.md", f"# More {i}\n\nA document added later, number {i}.\n")
    with pytest.raises(Stop):
        Library(root, db).index(progress=stop_after(10), workers=0)
    return root, db


def test_a_run_stopped_midway_is_said_until_a_whole_run_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, db = interrupted_library(tmp_path)

    code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
    status = json.loads(out)
    assert code == 2  # a health check learns that the index does not match the folder
    assert 20 <= status["documents"] < 120
    assert status["unfinished_run"]["files"] == 100 and status["unfinished_run"]["at"] > 0
    code, out, _ = run(capsys, "status", str(root), "--db", str(db))
    shown = " ".join(out.split())  # as wrapped to the terminal's width
    assert code == 2 and "stopped before its end" in shown and "run `markindex index`" in shown

    code, out, _ = run(capsys, "search", str(root), "document", "--db", str(db), "--json")
    assert code == 0 and "stopped before its end" in json.loads(out)["warning"]
    lib = Library(root, db)
    text, ok = call_tool_result(lib, "search_documents", {"query": "document"})
    assert ok and "stopped before its end" in json.loads(text)["warning"]

    assert run(capsys, "index", str(root), "--db", str(db), "--json")[0] == 0
    code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["unfinished_run"] is None
    assert json.loads(out)["documents"] == 120
    code, out, _ = run(capsys, "search", str(root), "document", "--db", str(db), "--json")
    assert "warning" not in json.loads(out)
    text, ok = call_tool_result(lib, "search_documents", {"query": "document"})
    assert ok and "warning" not in json.loads(text)
    lib.close()


def test_a_run_of_a_few_paths_neither_marks_nor_clears(tmp_path: Path) -> None:
    root, db = interrupted_library(tmp_path)
    write(root, "doc0.md", "# Changed\n\nNew text.\n")

    def run_paths(paths: list[str], progress: Any = None) -> None:
        store, lock = open_for_writing(db)
        try:
            Indexer(root, store).run(progress, paths=paths)  # the daemon's path for changed files
        finally:
            store.close()
            lock.release()

    run_paths(["doc0.md"])  # does not close the whole run's mark: its other files are still due
    lib = Library(root, db)
    assert "stopped before its end" in (lib.unfinished_run_warning() or "")
    lib.index(workers=0)
    assert lib.unfinished_run_warning() is None
    # A few-paths run that fails is retried by the daemon, whose own status covers it: no mark
    write(root, "doc1.md", "# Changed too\n\nOther text.\n")
    with pytest.raises(Stop):
        run_paths(["doc1.md", "doc2.md"], stop_after(1))
    assert lib.unfinished_run_warning() is None
    lib.close()


def test_a_run_under_way_is_no_news(tmp_path: Path) -> None:
    root, db = interrupted_library(tmp_path)
    lib = Library(root, db)
    writer = WriterLock(db)
    assert writer.try_acquire()  # a run holds the lock while it writes: its mark is no warning
    try:
        assert lib.unfinished_run_warning() is None
        assert lib.freshness_warning() is None
    finally:
        writer.release()
    assert lib.unfinished_run_warning() is not None
    lib.close()


def test_a_stopped_index_run_is_said_while_it_holds_the_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A CLI run has no heartbeat: stopped with Ctrl-Z (SIGSTOP) it holds the writer lock and keeps
    # the index behind, and status said only "another process is writing the index", exit 0.
    root = make_library(tmp_path / "lib", 20)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    for i in range(1500):
        write(root, f"more/m{i}.md", f"# More {i}\n\n" + f"added later, number {i}. " * 60)
    proc = subprocess.Popen(
        [sys.executable, "-m", "markindex_core", "index", str(root), "--db", str(db), "--json"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 60
        while not marked(db):  # step the run forward until it has marked the index
            assert proc.poll() is None and time.monotonic() < deadline, "run ended unseen"
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.02)
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(0.05)  # the stop has taken effect
        code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
        assert code == 2 and json.loads(out)["unfinished_run"]["stopped"] == proc.pid
        code, out, _ = run(capsys, "search", str(root), "document", "--db", str(db), "--json")
        assert f"kill -CONT {proc.pid}" in json.loads(out)["warning"]
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(timeout=120) == 0
    code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["unfinished_run"] is None


def marked(db: Path) -> bool:
    try:
        store = Store(db, readonly=True)
    except WriterBusy:  # stopped while it updated the WAL's shared index: step it on
        return False
    try:
        return store.get_meta(UNFINISHED_RUN) is not None
    finally:
        store.close()


def test_a_run_that_makes_no_progress_is_said_while_it_holds_the_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CLI run that hangs (neither killed nor stopped) held the lock and kept the index behind
    while status said only "another process is writing the index", exit 0. A run stamps each
    document it gets as progress (the lock file's mtime); none for RUN_STALL_SECONDS is said."""
    from markindex_core.config import RUN_STALL_SECONDS
    from markindex_core.store import runs
    from markindex_core.store.lock import lock_path_for

    root, db = interrupted_library(tmp_path)
    lock = WriterLock(db)  # this process stands for the hung run: alive, running, holding it
    lock.acquire()
    try:
        store = Store(db)
        store.set_meta(runs.mark(100))  # as a whole-library run does when it starts writing
        store.close()
        runs.stamp(db)
        code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
        assert code == 0 and json.loads(out)["unfinished_run"] is None  # at work: no news
        long_ago = time.time() - RUN_STALL_SECONDS - 120
        os.utime(lock_path_for(db), (long_ago, long_ago))
        code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
        stalled = json.loads(out)["unfinished_run"]
        assert code == 2 and stalled["stalled"] == os.getpid() and stalled["files"] == 100
        assert stalled["quiet"] >= RUN_STALL_SECONDS + 100
        code, out, _ = run(capsys, "search", str(root), "document", "--db", str(db), "--json")
        warning = json.loads(out)["warning"]
        assert "no progress for 12 min" in warning and f"kill {os.getpid()}" in warning
        runs.stamp(db)  # it went on
        code, out, _ = run(capsys, "status", str(root), "--db", str(db), "--json")
        assert code == 0 and json.loads(out)["unfinished_run"] is None
    finally:
        lock.release()


def test_an_index_run_stamps_its_progress(tmp_path: Path) -> None:
    from markindex_core.store.lock import lock_path_for

    root, db = interrupted_library(tmp_path)
    seen: list[float] = []

    def progress(done: int, total: int, path: str) -> None:
        if done == 1:
            os.utime(lock_path_for(db), (0, 0))
        seen.append(os.stat(lock_path_for(db)).st_mtime)

    Library(root, db).index(progress=progress, workers=0)
    assert seen[0] == 0 and seen[1] > time.time() - 60, seen[:3]
