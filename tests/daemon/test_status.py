"""`markindex status` tells the truth about every live daemon of an index, also one that may not
write: waiting for the writer lock, or unable to write the index folder at all."""

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

from markindex_core.library import Library
from markindex_core.serve.status import STALE_AFTER_S, DaemonWatch, read_status, status_path
from markindex_core.store.db import Store
from markindex_core.store.lock import WriterLock
from tests.unprivileged import AS_NOBODY, CHILD_ENV

from .helpers import DaemonProcess, find, keep_watchdog_reading, wait_for
from .helpers import make_lib as _lib


def _status(root: Path, db: Path, *, prefix: list[str] | None = None) -> tuple[dict[str, Any], str]:
    """`markindex status --json` and the human text, run as the daemon's user."""
    base = [*(prefix or []), sys.executable, "-m", "markindex_core", "status", str(root)]
    env = CHILD_ENV if prefix else None
    runs = [
        subprocess.run([*base, "--db", str(db), *flag], capture_output=True, text=True, env=env)
        for flag in (["--json"], [])
    ]
    return json.loads(runs[0].stdout), runs[1].stdout


def _status_code(root: Path, db: Path) -> int:
    """The exit code of `markindex status`: 2 while the live index has stopped updating."""
    cmd = [sys.executable, "-m", "markindex_core", "status", str(root), "--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60).returncode


def _search(root: Path, db: Path, query: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`markindex search ROOT QUERY --db DB [extra]`, as a user runs it beside the daemon."""
    cmd = [sys.executable, "-m", "markindex_core", "search", str(root), query, "--db", str(db)]
    return subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=60)


def test_a_daemon_waiting_for_the_writer_lock_is_shown_alive(tmp_path: Path) -> None:
    """Another process (a long `markindex index`) holds the lock: the daemon serves read-only and
    status says so, with the holder's pid, instead of "no daemon"."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()
    other = WriterLock(db)
    assert other.try_acquire()
    d = DaemonProcess(root, db)
    try:
        wait_for(lambda: "serving read-only" in d.log)
        st, text = wait_for(lambda: (s := _status(root, db))[0]["daemon"] and s, timeout=10)
        daemon = st["daemon"]
        assert daemon["pid"] == d.proc.pid and daemon["alive"] and not daemon["writing"]
        assert daemon["state"] == "read-only"
        assert daemon["reason"] == f"waiting for the writer lock held by pid {os.getpid()}"
        assert st["writer_locked"] and not st["daemon_writing"] and st["other_daemons"] == []
        assert "no daemon" not in text, text
        assert f"daemon: pid {d.proc.pid}, read-only" in text, text
        assert f"waiting for the writer lock held by pid {os.getpid()}" in text, text
        other.release()
        d.wait_writing()
        st, text = _status(root, db)
        assert st["daemon"]["writing"] and st["daemon"]["reason"] is None
        assert f"daemon: pid {d.proc.pid}, writing" in text, text
    finally:
        other.release()
        assert d.stop() == 0, d.log
    st, text = _status(root, db)
    assert not st["daemon"]["alive"] and st["other_daemons"] == []
    assert "daemon: not running" in text, text


def test_a_second_daemon_is_shown_beside_the_writing_one(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    first = DaemonProcess(root, db)
    second: DaemonProcess | None = None
    try:
        first.wait_writing()
        second = DaemonProcess(root, db)
        wait_for(lambda: "serving read-only" in second.log)
        st, text = wait_for(lambda: (s := _status(root, db))[0]["other_daemons"] and s, timeout=10)
        assert st["daemon"]["pid"] == first.proc.pid and st["daemon"]["writing"]
        [waiting] = st["other_daemons"]
        assert waiting["pid"] == second.proc.pid and waiting["alive"] and not waiting["writing"]
        assert waiting["reason"] == f"waiting for the writer lock held by pid {first.proc.pid}"
        assert f"daemon: pid {first.proc.pid}, writing" in text, text
        assert f"daemon: pid {second.proc.pid}, read-only" in text, text
        assert first.stop() == 0, first.log
        second.wait_writing()
        st, _ = _status(root, db)
        assert st["daemon"]["pid"] == second.proc.pid and st["other_daemons"] == []
    finally:
        first.stop()
        if second is not None:
            assert second.stop() == 0, second.log


def test_a_daemon_that_cannot_write_the_index_folder_is_shown_retrying(shared_tmp: Path) -> None:
    """Run as `nobody` with the index in a folder only root may write: nothing can be written
    beside the index, yet status (run by the same user) shows the daemon alive and why."""
    root = _lib(shared_tmp, {"a.md": "# A\n\nalpha\n"})
    db = shared_tmp / "idx" / "index.db"
    Library(root, db).index()  # as root: the folder and the index stay root's
    d = DaemonProcess(root, db, prefix=AS_NOBODY, log_dir=shared_tmp)
    try:
        st, text = wait_for(
            lambda: (s := _status(root, db, prefix=AS_NOBODY))[0]["daemon"] and s, timeout=15
        )
        daemon = st["daemon"]
        assert daemon["pid"] == d.proc.pid and daemon["alive"] and not daemon["writing"]
        assert daemon["state"] == "retrying" and "read-only" in daemon["reason"]
        assert "chmod" in daemon["hint"]
        assert not (db.parent / (db.name + ".daemon.json")).exists()
        assert "not running" not in text, text
        assert f"daemon: pid {d.proc.pid}, not writing, retrying" in text, text
        assert "read-only" in text, text
        # Writable again: it writes by itself, and says so.
        for p in (db.parent, db, WriterLock(db).path):
            os.chmod(p, 0o777)
        wait_for(lambda: _status(root, db, prefix=AS_NOBODY)[0]["daemon_writing"], timeout=40)
    finally:
        assert d.stop() == 0, d.log


def test_a_fifo_or_a_huge_file_in_place_of_the_status_file_hangs_nothing(tmp_path: Path) -> None:
    """The status file is read by `status`, the terminal app and every tool call of a plain MCP
    server: a FIFO there must not block them, nor a 2 MB file be read whole."""
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()
    os.mkfifo(status_path(db))
    cmd = [sys.executable, "-m", "markindex_core", "status", str(root), "--db", str(db), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and json.loads(out.stdout)["daemon"] is None, out.stderr
    status_path(db).unlink()
    status_path(db).write_text('{"pid": 1, "state": "watching"' + " " * (2 << 20) + "}")
    assert read_status(Library(root, db))["daemon"] is None


def test_cli_search_warns_while_the_daemon_cannot_write(tmp_path: Path) -> None:
    """`markindex search` beside a live daemon that cannot write: results come with a warning
    naming the daemon (stderr, and `warning` in --json); none once it writes again."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    Library(root, db).index()

    def chattr(flag: str) -> bool:
        return subprocess.run(["chattr", flag, str(db)], capture_output=True).returncode == 0

    def search(*extra: str) -> subprocess.CompletedProcess[str]:
        return _search(root, db, "alpha", *extra)

    if not chattr("+i"):
        pytest.skip("chattr +i is not available here")
    d = DaemonProcess(root, db)
    try:
        wait_for(
            lambda: (read_status(Library(root, db))["daemon"] or {}).get("state") == "retrying", 20
        )
        data = json.loads(search("--json").stdout)
        assert data["hits"] and f"daemon pid {d.proc.pid}" in data["warning"]
        assert "not updating" in search().stderr
        assert _status_code(root, db) == 2
        chattr("-i")
        wait_for(lambda: "warning" not in json.loads(search("--json").stdout), 30)
    finally:
        chattr("-i")
        d.stop()


def test_a_frozen_daemon_holding_the_writer_lock_is_not_taken_for_another_writer(
    tmp_path: Path,
) -> None:
    """A daemon stopped with SIGSTOP (a suspended job) or hung keeps the writer lock and stops
    its heartbeat: nothing updates the index. Status and a plain `markindex mcp` beside it must
    say so, not "no daemon; another process is writing the index" and no warning at all."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    try:
        d.wait_writing()
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            (root / "a.md").write_text("# A\n\nbravo\n", encoding="utf-8")  # never indexed

            def frozen() -> tuple[dict[str, Any], str] | None:
                st, text = _status(root, db)
                return (st, text) if st["daemon"] and not st["daemon"]["alive"] else None

            st, text = wait_for(frozen, timeout=STALE_AFTER_S + 5, interval=0.5)
            assert st["daemon"]["pid"] == d.proc.pid and st["daemon"]["unresponsive"], st
            assert "no daemon" not in text and "another process" not in text, text
            assert f"daemon: pid {d.proc.pid} holds the writer lock but has not responded" in text
            warning = DaemonWatch(db)()
            assert warning and "the live index is not updating" in warning, warning
            assert f"pid {d.proc.pid}" in warning, warning
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        d.wait_settled(0)
        wait_for(lambda: (s := _status(root, db)[0])["daemon"]["alive"] and s, timeout=10)
        st, text = _status(root, db)
        assert not st["daemon"]["unresponsive"] and "has not responded" not in text, text
        assert DaemonWatch(db)() is None
    finally:
        assert d.stop() == 0, d.log


def test_a_killed_daemon_is_said_until_another_writer_takes_over(tmp_path: Path) -> None:
    """A daemon killed (SIGKILL, the OOM killer) or crashed leaves its status file saying
    `watching`: status, `markindex search` and a plain `markindex mcp` beside it must say the
    index is no longer live, not "daemon: not running" and answers without a word. A later
    `markindex index` brings the index up to date: from then on it is a static index again."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"

    def search() -> subprocess.CompletedProcess[str]:
        return _search(root, db, "alpha")

    d = DaemonProcess(root, db)
    d.wait_writing()
    d.stop(signal.SIGKILL)
    (root / "a.md").write_text("# A\n\nalpha bravo\n", encoding="utf-8")  # never indexed
    # At once: its process is gone (it used to wait for the heartbeat to go stale, ~6 s).
    st, text = _status(root, db)
    assert st["daemon"]["ended"], st
    assert not st["daemon"]["alive"], st
    assert f"daemon pid {d.proc.pid} ended without stopping (killed or crashed" in text, text
    assert "no longer kept live" in text and "not running" not in text, text
    warning = DaemonWatch(db)()
    assert warning and "the live index has stopped updating" in warning, warning
    assert f"pid {d.proc.pid}" in warning and "markindex daemon" in warning, warning
    assert "ended without stopping" in " ".join(search().stderr.split())
    assert st["not_updating"] and _status_code(root, db) == 2  # for health checks

    Library(root, db).index()  # another writer brings the index up to date
    st, text = _status(root, db)
    assert not st["daemon"]["ended"] and "daemon: not running" in text, (st, text)
    assert not st["not_updating"] and _status_code(root, db) == 0
    assert DaemonWatch(db)() is None
    assert "warning" not in search().stderr


def test_a_daemon_stopped_cleanly_leaves_a_static_index_and_no_warning(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    assert d.stop() == 0, d.log
    st, text = _status(root, db)
    assert st["daemon"]["state"] == "stopped" and not st["daemon"]["ended"], st
    assert "daemon: not running" in text, text
    assert DaemonWatch(db)() is None


def test_a_daemon_stopped_with_changes_pending_says_they_are_not_indexed(tmp_path: Path) -> None:
    """A stop (SIGTERM) in the middle of a burst drops what the daemon saw but had not indexed:
    status said "stopped", exit 0, and answers came without a word while the index missed
    thousands of changes."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    for i in range(3000):  # a checkout: more than one reconcile's worth of quick work
        (root / f"n{i}.md").write_text(f"# N{i}\n\nbravo {i}\n", encoding="utf-8")
    wait_for(lambda: d.status().get("busy"), timeout=10)
    assert d.stop() == 0, d.log
    st, text = _status(root, db)
    assert st["daemon"]["ended"] and st["not_updating"], st
    assert "changed paths not yet indexed" in st["daemon"]["state"], st
    assert "no longer kept live" in " ".join(text.split()) and _status_code(root, db) == 2, text
    assert "not yet indexed" in " ".join(_search(root, db, "alpha").stderr.split())
    Library(root, db).index()  # indexed now: a static index again
    assert _status_code(root, db) == 0 and "warning" not in _search(root, db, "bravo").stderr


def _idle(st: dict[str, Any]) -> bool:
    """What a status reader takes for "up to date"."""
    return st.get("state") == "watching" and not st.get("busy") and st.get("queue") == 0


def test_status_says_the_daemon_is_catching_up_while_a_burst_is_read(tmp_path: Path) -> None:
    """A burst of renames is made far quicker than watchdog reads it (7000 here: 0.3 s to make,
    about 3 s to read), and until its events reach the daemon nothing showed them: status said
    "watching", queue 0, no warning, while a Markdown file written last was not indexed.

    Every status published after the burst must say the daemon is behind (its queue holds
    the events still to be read) until that file is indexed, and one published while the burst
    was read says how many and since when. (A status is judged by when it was published,
    before the index was seen without the file.) Past DAEMON_SLOW_RECONCILE_S of it, answers
    and `markindex status` warn that it is catching up (see
    test_stale_warning_says_what_keeps_the_index_behind). 7000 renames make 14 000 events:
    under the kernel's default queue of 16 384, so none is lost."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n", "f/x.txt": "x\n"})
    d = DaemonProcess(root, tmp_path / "idx" / "index.db")
    d.wait_writing()
    beat = d.status()["heartbeat_at"]
    # A heartbeat just now: the next, DAEMON_HEARTBEAT_S away, comes while the burst is read,
    # and with nothing else to publish that is all a reader saw then.
    wait_for(lambda: d.status()["heartbeat_at"] > beat, timeout=10)
    began = time.time()
    keep_watchdog_reading(root, 7000)
    (root / "last.md").write_text("# Last\n\nbravo\n", encoding="utf-8")
    ended = time.time()
    seen: list[dict[str, Any]] = []
    false_claims: list[dict[str, Any]] = []

    def indexed() -> bool:
        looked = time.time()
        if find(d.db, root, "bravo") == {"last.md"}:
            return True
        st = d.status()
        if st["heartbeat_at"] >= began:
            seen.append(st)
        if ended + 0.01 <= st["heartbeat_at"] <= looked and _idle(st):
            false_claims.append(st)
        return False

    try:
        wait_for(indexed, timeout=60, interval=0.05)
    finally:
        assert d.stop() == 0, d.log
    assert not false_claims, false_claims[0]
    behind = [st for st in seen if st.get("events_waiting") and st["queue"] > 0]
    assert behind and behind[0]["events_waiting_since"] >= began, seen[-1:]


def test_a_daemon_stopped_while_a_burst_is_read_says_it_was_not_read(tmp_path: Path) -> None:
    """A stop while watchdog still read a burst drops the events it had not handed on: status
    said "stopped", exit 0, as if the index had all of them."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n", "f/x.txt": "x\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    keep_watchdog_reading(root, 7000)
    (root / "last.md").write_text("# Last\n\nbravo\n", encoding="utf-8")
    wait_for(lambda: d.status().get("events_waiting"), timeout=10)
    assert d.stop() == 0, d.log
    st, text = _status(root, db)
    assert "file events not yet read" in st["daemon"]["state"], st
    assert st["daemon"]["ended"] and st["not_updating"], st
    assert "no longer kept live" in " ".join(text.split()) and _status_code(root, db) == 2, text


def test_a_daemon_stopped_while_a_big_file_parses_stops_at_once(tmp_path: Path) -> None:
    """A big file used to be parsed in the daemon's own process, which a stop cannot interrupt:
    the stop gave up waiting after 20 s, freed the writer lock, and the parse then committed the
    old content over what another writer had written since. Now such a file is parsed in a
    worker, which a stop ends at once."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    item = "- [a](b)\n  > q\n  ```\n  c\n  ```\n"  # lists of quotes and code: a slow parse
    (root / "big.md").write_text("# Big\n\n" + item * 80_000, encoding="utf-8")  # ~2.6 MB
    wait_for(lambda: d.status().get("busy"), timeout=10)
    t0 = time.monotonic()
    assert d.stop() == 0, d.log
    assert time.monotonic() - t0 < 10, d.log
    assert "still busy" not in d.log, d.log
    st, _ = _status(root, db)
    assert "not yet indexed" in st["daemon"]["state"] and not st["writer_locked"], st
    (root / "big.md").write_text("# Big\n\nsmall now\n", encoding="utf-8")
    Library(root, db).index()
    assert Library(root, db).search("small").hits  # nothing overwrote it


def test_stale_warning_says_what_keeps_the_index_behind() -> None:
    """The one rule behind tool envelopes, `search` and the terminal app's status line."""
    import time

    from markindex_core.serve.status import not_updating, stale_warning

    now = time.time()
    base = {"state": "watching", "reconciles": 3, "last_reconcile_at": now - 60}
    assert stale_warning(base) is None
    quick = {**base, "state": "reconciling", "last_reconcile_started_at": now - 1}
    assert stale_warning(quick) is None  # keeping up with edits is not being behind
    slow = {**quick, "last_reconcile_started_at": now - 40, "progress": {"done": 7, "total": 900}}
    assert "catching up" in (w := stale_warning(slow) or "") and "7 of 900 files" in w
    failing = {**base, "state": "retrying", "reason": "disk full", "hint": "free space"}
    assert "not updating: disk full (free space)" in (stale_warning(failing) or "")
    assert "stopped updating" in (stale_warning({**base, "state": "stopped: gone"}) or "")
    first = {"state": "reconciling", "reconciles": 0, "last_reconcile_at": None}
    assert "after its start" in (stale_warning(first) or "")
    waiting = {**base, "state": "read-only", "reason": "waiting for the writer lock held by pid 9"}
    assert stale_warning(waiting) is None  # the lock holder keeps the index current
    lost = {**quick, "reason": "file events were lost", "hint": "reconciling everything"}
    assert "not updating" in (stale_warning(lost) or "")  # a reason while reconciling: a retry
    catching_up = {**lost, "catching_up": True}
    assert "catching up: file events were lost" in (stale_warning(catching_up) or "")
    assert not not_updating({**catching_up, "alive": True, "unresponsive": False})
    for state in (base, quick):  # a burst still read: behind, between reconciles and during
        burst = {**state, "events_waiting": 5000, "events_waiting_since": now - 1}
        assert stale_warning(burst) is None  # a moment's backlog is keeping up
        burst["events_waiting_since"] = now - 8
        w = stale_warning(burst) or ""
        assert "catching up: about 5000 file events still to be read, after 8 s" in w, w
        assert not not_updating({**burst, "alive": True, "unresponsive": False})


def test_an_index_built_by_another_version_says_it_will_be_rebuilt(tmp_path: Path) -> None:
    """After an upgrade that changes what is stored, the old index still answers; status says
    the next run rebuilds it, and stops saying so once it has."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    lib = Library(root, db)
    lib.index()
    assert read_status(lib)["rebuild_due"] is None
    store = Store(db)
    store.set_meta({"fingerprint": "format=0;R=150;max=8000;setext=1;segmenter=old"})
    store.close()
    data, text = _status(root, db)
    assert data["rebuild_due"].startswith("format 0 -> ")
    assert "the next `markindex index` or daemon start rebuilds every document" in " ".join(
        text.split()
    )
    assert lib.index().full_rebuild
    assert read_status(lib)["rebuild_due"] is None
    lib.close()


def test_records_of_long_gone_daemons_of_any_index_are_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed daemons' records were removed only when a daemon of the same index started again:
    those of indexes nobody serves any more piled up in the runtime folder."""
    import tempfile

    from markindex_core.config import DAEMON_RECORD_KEEP_S
    from markindex_core.serve.status import remove_daemon_record, runtime_dir

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = runtime_dir()
    assert folder is not None
    dead = 2**22 + 7  # above any pid_max: no such process
    old = time.time() - DAEMON_RECORD_KEEP_S - 60
    records = {
        "old_dead": folder / f"daemon-aaaaaaaaaaaaaaaa-{dead}.json",
        "new_dead": folder / f"daemon-bbbbbbbbbbbbbbbb-{dead}.json",
        "old_alive": folder / f"daemon-cccccccccccccccc-{os.getppid()}.json",
    }
    for path in records.values():
        path.write_text("{}", encoding="utf-8")
    for name in ("old_dead", "old_alive"):
        os.utime(records[name], (old, old))
    remove_daemon_record(tmp_path / "some-other.db")
    assert {n for n, p in records.items() if p.exists()} == {"new_dead", "old_alive"}


def test_a_daemon_in_another_pid_namespace_is_seen_through_the_lock_it_holds(
    tmp_path: Path,
) -> None:
    """A daemon in a container sharing the folder is no process here: status called it "not
    running" while it held the writer lock and beat. The lock it holds names it."""
    from markindex_core.serve.status import write_status_file

    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    lib = Library(root, db)
    lib.index()
    elsewhere = 2**22 + 11  # a pid no process here has
    lock = WriterLock(db)
    lock.acquire()
    try:
        lock.path.write_text(str(elsewhere), encoding="utf-8")  # as that daemon wrote it
        beat = {"pid": elsewhere, "state": "watching", "writing": True, "reconciles": 1}
        write_status_file(db, {**beat, "heartbeat_at": time.time()})
        daemon = read_status(lib)["daemon"]
        assert daemon["alive"] and daemon["writing"] and not daemon["ended"], daemon
        write_status_file(db, {**beat, "heartbeat_at": time.time() - STALE_AFTER_S - 5})
        st = read_status(lib)
        assert st["daemon"]["unresponsive"] and st["not_updating"], st["daemon"]  # frozen there
    finally:
        lock.release()


_KILLED_REBUILD = """
import os, signal, sys
from pathlib import Path
from markindex_core.library import Library

def progress(done, total, path):
    if done >= 5:  # killed midway, as a Ctrl-C'd or OOM-killed `index --rebuild` is
        os.kill(os.getpid(), signal.SIGKILL)

Library(Path(sys.argv[1]), Path(sys.argv[2])).index(rebuild=True, progress=progress, workers=0)
"""


def test_a_killed_daemon_is_said_until_a_whole_run_ends_not_until_another_writer_starts(
    tmp_path: Path,
) -> None:
    """A killed daemon was said only until another writer took the writer lock. An
    `index --rebuild` killed midway takes it and leaves no mark in the index (its new file is
    thrown away), so status said "daemon: not running", exit 0, and searches missed the files
    changed since the daemon died without a word. Now the daemon keeps a mark in the index
    while it writes, cleared by a clean stop or a whole-library run."""
    root = _lib(tmp_path, {f"d{i}.md": f"# D{i}\n\nalpha {i}\n" for i in range(40)})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    d.stop(signal.SIGKILL)
    (root / "new.md").write_text("# New\n\nzebrafish\n", encoding="utf-8")  # never indexed
    assert _status_code(root, db) == 2
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_REBUILD, str(root), str(db)], capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    st, text = _status(root, db)
    assert st["unfinished_run"] and st["unfinished_run"]["daemon"] == d.proc.pid, st
    assert _status_code(root, db) == 2, text
    assert f"daemon pid {d.proc.pid}" in " ".join(text.split()), text
    assert "warning" in _search(root, db, "alpha").stderr
    Library(root, db).index()  # a whole run catches up: a static index, no warning
    assert _status_code(root, db) == 0
    assert "warning" not in _search(root, db, "zebrafish").stderr


def test_a_daemon_stopped_cleanly_leaves_no_mark_in_the_index(tmp_path: Path) -> None:
    """The daemon's mark is its own to clear: a clean stop with everything indexed leaves a
    static index that status calls current, and a new daemon that catches up clears a killed
    one's mark."""
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    d.wait_writing()
    d.stop(signal.SIGKILL)
    d = DaemonProcess(root, db)
    d.wait_writing()
    assert _status(root, db)[0]["unfinished_run"] is None  # a writer holds the lock
    assert d.stop() == 0, d.log
    st, _ = _status(root, db)
    assert st["unfinished_run"] is None and _status_code(root, db) == 0, st
    assert Store(db, readonly=True).get_meta("unfinished_run") is None


def test_a_daemon_mark_is_no_news_while_its_daemon_lives(tmp_path: Path) -> None:
    """Between two sessions (a watcher restarted) a daemon frees the writer lock for a moment:
    its own mark must not make it say, in its own answers, that it stopped."""
    from markindex_core.store import runs

    db = tmp_path / "index.db"
    mine = json.loads(runs.live_mark(os.getpid())[runs.UNFINISHED_RUN])
    assert runs.unfinished_run(json.dumps(mine), db) is None
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    )
    dead = {**mine, "daemon": int(gone.stdout)}
    run = runs.unfinished_run(json.dumps(dead), db)
    assert run is not None and run["daemon"] == dead["daemon"], run
    assert f"daemon pid {dead['daemon']}" in runs.unfinished_warning(run)


def test_status_says_a_folder_cannot_be_read_not_only_in_the_errors(shared_tmp: Path) -> None:
    """A folder the daemon cannot read: every tool envelope warned that the index keeps what it
    held there and misses changes there, but `markindex status` showed only 'locked/.: Permission
    denied' among the latest errors (and not at all once 20 later errors pushed it out). Run as
    `nobody` (root reads everything)."""
    from .helpers import nobody_daemon

    root = _lib(shared_tmp, {"a.md": "# A\n\nalpha\n", "locked/x.md": "# X\n\nxerus\n"})
    os.chmod(root / "locked", 0)
    d, db = nobody_daemon(root, shared_tmp)
    try:
        d.wait_writing()
        st, text = _status(root, db)
        assert st["daemon"]["unreadable"] == ["locked"], st["daemon"]
        assert "part of the library cannot be read (locked)" in text, text
        os.chmod(root / "locked", 0o755)
        wait_for(lambda: not _status(root, db)[0]["daemon"]["unreadable"], timeout=30)
        assert "cannot be read" not in _status(root, db)[1]
    finally:
        os.chmod(root / "locked", 0o755)
        assert d.stop() == 0, d.log


def test_a_reconcile_without_progress_for_ten_minutes_is_not_updating() -> None:
    """A reconcile stuck on one file (a hard-mounted share that stopped answering, a parse stuck
    in native code) kept saying 'catching up' for ever while status exited 0. A parse is ended
    after PARSE_TIMEOUT_S, so a reconcile that has not got a file further for RUN_STALL_SECONDS
    is said to be not updating, as a stalled index run is."""
    import time

    from markindex_core.config import RUN_STALL_SECONDS
    from markindex_core.serve.status import not_updating, stale_warning

    now = time.time()
    stuck = {
        "state": "reconciling",
        "busy": True,
        "reconciles": 4,
        "last_reconcile_at": now - 2000,
        "last_reconcile_started_at": now - 1900,
        "progress": {"done": 7, "total": 900},
        "progress_at": now - RUN_STALL_SECONDS - 60,
        "alive": True,
        "unresponsive": False,
    }
    warning = stale_warning(stuck) or ""
    assert "not updating: its reconcile has made no progress for 11 min" in warning, warning
    assert "at 7 of 900 files" in warning and "restart the daemon" in warning
    assert not_updating(stuck)
    moving = {**stuck, "progress_at": now - 30}  # slow, and still getting further
    assert "catching up" in (stale_warning(moving) or "") and not not_updating(moving)
    scanning = {**stuck, "progress": None, "progress_at": None}  # no file done yet
    assert not_updating(scanning)  # judged from the reconcile's start
    assert not not_updating({**scanning, "last_reconcile_started_at": now - 5})


def test_a_daemon_says_when_its_reconcile_last_got_further(tmp_path: Path) -> None:
    root = _lib(tmp_path, {"a.md": "# A\n\nalpha\n"})
    db = tmp_path / "idx" / "index.db"
    d = DaemonProcess(root, db)
    try:
        d.wait_writing()
        before = time.time()
        (root / "b.md").write_text("# B\n\nbravo\n", encoding="utf-8")
        wait_for(lambda: (d.status().get("progress_at") or 0) >= before, timeout=20)
    finally:
        assert d.stop() == 0, d.log
