"""File-system churn the other daemon tests do not make: after each, once the daemon has settled,
the live index equals a fresh build of the folder (these cases were stale with no warning).

Each test runs a real daemon subprocess on a real folder with real inotify events.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from markindex_core.store.db import Store

from .helpers import (
    DaemonProcess,
    diff_snapshots,
    find,
    fresh_build,
    index_snapshot,
    keep_watchdog_reading,
    running_daemon,
    wait_for,
)
from .helpers import make_lib as _lib

QUERIES = ["walrus", "narwhal", "otter", "zebra"]
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Swap two names atomically (`mv --exchange`, renameat2 RENAME_EXCHANGE); skip the test where
    the C library or the file system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        pytest.skip("no renameat2 in this C library")
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE):
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            pytest.skip(f"RENAME_EXCHANGE unsupported here: {os.strerror(err)}")
        raise OSError(err, os.strerror(err))


def _assert_equal_to_fresh_build(d: DaemonProcess, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh" / "index.db"
    fresh_build(d.root, fresh)
    live, built = Store(d.db, readonly=True), Store(fresh, readonly=True)
    try:
        a, b = index_snapshot(live, QUERIES), index_snapshot(built, QUERIES)
    finally:
        live.close()
        built.close()
    for snap in (a, b):  # hits of equal score come in row order, which differs: compare sets
        snap["searches"] = {q: sorted(hits) for q, hits in snap["searches"].items()}
    diff = diff_snapshots(a, b)
    assert not diff, "\n".join(diff) + f"\n--- daemon log:\n{d.log[-2000:]}"


def _wait_idle(d: DaemonProcess) -> None:
    """Until the daemon has nothing queued and no reconcile under way."""
    wait_for(lambda: not d.status().get("busy") and d.status().get("queue") == 0)


def _swap_library(tmp_path: Path) -> Path:
    return _lib(
        tmp_path,
        {
            "a.md": "# A\n\nwalrus\n",
            "notes/n1.md": "# N1\n\nnarwhal\n",
            "notes/deep/n2.md": "# N2\n\notter\n",
            "other/o1.md": "# O1\n\nwalrus other\n",
            "other/deep/o2.md": "# O2\n\nwalrus deep\n",
        },
    )


def test_two_folders_swapped_atomically_are_watched_under_their_new_names(
    tmp_path: Path,
) -> None:
    """`mv --exchange notes other` (an atomic deploy swaps folders so): watchdog moved its
    record of each folder's watches onto the other's path, so every later change inside either
    was reported under the other folder's name. The daemon reconciled the wrong paths: edits
    stayed unindexed, new files unfound, and status said nothing."""
    root = _swap_library(tmp_path)
    with running_daemon(root, tmp_path / "idx" / "index.db") as d:
        _exchange(root / "notes", root / "other")
        wait_for(lambda: find(d.db, root, "narwhal") == {"other/n1.md"})
        time.sleep(1.0)  # the swap is indexed; now edits inside the swapped folders
        (root / "notes/deep/o2.md").write_text("# O2\n\nzebra one\n", encoding="utf-8")
        (root / "other/deep/n2.md").write_text("# N2\n\nzebra two\n", encoding="utf-8")
        (root / "notes/new.md").write_text("# New\n\nzebra three\n", encoding="utf-8")
        want = {"notes/deep/o2.md", "other/deep/n2.md", "notes/new.md"}
        wait_for(lambda: find(d.db, root, "zebra") == want, timeout=15)
        _wait_idle(d)
        _assert_equal_to_fresh_build(d, tmp_path)


def test_a_swapped_folder_deleted_leaves_the_watch_working(tmp_path: Path) -> None:
    """After a swap, deleting one of the folders made watchdog's event thread die on its own
    bookkeeping (KeyError): no file event reached the daemon any more, anywhere in the library,
    and status said it was watching. Stopping then failed too: a traceback, and status called
    the clean stop a crash."""
    root = _swap_library(tmp_path)
    with running_daemon(root, tmp_path / "idx" / "index.db") as d:
        _exchange(root / "notes", root / "other")
        wait_for(lambda: find(d.db, root, "narwhal") == {"other/n1.md"})
        time.sleep(0.5)
        shutil.rmtree(root / "notes")
        wait_for(lambda: not find(d.db, root, "walrus") - {"a.md"})
        time.sleep(0.5)
        (root / "later.md").write_text("# Later\n\nzebra\n", encoding="utf-8")
        wait_for(lambda: find(d.db, root, "zebra") == {"later.md"}, timeout=15)
        _wait_idle(d)
        _assert_equal_to_fresh_build(d, tmp_path)
    assert d.status().get("state") == "stopped", d.log
    assert "Traceback" not in d.log, d.log


def test_a_site_deployed_by_swapping_in_a_hidden_build_folder_stays_indexed(
    tmp_path: Path,
) -> None:
    """The atomic deploy: build the next version into `.next`, then `mv --exchange .next site`.
    watchdog's records of the two folders swapped with each deploy (see the test above), so the
    second deploy's new documents were never indexed, the first's stayed, and so did every later
    edit inside `site`: all without a warning."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n", "site/deep/d.md": "# D\n\notter\n"})
    with running_daemon(root, tmp_path / "idx" / "index.db") as d:
        for version in range(2):
            shutil.rmtree(root / ".next", ignore_errors=True)
            (root / ".next" / "deep").mkdir(parents=True)
            (root / ".next" / f"v{version}.md").write_text(f"# V\n\nnarwhal {version}\n")
            (root / ".next" / "deep" / "d.md").write_text(f"# D\n\notter {version}\n")
            _exchange(root / ".next", root / "site")
            deployed = {f"site/v{version}.md"}
            wait_for(lambda: find(d.db, root, "narwhal") == deployed)  # noqa: B023
            time.sleep(0.5)
        (root / "site/deep/d.md").write_text("# D\n\nzebra\n", encoding="utf-8")
        (root / "site/new.md").write_text("# New\n\nzebra\n", encoding="utf-8")
        want = {"site/deep/d.md", "site/new.md"}
        wait_for(lambda: find(d.db, root, "zebra") == want, timeout=15)
        _wait_idle(d)
        _assert_equal_to_fresh_build(d, tmp_path)


