"""A daemon whose status file beside the index can't be replaced (made immutable here: a read-only
mount or a folder in its place fail the same way) is still judged by what it does: alive while it
runs, stopped when it stopped; and the failure is said, in its log and in `markindex status`.

It used to be logged at debug level only: the frozen heartbeat made `status` (exit 2), every
tool envelope, `markindex search` and the terminal app call a healthy daemon hung, and a clean
stop a kill."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from markindex_core.library import Library
from markindex_core.serve.publish import NO_PROBLEM, StatusFile
from markindex_core.serve.status import (
    STALE_AFTER_S,
    DaemonWatch,
    fallback_path,
    read_status,
    read_status_beside,
    status_path,
)
from tests.unprivileged import AS_NOBODY, CHILD_ENV

from .helpers import DaemonProcess, find, make_lib, wait_for

PROBLEM = "cannot update the status file"


def _cli(root: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "markindex_core", *args[:1], str(root), *args[1:], "--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _status(
    root: Path, db: Path, prefix: list[str] | None = None, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str, int]:
    """`markindex status --json`, its human text and its exit code (run through `prefix`)."""
    cmd = [*(prefix or []), sys.executable, "-m", "markindex_core", "status", str(root)]
    env = env or (CHILD_ENV if prefix else None)
    runs = [
        subprocess.run([*cmd, "--db", str(db), *flag], capture_output=True, text=True, env=env)
        for flag in (["--json"], [])
    ]
    return json.loads(runs[0].stdout), runs[1].stdout, runs[1].returncode


def _chattr(path: Path, flag: str) -> bool:
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def frozen(tmp_path: Path) -> Any:
    """Makes the status file immutable (`chattr +i`); undone at the end, also on failure."""
    made: list[Path] = []

    def freeze(path: Path) -> None:
        if not _chattr(path, "+i"):
            pytest.skip("chattr +i is not available here")
        made.append(path)

    yield freeze
    for path in made:
        _chattr(path, "-i")


def test_a_daemon_that_cannot_update_its_status_file_is_alive_and_says_why(
    tmp_path: Path, frozen: Any
) -> None:
    root = make_lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    try:
        d.wait_writing()
        frozen(status_path(db))
        (root / "a.md").write_text("# A\n\nbravo\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "bravo"), timeout=20)  # it keeps indexing
        beat = d.status()["heartbeat_at"]
        wait_for(lambda: time.time() - beat > STALE_AFTER_S + 1, timeout=STALE_AFTER_S + 5)

        st, text, code = _status(root, db)
        daemon = st["daemon"]
        assert daemon["pid"] == d.proc.pid and daemon["alive"] and daemon["writing"], daemon
        assert not daemon["unresponsive"] and not st["not_updating"] and code == 0, st
        assert PROBLEM in daemon["status_file_error"], daemon
        assert "Operation not permitted" in daemon["status_file_error"], daemon
        assert "chattr -i" in daemon["status_file_hint"], daemon
        assert f"daemon: pid {d.proc.pid}, writing" in text, text
        assert "has not responded" not in text and PROBLEM in " ".join(text.split()), text
        assert DaemonWatch(db)() is None  # tool envelopes of a plain `markindex mcp`
        search = _cli(root, db, "search", "bravo")
        assert search.returncode == 0 and "warning" not in search.stderr, search.stderr
        # Said once in the log, as a warning, not at every heartbeat.
        assert d.log.count(PROBLEM) == 1 and "WARNING" in d.log, d.log

        _chattr(status_path(db), "-i")  # writable again: it clears by itself
        wait_for(lambda: not _status(root, db)[0]["daemon"]["status_file_error"], timeout=10)
        st, text, code = _status(root, db)
        assert st["daemon"]["alive"] and code == 0 and PROBLEM not in text, text
        assert d.status()["pid"] == d.proc.pid and d.status()["status_file_error"] is None
        assert "the status file is updated again" in d.log, d.log
    finally:
        _chattr(status_path(db), "-i")
        assert d.stop() == 0, d.log


def test_a_clean_stop_is_not_taken_for_a_kill_while_the_status_file_is_frozen(
    tmp_path: Path, frozen: Any
) -> None:
    """The status file still says `watching` after the stop: the daemon's record says how it
    really ended, a clean stop or a kill."""
    root = make_lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    frozen(status_path(db))
    wait_for(lambda: PROBLEM in d.log, timeout=10)
    assert d.stop() == 0, d.log
    assert d.status()["state"] == "watching"  # the file beside the index could not be told
    st, text, code = _status(root, db)
    assert st["daemon"]["state"] == "stopped" and not st["daemon"]["ended"], st
    assert not st["not_updating"] and code == 0, st
    assert "daemon: not running" in text and "ended without stopping" not in text, text
    assert PROBLEM in " ".join(text.split()), text
    assert DaemonWatch(db)() is None

    # A kill is still a kill: the next daemon's record says `watching`, its process is gone.
    killed = DaemonProcess(root, db)
    lib = Library(root, db)
    try:
        wait_for(lambda: (read_status(lib)["daemon"] or {}).get("pid") == killed.proc.pid, 20)
        wait_for(lambda: read_status(lib)["daemon_writing"], timeout=20)
    finally:
        lib.close()
        killed.stop(signal.SIGKILL)
    st, text, code = _status(root, db)
    assert st["daemon"]["pid"] == killed.proc.pid and st["daemon"]["ended"], st
    assert f"daemon pid {killed.proc.pid} ended without stopping" in text and code == 2, text


def test_readers_without_its_record_see_a_daemon_whose_status_file_is_frozen_as_it_is(
    shared_tmp: Path, tmp_path: Path, frozen: Any
) -> None:
    """Another user (`nobody` here), and this user with the runtime folder pointed elsewhere,
    cannot see the daemon's record: they read the fallback status file beside the index. They
    took the daemon for hung (`status` exit 2, "has not responded"), and a clean stop for a kill."""
    root = make_lib(shared_tmp, {"a.md": "# A\n\nalpha\n"})
    db = shared_tmp / "idx" / "index.db"
    db.parent.mkdir()
    db.parent.chmod(0o777)  # `nobody` makes the index's -shm file once no daemon keeps one
    elsewhere = tmp_path / "runtime"
    elsewhere.mkdir(mode=0o700)
    env = {**CHILD_ENV, "XDG_RUNTIME_DIR": str(elsewhere), "TMPDIR": str(elsewhere)}
    readers: list[tuple[list[str], dict[str, str]]] = [(AS_NOBODY, CHILD_ENV), ([], env)]
    d = DaemonProcess(root, db)
    try:
        d.wait_writing()
        frozen(status_path(db))
        wait_for(lambda: PROBLEM in d.log, timeout=10)
        time.sleep(STALE_AFTER_S + 1)
        for prefix, reader_env in readers:
            st, text, code = _status(root, db, prefix, reader_env)
            daemon = st["daemon"]
            assert daemon["pid"] == d.proc.pid and daemon["alive"] and daemon["writing"], st
            assert not daemon["unresponsive"] and code == 0, text
            assert "chattr -i" in daemon["status_file_hint"], daemon
            assert "has not responded" not in text and PROBLEM in " ".join(text.split()), text
    finally:
        assert d.stop() == 0, d.log
    for prefix, reader_env in readers:
        st, text, code = _status(root, db, prefix, reader_env)
        assert st["daemon"]["state"] == "stopped" and not st["daemon"]["ended"], st
        assert "daemon: not running" in text and code == 0, text


def test_the_fallback_file_stands_in_for_a_stuck_status_file_until_it_is_written_again(
    tmp_path: Path,
) -> None:
    """Readers take the later of the two; the hint warns of other users only when the fallback
    can't be written either."""
    db = tmp_path / "index.db"
    status_path(db).mkdir()
    problem = StatusFile(db).write({"pid": 7, "heartbeat_at": 2.0})
    assert "Is a directory" in str(problem["status_file_error"]), problem
    assert "other users" not in str(problem["status_file_hint"]), problem
    assert read_status_beside(db) == {"pid": 7, "heartbeat_at": 2.0, **problem}

    status_path(db).rmdir()
    status_file = StatusFile(db)
    assert status_file.write({"pid": 8, "heartbeat_at": 3.0})["status_file_error"] is None
    assert not fallback_path(db).exists()  # the next daemon's first good write removes it
    assert read_status_beside(db) == {"pid": 8, "heartbeat_at": 3.0, **NO_PROBLEM}

    status_path(db).unlink()
    status_path(db).mkdir()
    fallback_path(db).mkdir()
    hint = status_file.write({"pid": 8, "heartbeat_at": 4.0})["status_file_hint"]
    assert "other users see this daemon as hung" in str(hint), hint


