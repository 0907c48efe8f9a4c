"""The daemon as users meet it: a real subprocess, a real folder, real watchdog events."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from markindex_core.library import Library
from markindex_core.serve.status import read_status
from markindex_core.store.lock import WriterLock

from .helpers import DaemonProcess, doc_paths, find, running_daemon, wait_for
from .helpers import make_lib as _lib


def test_file_and_folder_operations_reach_the_index(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# Apple\n\naardvark\n", "sub/b.md": "# Banana\n\nbadger\n"})
    db = root / ".markindex" / "index.db"
    with running_daemon(root, db):
        assert doc_paths(db) == {"a.md", "sub/b.md"}
        # create
        (root / "c.md").write_text("# Cherry\n\ncheetah\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "cheetah") == {"c.md"})
        # edit in place
        (root / "a.md").write_text("# Apple\n\nalpaca\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "alpaca") == {"a.md"})
        assert find(db, root, "aardvark") == set()
        # editor atomic save: dot temp file, then rename over the document
        tmp = root / ".a.md.swp"
        tmp.write_text("# Apple\n\nantelope\n", encoding="utf-8")
        os.replace(tmp, root / "a.md")
        wait_for(lambda: find(db, root, "antelope") == {"a.md"})
        # rename a file, move and delete folders
        os.rename(root / "c.md", root / "sub" / "c2.md")
        wait_for(lambda: doc_paths(db) == {"a.md", "sub/b.md", "sub/c2.md"})
        os.rename(root / "sub", root / "moved")
        wait_for(lambda: doc_paths(db) == {"a.md", "moved/b.md", "moved/c2.md"})
        shutil.rmtree(root / "moved")
        wait_for(lambda: doc_paths(db) == {"a.md"})
        # a folder moved in from outside the library
        outside = tmp_path / "outside"
        (outside / "deep").mkdir(parents=True)
        (outside / "deep" / "d.md").write_text("# Dingo\n\ndingo\n", encoding="utf-8")
        os.rename(outside, root / "inside")
        wait_for(lambda: doc_paths(db) == {"a.md", "inside/deep/d.md"})
        # .gitignore rules added and removed; nested .gitignore too
        (root / ".gitignore").write_text("inside/\n", encoding="utf-8")
        wait_for(lambda: doc_paths(db) == {"a.md"})
        (root / ".gitignore").write_text("", encoding="utf-8")
        wait_for(lambda: doc_paths(db) == {"a.md", "inside/deep/d.md"})
        (root / "inside" / ".gitignore").write_text("deep/\n", encoding="utf-8")
        wait_for(lambda: doc_paths(db) == {"a.md"})
        # dot-folders, non-Markdown files and the index folder never enter the index
        (root / ".git").mkdir()
        (root / ".git" / "x.md").write_text("# Hidden\n", encoding="utf-8")
        (root / "notes.txt").write_text("text", encoding="utf-8")
        (root / "e.md").write_text("# Eel\n\neel\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "eel") == {"e.md"})
        assert doc_paths(db) == {"a.md", "e.md"}
        # the root .markindexignore counts like a .gitignore
        (root / ".markindexignore").write_text("e.md\n", encoding="utf-8")
        wait_for(lambda: doc_paths(db) == {"a.md"})
        (root / ".markindexignore").unlink()
        wait_for(lambda: doc_paths(db) == {"a.md", "e.md"})


@pytest.mark.parametrize("where", ["above", "in a folder of documents", "at the root"])
def test_an_index_kept_in_or_above_the_library_does_not_blind_the_watch(
    tmp_path: Path, where: str
) -> None:
    """--db anywhere: the index's own writes are not library changes, and the documents beside
    it are watched like any other (the whole folder of the index had been ignored)."""
    root = _lib(tmp_path, {"a.md": "# Apple\n\naardvark\n", "notes/b.md": "# Bee\n\nbadger\n"})
    db = {
        "above": tmp_path / "index.db",
        "in a folder of documents": root / "notes" / "index.db",
        "at the root": root / "index.db",
    }[where]
    with running_daemon(root, db) as daemon:
        assert doc_paths(db) == {"a.md", "notes/b.md"}
        before = time.time()
        (root / "c.md").write_text("# Cherry\n\ncheetah\n", encoding="utf-8")
        (root / "notes" / "b.md").write_text("# Bee\n\nbumblebee\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "cheetah") == {"c.md"})
        wait_for(lambda: find(db, root, "bumblebee") == {"notes/b.md"})
        # A reader sees the commit before the daemon logs it: count once its status says done.
        daemon.wait_settled(before)
        reconciles = daemon.log.count("reconciled")
        time.sleep(2)  # its own writes (status heartbeats, WAL) start no reconcile
        assert daemon.log.count("reconciled") == reconciles, daemon.log


def test_status_reports_the_writing_daemon(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n", "big.md": "# Big\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        st = read_status(Library(root, db))
        assert st["indexed"] and st["documents"] == 2 and st["nodes"] >= 2
        assert st["daemon_writing"] and st["writer_locked"]
        daemon = st["daemon"]
        assert daemon["pid"] == d.proc.pid and daemon["alive"] and daemon["writing"]
        assert daemon["observer"] == "inotify" and daemon["queue"] == 0
        assert daemon["heartbeat_age"] < 5 and daemon["last_reconcile_at"]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "markindex_core",
                "status",
                str(root),
                "--db",
                str(db),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(out.stdout)["daemon"]["pid"] == d.proc.pid
        text = subprocess.run(
            [sys.executable, "-m", "markindex_core", "status", str(root), "--db", str(db)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "documents 2" in text and f"pid {d.proc.pid}, writing" in text
    st = read_status(Library(root, db))
    assert not st["daemon_writing"] and not st["writer_locked"]
    assert st["daemon"]["state"] == "stopped" and not st["daemon"]["alive"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_stop_cleanly_and_free_the_lock(tmp_path: Path, sig: int) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    assert d.stop(sig) == 0, d.log
    assert d.status()["state"] == "stopped"
    assert WriterLock(db).try_acquire()


def test_read_only_while_another_process_writes_then_takes_over(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()
    other = WriterLock(db)
    assert other.try_acquire()  # e.g. a long `markindex index` in another process
    d = DaemonProcess(root, db)
    try:
        wait_for(lambda: "serving read-only" in d.log)
        (root / "b.md").write_text("# B\n\nbeluga\n", encoding="utf-8")
        assert find(db, root, "alpha") == {"a.md"}  # reads keep working
        assert read_status(Library(root, db))["writer_locked"]
        other.release()
        d.wait_writing()
        wait_for(lambda: find(db, root, "beluga") == {"b.md"})  # reconciled on takeover
    finally:
        other.release()
        assert d.stop() == 0, d.log


def test_a_second_daemon_waits_then_takes_over(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n"})
    db = tmp_path / "idx" / "index.db"
    first = DaemonProcess(root, db)
    first.wait_writing()
    second = DaemonProcess(root, db)
    try:
        wait_for(lambda: "serving read-only" in second.log)
        assert first.stop() == 0
        second.wait_writing()
        (root / "c.md").write_text("# C\n\ncapybara\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "capybara") == {"c.md"})
    finally:
        first.stop()
        assert second.stop() == 0, second.log


def test_polling_mode(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db, "--poll") as d:
        assert d.status()["observer"] == "polling"
        tmp = root / ".b.md.tmp"
        tmp.write_text("# B\n\nbison\n", encoding="utf-8")
        os.replace(tmp, root / "b.md")
        wait_for(lambda: find(db, root, "bison") == {"b.md"}, timeout=15)


def test_bad_arguments_fail_fast(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n"})
    r = subprocess.run(
        [sys.executable, "-m", "markindex_core", "daemon", str(root), "--ignore", "../x"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "leaves the library" in r.stderr


def test_sigterm_interrupts_a_long_first_build_and_the_index_stays_whole(tmp_path: Path) -> None:
    para = "Long paragraph about watchers, indexes and readers. " * 40 + "\n\n"
    files = {
        f"d{i // 50}/f{i}.md": f"# File {i}\n\n" + "## Part\n\n".join([para] * 10)
        for i in range(400)
    }
    root = _lib(tmp_path, files)
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    try:
        wait_for(lambda: d.status().get("busy"), timeout=30, interval=0.01)
    finally:
        t0 = time.monotonic()
        assert d.stop(timeout=10) == 0, d.log
    assert time.monotonic() - t0 < 5  # the build is interrupted, not waited for
    # Said, since the index misses what the build did not reach (status exits 2 until indexed).
    state = d.status()["state"]
    assert state == "stopped: it was asked to stop with a reconcile of the whole library unfinished"
    report = Library(root, db).index()  # the index opens, and the next run completes the work
    assert len(report.added) + report.unchanged == 400


def test_a_rewrite_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    """Coarse file-system clocks can give two quick same-size saves one mtime ("racy clean")."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db):
        assert find(db, root, "walrus") == {"a.md"}
        st = (root / "a.md").stat()
        tmp = root / ".a.md.tmp"
        tmp.write_text("# A\n\nwombat\n", encoding="utf-8")  # same size
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime, as a coarse clock gives
        os.replace(tmp, root / "a.md")
        wait_for(lambda: find(db, root, "wombat") == {"a.md"})


