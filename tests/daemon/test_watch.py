"""watch.py: coalescing, event filtering with a real observer, inotify-limit fallback."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from watchdog.observers import Observer

from markindex_core.serve import watch
from markindex_core.serve.watch import (
    Coalescer,
    LibraryEvents,
    OverflowAlarm,
    minimal_paths,
    start_watching,
)


def test_minimal_paths_drops_what_a_dirty_folder_covers() -> None:
    assert minimal_paths(["a/b.md", "a", "ab.md", "c/d/e.md", "c/d"]) == ["a", "ab.md", "c/d"]


async def test_a_burst_is_one_batch() -> None:
    c = Coalescer(asyncio.get_running_loop(), quiet_s=0.05, max_wait_s=1.0)
    threads = [threading.Thread(target=c.add, args=(f"f{i}.md",)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batch = await asyncio.wait_for(c.next_batch(), 2)
    assert len(batch.paths) == 200 and not batch.full
    assert c.pending == 0


async def test_a_steady_stream_is_flushed_by_the_maximum_wait() -> None:
    loop = asyncio.get_running_loop()
    c = Coalescer(loop, quiet_s=0.05, max_wait_s=0.2)
    stop = asyncio.Event()

    async def stream() -> None:
        i = 0
        while not stop.is_set():
            c.add(f"f{i}.md")
            i += 1
            await asyncio.sleep(0.01)  # never quiet for 50 ms

    task = asyncio.create_task(stream())
    t0 = loop.time()
    batch = await asyncio.wait_for(c.next_batch(), 2)
    waited = loop.time() - t0
    stop.set()
    await task
    assert batch.paths and 0.15 <= waited < 0.6


async def test_full_requests_skip_the_quiet_window() -> None:
    loop = asyncio.get_running_loop()
    c = Coalescer(loop, quiet_s=5.0, max_wait_s=10.0)
    c.request_full()
    batch = await asyncio.wait_for(c.next_batch(), 1)
    assert batch.full


async def test_only_library_markdown_reaches_the_coalescer(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "docs").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "index").mkdir()
    c = Coalescer(asyncio.get_running_loop(), quiet_s=0.1, max_wait_s=1.0)
    handler = LibraryEvents(root, c, index_dir=root / "index")
    watch = start_watching(root, handler)
    try:
        (root / ".git" / "HEAD.md").write_text("x", encoding="utf-8")
        (root / "index" / "index.db-wal").write_text("x", encoding="utf-8")  # the index's own
        (root / "docs" / ".a.md.swp").write_text("x", encoding="utf-8")
        (root / "docs" / "notes.txt").write_text("x", encoding="utf-8")
        tmp = root / "docs" / ".a.md.tmp"
        tmp.write_text("# A\n", encoding="utf-8")
        os.replace(tmp, root / "docs" / "a.md")
        os.rename(root / "docs", root / "moved")
        batch = await asyncio.wait_for(c.next_batch(), 3)
        assert not batch.rules_changed
        assert batch.paths <= {"docs", "moved", "docs/a.md", "moved/a.md"}
        assert {"docs/a.md", "docs", "moved"} <= batch.paths
        # A document in the index's folder is a document like any other (a full scan has it).
        (root / "index" / "stray.md").write_text("x", encoding="utf-8")
        batch = await asyncio.wait_for(c.next_batch(), 3)
        assert batch.paths == {"index/stray.md"}, batch.paths
        (root / "moved" / ".gitignore").write_text("*.md\n", encoding="utf-8")
        batch = await asyncio.wait_for(c.next_batch(), 3)
        assert batch.rules_changed and not batch.paths
    finally:
        watch.stop()


class _NoWatchesLeft(Observer):  # type: ignore[misc,valid-type]
    """A native observer on a machine whose inotify watch limit is used up."""

    def start(self) -> None:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


async def test_inotify_limit_falls_back_to_polling(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    c = Coalescer(asyncio.get_running_loop(), quiet_s=0.05, max_wait_s=1.0)
    with caplog.at_level(logging.WARNING, logger="markindex.watch"):
        watch = start_watching(
            tmp_path, LibraryEvents(tmp_path, c), observer_factory=_NoWatchesLeft
        )
    try:
        assert watch.kind == "polling" and watch.healthy()
        assert "max_user_watches" in watch.notice and "max_user_watches" in caplog.text
    finally:
        watch.stop()


async def test_an_inotify_overflow_asks_for_a_full_reconcile() -> None:
    c = Coalescer(asyncio.get_running_loop(), quiet_s=0.05, max_wait_s=1.0)
    alarm = OverflowAlarm(c.request_full)
    alarm.install()
    try:
        logging.getLogger("watchdog.observers.inotify_c").warning(
            "Inotify queue overflowed; filesystem events were lost"
        )
    finally:
        alarm.remove()
    batch = await asyncio.wait_for(c.next_batch(), 1)
    assert batch.full


async def test_a_chmod_marks_the_file_or_folder_dirty(tmp_path: Path) -> None:
    """A folder or file made readable changes neither size nor mtime: only the attribute event says so."""
    root = tmp_path / "lib"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "x.md").write_text("# X\n", encoding="utf-8")
    (root / "secret.md").write_text("# S\n", encoding="utf-8")
    c = Coalescer(asyncio.get_running_loop(), quiet_s=0.05, max_wait_s=1.0)
    watch = start_watching(root, LibraryEvents(root, c))
    try:
        os.chmod(root / "locked", 0o700)
        os.chmod(root / "secret.md", 0o600)
        batch = await asyncio.wait_for(c.next_batch(), 3)
        assert {"locked", "secret.md"} <= batch.paths
    finally:
        watch.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
async def test_a_dead_inotify_reader_is_unhealthy_and_the_next_watch_reads_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watchdog's inotify observer reads the kernel's events on a thread of its own. When it
    died (the KeyError of two swapped folders did it), no event came any more, yet `healthy()`
    said yes: the daemon stayed deaf without a word. Now the watch is unhealthy (the daemon
    restarts it, and says so), and the next one reads again."""
    from watchdog.observers.inotify import InotifyWatchGroup

    loop = asyncio.get_running_loop()
    c = Coalescer(loop, quiet_s=0.05, max_wait_s=1.0)
    watch = start_watching(tmp_path, LibraryEvents(tmp_path, c))
    try:
        assert watch.kind == "inotify" and watch.healthy()

        def bug(self: object, event: object) -> None:
            raise RuntimeError("a bug in watchdog's bookkeeping")

        monkeypatch.setattr(InotifyWatchGroup, "on_event", bug)
        (tmp_path / "a.md").write_text("x", encoding="utf-8")
        for _ in range(150):
            if not watch.healthy():
                break
            await asyncio.sleep(0.02)
        assert not watch.healthy()
    finally:
        monkeypatch.undo()
        watch.stop()
    c = Coalescer(loop, quiet_s=0.05, max_wait_s=1.0)
    watch = start_watching(tmp_path, LibraryEvents(tmp_path, c))
    try:
        (tmp_path / "b.md").write_text("x", encoding="utf-8")
        batch = await asyncio.wait_for(c.next_batch(), 3)
        assert "b.md" in batch.paths and watch.healthy()
    finally:
        watch.stop()