def test_a_folder_in_place_of_the_status_file_is_said_and_clears(tmp_path: Path) -> None:
    """Readers skip a folder there and find the daemon's record; the daemon said nothing."""
    root = make_lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()
    status_path(db).mkdir()
    d = DaemonProcess(root, db)
    try:
        wait_for(lambda: _status(root, db)[0]["daemon_writing"], timeout=20)
        st, text, code = _status(root, db)
        assert st["daemon"]["pid"] == d.proc.pid and code == 0, st
        assert "Is a directory" in st["daemon"]["status_file_error"], st["daemon"]
        assert "a folder is in its place" in st["daemon"]["status_file_hint"], st["daemon"]
        assert PROBLEM in " ".join(text.split()), text
        status_path(db).rmdir()
        d.wait_writing()  # the file is back
        wait_for(lambda: not _status(root, db)[0]["daemon"]["status_file_error"], timeout=10)
        assert d.log.count(PROBLEM) == 1, d.log
    finally:
        assert d.stop() == 0, d.log


def test_an_index_folder_made_read_only_under_the_daemon_keeps_its_status_file_live(
    shared_tmp: Path,
) -> None:
    """The daemon (run as `nobody`) keeps indexing in a folder it may no longer write, and
    rewrites its status file in place: another user (root here), who cannot see its record,
    saw it as hung."""
    root = make_lib(shared_tmp, {"a.md": "# A\n\nalpha\n"})
    db = shared_tmp / "idx" / "index.db"
    db.parent.mkdir()
    shutil.chown(db.parent, "nobody", "nogroup")
    d = DaemonProcess(root, db, prefix=AS_NOBODY, log_dir=shared_tmp)
    try:
        d.wait_writing()
        db.parent.chmod(0o555)
        (root / "a.md").write_text("# A\n\nbravo\n", encoding="utf-8")
        wait_for(lambda: find(db, root, "bravo"), timeout=20)  # it keeps indexing
        time.sleep(STALE_AFTER_S + 1)
        for prefix in (None, AS_NOBODY):  # another user, and the daemon's own
            st, text, code = _status(root, db, prefix)
            daemon = st["daemon"]
            assert daemon["pid"] == d.proc.pid and daemon["alive"] and daemon["writing"], st
            assert daemon["heartbeat_age"] < STALE_AFTER_S and code == 0, daemon
            assert not daemon["status_file_error"] and "has not responded" not in text, text
        assert PROBLEM not in d.log, d.log
    finally:
        db.parent.chmod(0o755)
        assert d.stop() == 0, d.log