@pytest.mark.parametrize("watch", [[], ["--poll"]], ids=["inotify", "polling"])
def test_an_edit_that_restores_an_old_mtime_is_still_seen(tmp_path: Path, watch: list[str]) -> None:
    """`cp -p`, `rsync -t`, `touch -r`: same size, and the mtime set back to one long before the
    file was indexed (outside any racy window). The event names the file: its hash decides.
    Polling (--poll, a network file system, the inotify limit reached) compared only size and
    mtime, so it saw no change at all, and the periodic sweep, comparing the same, neither:
    the change time, which every write sets, now counts as the mtime there."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n"})
    old = time.time_ns() - 3600 * 10**9
    os.utime(root / "a.md", ns=(old, old))
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db, *watch):
        assert find(db, root, "walrus") == {"a.md"}
        with (root / "a.md").open("r+", encoding="utf-8") as f:  # in place: same inode
            f.write("# A\n\nwombat\n")  # same size
        os.utime(root / "a.md", ns=(old, old))
        wait_for(lambda: find(db, root, "wombat") == {"a.md"}, timeout=15)


def test_a_daemon_leaves_out_what_the_index_remembers_to_ignore(tmp_path: Path) -> None:
    """`markindex index ROOT --ignore drafts/` then `markindex daemon ROOT` (no --ignore): the
    daemon indexed every draft at its first reconcile, and each new one as it came. It now
    applies the patterns the index remembers."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n", "drafts/d.md": "# D\n\nzqdraft\n"})
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index(ignore=["drafts/"])
    with running_daemon(root, db) as d:
        since = time.time()
        (root / "drafts" / "e.md").write_text("# E\n\nzqdraft too\n", encoding="utf-8")
        (root / "b.md").write_text("# B\n\nbeta\n", encoding="utf-8")
        wait_for(lambda: "b.md" in doc_paths(db))
        d.wait_settled(since)
        assert doc_paths(db) == {"a.md", "b.md"}, d.log


