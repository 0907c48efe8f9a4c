"""An adversarial audit of the indexing path: real processes, real limits, real files."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from markindex_core.errors import LibraryNotFound
from markindex_core.library import Library
from tests.disks import small_tmpfs

from .helpers import (
    PAID_SUMMARY,
    REPO_ROOT,
    cache_a_summary,
    cached_summary,
    check_store_consistent,
    make_library,
    markindex,
    write,
)


def markindex_limited(nofile: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`markindex ARGS` in a process allowed only `nofile` open files."""
    cmd = ["prlimit", f"--nofile={nofile}", sys.executable, "-m", "markindex_core", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_a_rebuild_out_of_file_descriptors_never_drops_cached_summaries(tmp_path: Path) -> None:
    """Summaries are paid for; a rebuild keeps them unless the old file is damaged. With too few
    descriptors to open the old index, the rebuild went on without them ("cached summaries not
    kept") and swapped in an index that had lost them all."""
    root = make_library(tmp_path / "lib", 8)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    cache_a_summary(db)
    for nofile in range(6, 13):  # every limit from "cannot start" to "enough"
        done = markindex_limited(nofile, "index", str(root), "--db", str(db), "--rebuild")
        assert "Traceback" not in done.stderr, done.stderr
        assert cached_summary(db) == PAID_SUMMARY, (nofile, done.stderr)
        assert done.returncode == 0 or "ran out of file descriptors" in done.stderr, done.stderr


def test_a_library_listed_out_of_file_descriptors_is_not_called_unreadable(
    tmp_path: Path,
) -> None:
    """With the descriptors all taken by the index when the library is listed, the error said
    "cannot list the library folder: Too many open files" and hinted `chmod u+rx`."""
    root = make_library(tmp_path / "lib", 8)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    for nofile in range(5, 13):
        done = markindex_limited(nofile, "index", str(root), "--db", str(db), "--rebuild")
        assert "Traceback" not in done.stderr, done.stderr
        assert "chmod" not in done.stderr, (nofile, done.stderr)
        if done.returncode != 0:
            assert "ran out of file descriptors" in done.stderr, done.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 13 MiB tmpfs, when this process may mount one."""
    with small_tmpfs(tmp_path / "disk", "13m") as mnt:
        yield mnt


def test_an_update_that_fills_the_disk_says_so(tmp_path: Path, small_disk: Path) -> None:
    """SQLite rolls a transaction back itself when the disk fills mid-statement (a batch larger
    than the page cache spills to the WAL); leaving the `with conn:` block then failed to roll
    back again, and that error ('cannot use the index: cannot rollback - no transaction is
    active', hint 'check the file') was all the user saw of a full disk."""
    root = tmp_path / "lib"
    for i in range(120):  # 400 short sections each: a batch dirties more pages than the cache
        body = "\n\n".join(f"## S{j}\n\nwords apple {i} {j} " * 20 for j in range(20))
        write(root, f"d{i}.md", f"# Doc {i}\n\n{body}\n")
    db = small_disk / "index.db"
    first = markindex("index", str(root), "--db", str(db))
    assert first.returncode == 0, first.stderr
    more = " ".join(f"grape{i}" for i in range(3000))
    for p in sorted(root.glob("*.md")):
        p.write_text(p.read_text(encoding="utf-8") + f"\n## More\n\n{more}\n", encoding="utf-8")
    done = markindex("index", str(root), "--db", str(db))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"no space left to write the index {db}" in done.stderr, done.stderr
    assert check_store_consistent(db) == 120
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True, timeout=30)
    again = markindex("index", str(root), "--db", str(db))
    assert again.returncode == 0, again.stderr
    assert check_store_consistent(db) == 120


def test_a_full_disk_met_by_a_reader_is_said_for_a_reader(tmp_path: Path, small_disk: Path) -> None:
    """Reading the index needs its -shm file; on a full disk search and check said 'no space
    left to write the index … run the same `markindex index` command again', and status said
    'not indexed' of an index of 30 documents."""
    root = make_library(tmp_path / "lib", 30)
    db = small_disk / "index.db"
    assert markindex("index", str(root), "--db", str(db)).returncode == 0
    for side in ("index.db-shm", "index.db-wal"):
        (small_disk / side).unlink(missing_ok=True)
    # Every block of the disk taken; unbuffered, so closing the file has nothing left to write
    # (a buffered tail failed again on close, depending on where the disk filled).
    with (small_disk / "fill").open("wb", buffering=0) as fill, contextlib.suppress(OSError):
        while True:
            fill.write(b"\0" * 65536)
    for command in (["search", str(root), "apple"], ["check", str(root)]):
        done = markindex(*command, "--db", str(db))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "no space left on the disk of the index" in done.stderr, done.stderr
        assert "markindex index" not in done.stderr, done.stderr
    status = markindex("status", str(root), "--db", str(db))
    assert status.returncode == 1, status.stderr
    assert "cannot read the index: no space left" in status.stdout, status.stdout


def test_a_library_folder_gone_mid_run_keeps_its_documents(tmp_path: Path) -> None:
    """Each file of a library folder moved away (or a share unmounted) while a run read it
    was taken for a file deleted since the scan: the run removed every document it had not
    reached yet, and said 'removed 254' with exit status 0."""
    root = make_library(tmp_path / "lib", 30)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    for p in root.rglob("*.md"):
        p.write_text(p.read_text(encoding="utf-8") + "\nedited\n", encoding="utf-8")
    away = tmp_path / "away"

    def move_away(done: int, total: int, path: str) -> None:
        if done == 1:
            root.rename(away)

    with pytest.raises(LibraryNotFound, match="went away while it was indexed"):
        Library(root, db).index(progress=move_away, workers=0)
    away.rename(root)
    assert check_store_consistent(db) == 30
    assert Library(root, db).index(workers=0).removed == []
    assert check_store_consistent(db) == 30


def test_a_library_folder_gone_mid_scan_keeps_its_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same during the scan: folders not listed yet were 'gone since their parent was
    listed', so their documents were removed as deleted."""
    root = make_library(tmp_path / "lib", 30)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    away = tmp_path / "away"
    real_scandir = os.scandir

    def scandir_then_move(path: Any) -> Any:
        entries = real_scandir(path)  # open: it lists the folder it opened wherever it goes
        if root in Path(path).parents and root.exists():
            root.rename(away)  # the library folder listed, the first of its folders opened
        return entries

    monkeypatch.setattr(os, "scandir", scandir_then_move)  # as scan.py calls it
    with pytest.raises(LibraryNotFound, match="went away while it was indexed"):
        Library(root, db).index(workers=0)
    monkeypatch.undo()
    away.rename(root)
    assert check_store_consistent(db) == 30


def test_a_library_folder_gone_before_its_listing_is_not_a_permission_matter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gone just before the scan listed it, it was 'cannot list the library folder: No such
    file or directory', with the hint to chmod a folder that was not there."""
    root = make_library(tmp_path / "lib", 8)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    real_scandir = os.scandir

    def move_then_scandir(path: Any) -> Any:
        if Path(path) == root and root.exists():
            root.rename(tmp_path / "away")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", move_then_scandir)  # as scan.py calls it
    with pytest.raises(LibraryNotFound, match="went away while it was indexed"):
        Library(root, db).index(workers=0)
    monkeypatch.undo()
    assert check_store_consistent(db) == 8


@pytest.mark.parametrize("flag", ["--rebuild", "--no-setext"])
def test_a_rebuild_over_the_file_size_limit_names_the_limit(tmp_path: Path, flag: str) -> None:
    """A plain run names the limit (test_errors); a rebuild said 'cannot use the index: disk
    I/O error (hint: check the file, its folder and the disk)': the errno that tells EFBIG
    from a bad disk went with the connection of the new file, closed before it was asked."""
    root = make_library(tmp_path / "lib", 40)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    cmd = ["prlimit", "--fsize=200000", sys.executable, "-m", "markindex_core"]
    done = subprocess.run(
        [*cmd, "index", str(root), "--db", str(db), flag],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "reached the file size limit of 200,000 bytes" in done.stderr, done.stderr
    assert check_store_consistent(db) == 40
