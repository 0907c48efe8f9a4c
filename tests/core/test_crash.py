"""Crash safety: SIGKILL `markindex index` at random moments; the index always opens and converges."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from markindex_core.errors import IndexMissing, MarkindexError
from markindex_core.store.db import Store

from .helpers import REPO_ROOT, check_store_consistent, index_fingerprint, make_library, write

KILLS = 32


def index_cmd(root: Path, db: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "markindex_core",
        "index",
        str(root),
        "--db",
        str(db),
        "--json",
        *extra,
    ]


def wait_for_writes(proc: subprocess.Popen[bytes], folder: Path, since_ns: int) -> None:
    """Return when `proc` has written a file in `folder` (or ended): the start of its write phase.
    Kills are timed from there, so a slow interpreter start on a loaded host does not move them."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if any(mtime_ns(f) >= since_ns for f in folder.iterdir()):
            return
        time.sleep(0.005)


def mtime_ns(path: Path) -> int:
    """A file's mtime; 0 for one that vanished since it was listed."""
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def run_and_kill(cmd: list[str], folder: Path, after: float) -> float | None:
    """Start `cmd`; SIGKILL it `after` seconds into its write phase (its first write in
    `folder`). None when it was killed, else the length of its write phase."""
    since_ns = time.time_ns()
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_writes(proc, folder, since_ns)
    writing = time.perf_counter()
    try:
        proc.wait(timeout=after)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return time.perf_counter() - writing