def test_an_ignore_rule_left_out_is_said_once(tmp_path: Path) -> None:
    """A line of .gitignore that is no valid pattern is left out (as git does): `markindex index`
    warns on every run, the daemon said nothing, so the files that line meant to keep out came
    in without a word. It is said in the log, once while it lasts."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n", "secret/s.md": "# S\n\nsable\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        (root / ".gitignore").write_text("[z-a]\nnotes/\n", encoding="utf-8")
        wait_for(lambda: "not a valid ignore pattern" in d.log, timeout=15)
        (root / "a.md").write_text("# A\n\naardvark\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "aardvark") == {"a.md"})
        (root / ".gitignore").write_text("notes/\n", encoding="utf-8")
        wait_for(lambda: d.status().get("last_batch", {}).get("full"))
        (root / "b.md").write_text("# B\n\nbeluga\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "beluga") == {"b.md"})
        assert d.log.count("not a valid ignore pattern") == 1, d.log


def test_an_ignore_file_the_daemon_cannot_read_is_said(shared_tmp: Path) -> None:
    """Run as `nobody`: a .gitignore it may not read was taken for an empty one, so the folder
    it keeps out came into the index (and answers) without a word, from the daemon as from
    `index`. It is still left out, and said."""
    from .helpers import nobody_daemon

    root = _lib(shared_tmp, {"a.md": "# A\n\nalpha\n", "private/p.md": "# P\n\npuma\n"})
    (root / ".gitignore").write_text("private/\n", encoding="utf-8")
    os.chmod(root / ".gitignore", 0o600)
    d, _ = nobody_daemon(root, shared_tmp)
    try:
        d.wait_writing()
        wait_for(lambda: ".gitignore: cannot be read (Permission denied)" in d.log, timeout=15)
    finally:
        assert d.stop() == 0, d.log


def test_a_daemon_started_with_stdin_at_its_end_says_why_it_stops(tmp_path: Path) -> None:
    """`nohup markindex daemon ROOT &`, systemd, docker without -i: stdin is at its end, the MCP
    session ends at once, and so does the daemon. It must say so, and how to run without MCP."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    cmd = [sys.executable, "-m", "markindex_core", "daemon", str(root), "--db", str(db)]
    out = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == ""
    assert "stdin closed before any MCP message" in out.stderr, out.stderr
    assert "--no-mcp" in out.stderr