def test_a_folder_made_and_moved_away_while_another_takes_its_name_stays_watched(
    tmp_path: Path,
) -> None:
    """`mkdir tmp && mv tmp out && mkdir tmp`, quicker than watchdog reads its events (a tool
    that publishes a folder by renaming it and makes a new one in its place): watchdog watched
    the second `tmp` when it saw the first one made, then moved that watch's record to `out`
    and back to `tmp` when it saw the second one made. `out` had no watch at all: nothing
    written there was ever indexed, and status said nothing."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n"})
    with running_daemon(root, tmp_path / "idx" / "index.db") as d:
        for i in range(5):
            os.mkdir(root / f"tmp{i}")
            os.rename(root / f"tmp{i}", root / f"out{i}")
            os.mkdir(root / f"tmp{i}")
        time.sleep(1.0)  # every event of those is read by now
        for i in range(5):
            (root / f"out{i}" / "x.md").write_text(f"# X\n\nzebra {i}\n", encoding="utf-8")
            (root / f"tmp{i}" / "y.md").write_text(f"# Y\n\nzebra {i}\n", encoding="utf-8")
        want = {f"out{i}/x.md" for i in range(5)} | {f"tmp{i}/y.md" for i in range(5)}
        wait_for(lambda: find(d.db, root, "zebra") == want, timeout=15)
        _wait_idle(d)
        _assert_equal_to_fresh_build(d, tmp_path)


def _inotify_watched(pid: int) -> set[int]:
    """The inodes the inotify instances of process `pid` watch (its /proc fdinfo)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            lines = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines()
        except OSError:  # closed meanwhile
            continue
        for line in lines:
            if line.startswith("inotify wd:"):
                inodes.add(int(line.split("ino:")[1].split()[0], 16))
    return inodes


Race = Callable[[Path], tuple[Path, Callable[[], None], Path]]


