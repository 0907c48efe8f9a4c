"""Changes no file event names: after them, the live index still equals a fresh full index.

Each test runs a real daemon subprocess on a real folder, makes a change whose effect on some
path reaches inotify under another path (or under none), lets the events settle and compares
the live index with a fresh build of the same folder.
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from markindex_core.config import DAEMON_FULL_SCAN_PATHS
from markindex_core.serve.status import read_status_file
from markindex_core.store.db import Store

from .helpers import (
    DaemonProcess,
    diff_snapshots,
    doc_paths,
    find,
    fresh_build,
    index_snapshot,
    nobody_daemon,
    running_daemon,
    wait_for,
)
from .helpers import make_lib as _lib

QUERIES = ["walrus", "narwhal", "otter"]


def _differences(root: Path, db: Path, fresh: Path) -> list[str]:
    """What the live index and a fresh build of `root` disagree on."""
    fresh_build(root, fresh)
    live, built = Store(db, readonly=True), Store(fresh, readonly=True)
    try:
        return diff_snapshots(index_snapshot(live, QUERIES), index_snapshot(built, QUERIES))
    finally:
        live.close()
        built.close()


def _assert_equal_to_fresh_build(d: DaemonProcess, tmp_path: Path, since: float) -> None:
    d.wait_settled(since)
    time.sleep(0.5)  # any follow-up reconcile has started by now
    d.wait_settled(since)
    diff = _differences(d.root, d.db, tmp_path / "fresh" / "index.db")
    assert not diff, "\n".join(diff) + f"\n--- daemon log:\n{d.log[-2000:]}"


def test_an_edit_through_one_hard_link_reaches_the_other(tmp_path: Path) -> None:
    """inotify names only the link written through; the other name's content changed too."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n", "b.md": "# B\n\notter\n"})
    os.link(root / "a.md", root / "a-link.md")
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        assert find(db, root, "walrus") == {"a.md", "a-link.md"}
        since = time.time()
        with open(root / "a.md", "a", encoding="utf-8") as f:
            f.write("\nnarwhal\n")
        wait_for(lambda: "a.md" in find(db, root, "narwhal"))
        _assert_equal_to_fresh_build(d, tmp_path, since)
        assert find(db, root, "narwhal") == {"a.md", "a-link.md"}


def test_an_edit_through_a_hard_link_outside_the_library_is_seen(tmp_path: Path) -> None:
    """inotify tells only the watches of the folder written through: an edit through a name
    outside the library gives the daemon no event at all. It polls such files instead."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n", "b.md": "# B\n\notter\n"})
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(root / "a.md", outside / "a.md")
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        assert find(db, root, "walrus") == {"a.md"}
        since = time.time()
        with open(outside / "a.md", "a", encoding="utf-8") as f:
            f.write("\nnarwhal\n")
        wait_for(lambda: find(db, root, "narwhal") == {"a.md"})
        _assert_equal_to_fresh_build(d, tmp_path, since)
        # The poll follows the file after its reindex: a second edit is seen too.
        with open(outside / "a.md", "a", encoding="utf-8") as f:
            f.write("\nbeluga\n")
        wait_for(lambda: find(db, root, "beluga") == {"a.md"})


def test_many_hard_linked_files_are_polled_in_turn(tmp_path: Path) -> None:
    """A library hard-linked into a snapshot (`cp -al`) has every file under two names: all were
    stat-ed every guard tick (half a core for 20 000 files). A slice per tick, in turn, still
    reaches each one: an edit through the snapshot's name is seen."""
    files = {f"d{i % 10}/f{i}.md": f"# F{i}\n\nwalrus {i}\n" for i in range(2500)}
    root = _lib(tmp_path, files)
    snapshot = tmp_path / "snapshot"
    for rel in files:
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(root / rel, snapshot / rel)
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db):
        for rel in ("d9/f2499.md", "d0/f1200.md"):  # wherever the turn is
            with open(snapshot / rel, "a", encoding="utf-8") as f:
                f.write("\nnarwhal\n")
        wait_for(lambda: find(db, root, "narwhal") == {"d9/f2499.md", "d0/f1200.md"}, 20)