def test_sigkill_at_random_moments_never_corrupts_and_converges(tmp_path: Path) -> None:
    root = make_library(tmp_path / "lib", 60)
    for i in range(0, 60, 3):  # bulk up some documents so writing takes a while
        write(
            root,
            f"big/b{i}.md",
            "\n\n".join(
                f"## Section {j}\n\n" + f"第{j}条 内容 content words {i} {j} " * 40
                for j in range(60)
            ),
        )
    db = tmp_path / "db" / "index.db"
    db.parent.mkdir()
    # A first build, killed never, times the write phase the kills fall in.
    write_phase = run_and_kill(index_cmd(root, db), db.parent, 120)
    assert write_phase is not None
    rng = random.Random(20261129)
    killed = 0
    for k in range(KILLS):
        # Alternate the setext setting so every run is a full rebuild with work to interrupt,
        # and edit a few files so incremental paths are hit too.
        flag = "--no-setext" if k % 2 == 0 else "--setext"
        if k % 8 == 0:  # now and then, interrupt a first build of an empty index
            for f in db.parent.iterdir():
                f.unlink()
        for p in rng.sample(sorted(root.rglob("*.md")), 3):
            p.write_text(p.read_text(encoding="utf-8") + f"\nedit {k}\n", encoding="utf-8")
        took = run_and_kill(index_cmd(root, db, flag), db.parent, rng.uniform(0, 1) * write_phase)
        if took is None:
            killed += 1
        else:  # it finished before its kill: the host got faster than when it was timed
            write_phase = min(write_phase, took)
        if db.exists():
            try:
                n_docs = check_store_consistent(db)
            except IndexMissing as exc:  # killed before the first schema commit: says what to do
                assert "schema 0" in exc.message and "markindex index" in exc.hint
                continue
            stale = Store(db, readonly=True).scalar("SELECT count(*) FROM documents WHERE hash=''")
            print(f"kill {k}: {n_docs} docs whole, {stale} waiting for a rebuild")
    assert killed >= KILLS * 2 // 3, f"only {killed} runs were interrupted"
    print(f"write phase {write_phase:.2f}s, {killed}/{KILLS} runs killed")
    done = subprocess.run(
        index_cmd(root, db, "--setext"), cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    fresh = tmp_path / "fresh.db"
    subprocess.run(index_cmd(root, fresh), cwd=REPO_ROOT, check=True, capture_output=True)
    assert index_fingerprint(db) == index_fingerprint(fresh)
    assert check_store_consistent(db) == 80


def test_a_writer_killed_while_creating_the_index_never_blocks_readers(tmp_path: Path) -> None:
    """Killed in its first instants, a writer leaves no index or a whole one, never one that only a
    writer could open (a new file's rollback journal)."""
    root = make_library(tmp_path / "lib", 5)
    db = tmp_path / "db" / "index.db"
    db.parent.mkdir()
    rng = random.Random(20261130)
    outcomes: set[str] = set()
    for _ in range(12):
        for f in db.parent.iterdir():
            f.unlink()
        proc = subprocess.Popen(index_cmd(root, db), cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.kill()
        proc.wait()
        try:
            Store(db, readonly=True).close()
            outcomes.add("opens")
        except IndexMissing as exc:  # not created yet, or created without documents
            assert "markindex index" in exc.hint
            outcomes.add("missing")
        leftovers = [f.name for f in db.parent.iterdir() if ".new-" in f.name]
        assert not leftovers or proc.returncode != 0
    done = subprocess.run(index_cmd(root, db), cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not [f for f in db.parent.iterdir() if ".new-" in f.name], "stale creation files kept"
    print(outcomes)


def test_a_half_written_index_says_a_writer_will_roll_it_back(tmp_path: Path) -> None:
    """A rollback journal left by a killed writer: readers get one clear line, the next run heals it."""
    db = tmp_path / "index.db"
    Store(db).close()  # an index, then a writer killed mid-transaction in rollback-journal mode
    script = (
        "import apsw, os, sys\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "c.execute('PRAGMA journal_mode=delete')\n"
        "c.execute(\"BEGIN; INSERT INTO meta VALUES ('k', 'v'); CREATE TABLE u(y)\")\n"
        "c.cache_flush()\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db)], check=True)
    assert db.with_name("index.db-journal").stat().st_size > 0
    with pytest.raises(MarkindexError) as info:
        Store(db, readonly=True)
    assert "half-written" in info.value.message and "markindex index" in info.value.hint
    root = make_library(tmp_path / "lib", 2)
    done = subprocess.run(index_cmd(root, db), cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert check_store_consistent(db) == 2


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="utf-8")
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _descendants(pid: int) -> list[int]:
    """Children (the parse workers), their children, and so on."""
    found: list[int] = []
    level = _children(pid)
    while level:
        found += level
        level = [c for p in level for c in _children(p)]
    return found


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
    reason="watches worker processes through /proc; needs the parallel parse path",
)
def test_killed_writer_frees_the_lock_even_while_its_parse_workers_run(tmp_path: Path) -> None:
    """Parse workers must not keep the writer lock alive once their parent is gone."""
    from markindex_core.store.lock import WriterLock

    root = tmp_path / "lib"
    para = "parse worker content with enough words to take a while " * 30
    for i in range(40):  # > PARALLEL_MIN_BYTES so the indexer starts its worker pool
        write(root, f"d{i}.md", "\n\n".join(f"## S{j}\n\n{para}" for j in range(40)))
    db = tmp_path / "index.db"
    proc = subprocess.Popen(
        index_cmd(root, db), cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        # Kill once the workers run.
        deadline = time.monotonic() + 20
        while not _children(proc.pid):
            assert proc.poll() is None, "the indexer finished before it started workers"
            assert time.monotonic() < deadline, "no parse workers started"
            time.sleep(0.005)
        time.sleep(0.1)
        assert proc.poll() is None, "the indexer finished before it could be killed"
        workers = _descendants(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    lock = WriterLock(db)
    assert lock.try_acquire(), f"lock still held after the writer died (workers {workers})"
    lock.release()
    # and the workers go away with their parent instead of finishing their files
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{w}").exists() and "Z" not in _state(w) for w in workers):
        assert time.monotonic() < deadline, "orphaned parse workers keep running"
        time.sleep(0.01)
    assert b"Traceback" not in (proc.stderr.read() if proc.stderr else b"")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_a_killed_rebuilds_file_is_deleted_by_the_next_writer(tmp_path: Path) -> None:
    """A rebuild killed mid-way leaves `index.db.rebuild` (as large as the index). It used to stay
    until the next full rebuild; the next writer to hold the lock deletes it."""
    root = make_library(tmp_path / "lib", 3)
    db = tmp_path / "db" / "index.db"
    subprocess.run(index_cmd(root, db), cwd=REPO_ROOT, check=True, capture_output=True)
    leftovers = [db.with_name("index.db.rebuild"), db.with_name("index.db.rebuild-wal")]
    for f in leftovers:
        f.write_bytes(b"\0" * 4096)
    done = subprocess.run(index_cmd(root, db), cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert '"unchanged": 3' in done.stdout  # an incremental run, not a rebuild
    assert not [f for f in leftovers if f.exists()]


def test_a_rebuild_killed_while_creating_its_file_leaves_nothing_behind(tmp_path: Path) -> None:
    """A rebuild killed in the instant it creates its file leaves `index.db.rebuild.new-PID`
    (and its -wal and -shm). Only the next full rebuild swept it: every incremental run and
    the daemon left it beside the index for good. The next writer now deletes it."""
    root = make_library(tmp_path / "lib", 3)
    db = tmp_path / "db" / "index.db"
    subprocess.run(index_cmd(root, db), cwd=REPO_ROOT, check=True, capture_output=True)
    dead = 999_999_999  # above any pid_max: no process has it
    stem = db.with_name(f"index.db.rebuild.new-{dead}")
    leftovers = [stem, stem.with_name(stem.name + "-wal"), stem.with_name(stem.name + "-shm")]
    for f in leftovers:
        f.write_bytes(b"\0" * 4096)
    done = subprocess.run(index_cmd(root, db), cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert '"unchanged": 3' in done.stdout  # an incremental run, not a rebuild
    assert not [f for f in leftovers if f.exists()]