def _made_moved_made_removed(root: Path) -> tuple[Path, Callable[[], None], Path]:
    (root / "a").mkdir()
    (root / "a" / "m.md").write_text("# M\n\nnarwhal\n", encoding="utf-8")
    (root / "a").rename(root / "b")
    (root / "a").mkdir()
    return root / "a", (root / "a").rmdir, root / "b"


def _made_moved_made_moved_on(root: Path) -> tuple[Path, Callable[[], None], Path]:
    taken, _, moved = _made_moved_made_removed(root)

    def move_on() -> None:
        taken.rename(root / "c")

    return taken, move_on, moved


def _nested_made_moved_made_removed(root: Path) -> tuple[Path, Callable[[], None], Path]:
    (root / "a" / "sub").mkdir(parents=True)
    (root / "a" / "sub" / "m.md").write_text("# M\n\nnarwhal\n", encoding="utf-8")
    (root / "a").rename(root / "b")
    (root / "a").mkdir()
    return root / "a", (root / "a").rmdir, root / "b" / "sub"


def _moved_twice_middle_name_made_removed(root: Path) -> tuple[Path, Callable[[], None], Path]:
    (root / "a").mkdir()
    (root / "a" / "m.md").write_text("# M\n\nnarwhal\n", encoding="utf-8")
    (root / "a").rename(root / "b")
    (root / "b").rename(root / "c")
    (root / "b").mkdir()
    return root / "b", (root / "b").rmdir, root / "c"


def _made_moved_file_made_removed(root: Path) -> tuple[Path, Callable[[], None], Path]:
    (root / "a").mkdir()
    (root / "a" / "m.md").write_text("# M\n\nnarwhal\n", encoding="utf-8")
    (root / "a").rename(root / "b")
    (root / "a").write_text("not a folder\n", encoding="utf-8")
    return root / "a", (root / "a").unlink, root / "b"


@pytest.mark.parametrize(
    "race",
    [
        _made_moved_made_removed,
        _made_moved_made_moved_on,
        _nested_made_moved_made_removed,
        _moved_twice_middle_name_made_removed,
        _made_moved_file_made_removed,
    ],
    ids=["removed", "moved-on", "nested", "moved-twice", "file"],
)
def test_a_folder_whose_old_name_was_taken_for_a_moment_stays_watched(
    tmp_path: Path, race: Race
) -> None:
    """`mkdir a; mv a b; mkdir a; rmdir a` (or `mv a c` last, or a file taking the name),
    quicker than watchdog reads its events: watchdog, handling 'a was made', watched the second
    `a`; the move carried that watch's record to `b`, and the second `a` took it along when it
    went. `b` had no watch: nothing written there was ever indexed, and status said "watching".
    The fix for `mkdir a; mv a b; mkdir a` looked for a folder at `a` when the move was
    handled, which the last step had removed by then.

    The order is made certain: watchdog is kept reading other events, so it handles 'a was
    made' once the second `a` is there (it is seen watched, in /proc), and the last step
    comes before it hands on the move. `m.md` indexed at its new path says the move was
    handled; a file written beside it afterwards must reach the index too."""
    root = _lib(tmp_path, {"a.md": "# A\n\nwalrus\n", "f/x.txt": "x\n"})
    with running_daemon(root, tmp_path / "idx" / "index.db") as d:
        keep_watchdog_reading(root, 2000)
        taken, finish, moved = race(root)
        second = os.stat(taken).st_ino
        wait_for(lambda: second in _inotify_watched(d.proc.pid), timeout=20, interval=0.001)
        finish()
        marker = str((moved / "m.md").relative_to(root))
        wait_for(lambda: find(d.db, root, "narwhal") == {marker}, timeout=20)
        (moved / "x.md").write_text("# X\n\nzebra\n", encoding="utf-8")
        want = {str((moved / "x.md").relative_to(root))}
        wait_for(lambda: find(d.db, root, "zebra") == want, timeout=15)
        _wait_idle(d)
        _assert_equal_to_fresh_build(d, tmp_path)