def test_watchdogs_stop_race_is_logged_at_debug_level(caplog: pytest.LogCaptureFixture) -> None:
    """watchdog logs an ERROR when an event meets its reader being stopped (its own race): the
    daemon's stop printed it about one run in five. It is kept at debug level; other watchdog
    errors stay errors."""
    watch._probe_watches()  # what starting a watcher does once per process
    inotify_log = logging.getLogger("watchdog.observers.inotify")
    with caplog.at_level(logging.DEBUG, logger="watchdog"):
        inotify_log.error("InotifyEmitter.queue_events() called when the thread is inactive")
        inotify_log.error("something else went wrong")
    levels = [(r.getMessage(), r.levelno) for r in caplog.records if r.name == inotify_log.name]
    assert levels == [
        ("InotifyEmitter.queue_events() called when the thread is inactive", logging.DEBUG),
        ("something else went wrong", logging.ERROR),
    ]


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_watchdogs_stop_race_is_not_printed_by_a_command(verbose: bool) -> None:
    """Relabelled DEBUG, the record still reached the stderr handler every command installs
    (it takes all levels): the stop printed it as a DEBUG line. It is printed only where
    watchdog's debug lines are, as a `logger.debug` would be; other watchdog errors still are."""
    script = (
        "import logging, sys\n"
        "from markindex_core.logs import setup_logging\n"
        "from markindex_core.serve.watch import _probe_watches\n"
        "setup_logging(verbose=sys.argv[1] == 'verbose')\n"
        "_probe_watches()\n"
        "inotify_log = logging.getLogger('watchdog.observers.inotify')\n"
        "inotify_log.error('InotifyEmitter.queue_events() called when the thread is inactive')\n"
        "inotify_log.error('something else went wrong')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, "verbose" if verbose else "quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "called when the thread is inactive" not in run.stderr, run.stderr
    assert "ERROR: something else went wrong" in run.stderr, run.stderr
