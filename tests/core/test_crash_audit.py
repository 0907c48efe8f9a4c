"""An adversarial audit of the indexing path: real processes, real limits, real files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from markindex_core.library import Library

from .helpers import REPO_ROOT, make_library


def markindex_limited(nofile: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`markindex ARGS` in a process allowed only `nofile` open files."""
    cmd = ["prlimit", f"--nofile={nofile}", sys.executable, "-m", "markindex_core", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


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