def test_a_change_no_event_reports_is_found_by_the_periodic_sweep(tmp_path: Path) -> None:
    """A write through a shared mmap sends no inotify event (nor does the fd's close, until it
    comes): only the periodic comparison of every file's stat finds it, and says so."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n", "b.md": "# B\n\notter\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db, "--sweep-s", "2") as d:
        with open(root / "a.md", "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            at = m.find(b"walrus")
            m[at : at + 6] = b"beluga"
            m.flush()
            # The file stays open: its close would be an event of its own.
            wait_for(lambda: find(db, root, "beluga") == {"a.md"}, timeout=15)
            # Said in status (and the log) once the reconcile has ended.
            wait_for(
                lambda: any("no file event told of" in e["error"] for e in d.status()["errors"])
            )
        assert find(db, root, "walrus") == set()


def test_an_inotify_overflow_is_reconciled_and_said(tmp_path: Path) -> None:
    """Events the kernel dropped are found by a full reconcile, and the daemon says they were
    lost (log, status errors) instead of only watchdog's own log line."""
    files = {f"d{i // 100}/f{i}.md": f"# F{i}\n\nwalrus {i}\n" for i in range(500)}
    root = _lib(tmp_path, files)
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        since = time.time()
        os.kill(d.proc.pid, signal.SIGSTOP)  # its inotify queue fills up meanwhile
        try:
            limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
            for _ in range(limit // len(files) + 2):
                for rel in files:
                    os.utime(root / rel)
            (root / "d0" / "f7.md").write_text("# F7\n\nnarwhal\n", encoding="utf-8")
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        _assert_equal_to_fresh_build(d, tmp_path, since)
        assert find(db, root, "narwhal") == {"d0/f7.md"}
        errors = [e["error"] for e in d.status()["errors"]]
        assert any("events were lost" in e for e in errors), errors
        assert "markindex.daemon WARNING: file events were lost" in d.log, d.log
        wait_for(lambda: "reconciling everything once more" in d.log, timeout=15)


def test_a_library_path_that_is_a_symlink_pointed_elsewhere_ends_the_daemon_loudly(
    tmp_path: Path,
) -> None:
    """`docs -> releases/v1`, then `ln -sfn releases/v2 docs` (an atomic deploy): the path the
    daemon was given now names another folder, which a fresh `markindex index docs` indexes.
    The daemon must not go on indexing v1 as if nothing happened."""
    v1 = _lib(tmp_path / "v1", {"a.md": "# A\n\nwalrus\n"})
    v2 = _lib(tmp_path / "v2", {"b.md": "# B\n\nnarwhal\n"})
    link = tmp_path / "docs"
    link.symlink_to(v1)
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(link, db)
    try:
        d.wait_writing()
        tmp = tmp_path / "docs.new"
        tmp.symlink_to(v2)
        os.replace(tmp, link)
        rc = d.proc.wait(15)
    finally:
        d.stop()
    assert rc != 0, d.log
    assert f"the library path {link} now leads to another folder, {v2}" in d.log, d.log
    assert "restart `markindex daemon`" in d.log, d.log
    assert (read_status_file(db) or {})["state"].startswith("stopped: the library path")


def _watch_limit(limit: int) -> list[str] | None:
    """A command prefix running its command in a user namespace whose inotify watch limit is
    `limit` (the host's limit is left alone), or None where that cannot be done."""
    prefix = [
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"',
        "sh",
    ]
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if ok else None


@pytest.mark.parametrize("when", ["at start", "for a new folder"])
def test_folders_inotify_cannot_watch_make_the_daemon_poll_and_say_so(
    tmp_path: Path, when: str
) -> None:
    """Once the user's inotify watch limit is reached, watchdog skips the folders it cannot
    watch without a word: their changes would never reach the index. The daemon polls instead,
    and says why."""
    prefix = _watch_limit(40)
    if prefix is None:
        pytest.skip("cannot run the daemon in a user namespace with its own inotify limit")
    folders = 60 if when == "at start" else 30
    root = _lib(tmp_path, {f"d{i:02d}/f.md": f"# F{i}\n\nwalrus\n" for i in range(folders)})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db, prefix=prefix)
    try:
        d.wait_writing()
        if when == "for a new folder":
            assert d.status()["observer"] == "inotify"
            for i in range(folders, 60):
                (root / f"d{i:02d}").mkdir()
                (root / f"d{i:02d}" / "f.md").write_text(f"# F{i}\n\nwalrus\n", encoding="utf-8")
        st = wait_for(lambda: (s := d.status()).get("observer") == "polling" and s, timeout=15)
        assert "max_user_watches" in st["notice"], st
        assert "watch limit" in d.log, d.log
        (root / "d59" / "f.md").write_text("# F59\n\nnarwhal\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "narwhal") == {"d59/f.md"}, timeout=15)
    finally:
        assert d.stop() == 0, d.log


def test_a_folder_made_readable_is_watched_from_then_on(shared_tmp: Path) -> None:
    """Run as `nobody`: inotify cannot watch a folder it may not read, and watchdog skips it
    without a word. Once a chmod makes it readable, the daemon indexes it, and must also see
    every later change inside it."""
    root = _lib(shared_tmp, {"ok.md": "# Ok\n\notter\n", "locked/x.md": "# X\n\nwalrus\n"})
    os.chmod(root / "locked", 0)
    d, db = nobody_daemon(root, shared_tmp)
    try:
        d.wait_writing()
        os.chmod(root / "locked", 0o755)
        wait_for(lambda: find(db, root, "walrus") == {"locked/x.md"})
        (root / "locked" / "x.md").write_text("# X\n\nnarwhal\n", encoding="utf-8")
        (root / "locked" / "y.md").write_text("# Y\n\nnarwhal\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "narwhal") == {"locked/x.md", "locked/y.md"}, timeout=15)
        assert f"{root / 'locked'} was made readable: watching it" in d.log, d.log
    finally:
        os.chmod(root / "locked", 0o755)
        assert d.stop() == 0, d.log


def test_a_folder_made_inside_an_unreadable_one_is_watched_once_it_is_readable(
    shared_tmp: Path,
) -> None:
    """Run as `nobody`: a folder made (by another user) inside one this daemon may not enter
    cannot be watched either. The chmod that makes the outer folder readable named only that
    one, which was watched all along, so the folder inside stayed unwatched: its changes were
    missed without a word until the periodic sweep."""
    root = _lib(shared_tmp, {"ok.md": "# Ok\n\notter\n", "outer/x.md": "# X\n\nwalrus\n"})
    d, db = nobody_daemon(root, shared_tmp)
    try:
        d.wait_writing()
        os.chmod(root / "outer", 0)
        wait_for(lambda: d.status().get("unreadable") == ["outer"])
        (root / "outer" / "inner").mkdir()
        (root / "outer" / "inner" / "y.md").write_text("# Y\n\nseal\n", encoding="utf-8")
        os.chmod(root / "outer", 0o755)
        wait_for(lambda: find(db, root, "seal") == {"outer/inner/y.md"}, timeout=15)
        (root / "outer" / "inner" / "y.md").write_text("# Y\n\nnarwhal\n", encoding="utf-8")
        (root / "outer" / "inner" / "z.md").write_text("# Z\n\nnarwhal\n", encoding="utf-8")
        wait_for(
            lambda: find(db, root, "narwhal") == {"outer/inner/y.md", "outer/inner/z.md"},
            timeout=15,
        )
    finally:
        os.chmod(root / "outer", 0o755)
        assert d.stop() == 0, d.log


def test_a_racy_rewrite_is_seen_in_a_burst_big_enough_for_a_full_reconcile(
    tmp_path: Path,
) -> None:
    """A same-size rewrite that keeps the mtime (a coarse file-system clock) right after the
    file was indexed is re-hashed on its event; also when the same burst holds so many paths
    (a checkout) that the daemon reconciles everything by stat instead."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        since = time.time()
        st = (root / "a.md").stat()
        tmp = root / ".a.md.tmp"
        tmp.write_text("# A\n\notters\n", encoding="utf-8")  # same size
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime, as a coarse clock gives
        os.replace(tmp, root / "a.md")
        for i in range(DAEMON_FULL_SCAN_PATHS + 100):
            (root / f"f{i}.md").write_text(f"# F{i}\n\nseal\n", encoding="utf-8")
        wait_for(lambda: len(doc_paths(db)) == DAEMON_FULL_SCAN_PATHS + 101, timeout=30)
        _assert_equal_to_fresh_build(d, tmp_path, since)
        assert find(db, root, "otters") == {"a.md"}


def test_a_file_system_mounted_into_the_library_is_indexed_and_watched(tmp_path: Path) -> None:
    """A mount (a drive, a share, a bind mount) into a folder of the library sends no file
    event, and inotify does not watch what it brings: without a look at the mount table the
    index keeps the hidden folder's documents and never sees the mounted ones."""
    root = _lib(tmp_path, {"a.md": "# A\n\notter\n", "mnt/under.md": "# Under\n\nwalrus\n"})
    other = _lib(tmp_path / "other", {"m.md": "# M\n\nnarwhal\n"})
    db = tmp_path / "idx" / "index.db"
    with running_daemon(root, db) as d:
        mounted = subprocess.run(["mount", "--bind", str(other), str(root / "mnt")], check=False)
        if mounted.returncode != 0:
            pytest.skip("cannot bind-mount here (needs root and mount rights)")
        try:
            wait_for(lambda: find(db, root, "narwhal") == {"mnt/m.md"}, timeout=15)
            assert find(db, root, "walrus") == set()
            (root / "mnt" / "m2.md").write_text("# M2\n\nnarwhal\n", encoding="utf-8")
            wait_for(lambda: find(db, root, "narwhal") == {"mnt/m.md", "mnt/m2.md"})
        finally:
            subprocess.run(["umount", str(root / "mnt")], check=False)
        wait_for(lambda: find(db, root, "walrus") == {"mnt/under.md"}, timeout=15)
        _assert_equal_to_fresh_build(d, tmp_path, 0)
