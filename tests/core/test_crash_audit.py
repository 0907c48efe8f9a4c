"""An adversarial audit of the indexing path: real processes, real limits, real files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from markindex_core.library import Library
from markindex_core.store.db import SUMMARY_CACHE_TABLE, Store

from .helpers import REPO_ROOT, make_library


def markindex_limited(nofile: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`markindex ARGS` in a process allowed only `nofile` open files."""
    cmd = ["prlimit", f"--nofile={nofile}", sys.executable, "-m", "markindex_core", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def cached_summary(db: Path) -> str | None:
    store = Store(db, readonly=True)
    try:
        text = store.scalar(f"SELECT text FROM {SUMMARY_CACHE_TABLE} WHERE key='k1'")
        return None if text is None else str(text)
    finally:
        store.close()


def test_a_rebuild_out_of_file_descriptors_never_drops_cached_summaries(tmp_path: Path) -> None:
    """Summaries are paid for; a rebuild keeps them unless the old file is damaged. With too few
    descriptors to open the old index, the rebuild went on without them ("cached summaries not
    kept") and swapped in an index that had lost them all."""
    root = make_library(tmp_path / "lib", 8)
    db = tmp_path / "db" / "index.db"
    Library(root, db).index(workers=0)
    store = Store(db)
    with store.conn:
        store.conn.execute(
            f"INSERT INTO {SUMMARY_CACHE_TABLE}(key, model, text, created_at) VALUES(?,?,?,?)",
            ("k1", "test:model", "a paid-for summary", 1.0),
        )
    store.close()
    for nofile in range(6, 13):  # every limit from "cannot start" to "enough"
        done = markindex_limited(nofile, "index", str(root), "--db", str(db), "--rebuild")
        assert "Traceback" not in done.stderr, done.stderr
        assert cached_summary(db) == "a paid-for summary", (nofile, done.stderr)
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
