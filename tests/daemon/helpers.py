"""A real `markindex daemon` subprocess, polling helpers, and an index comparison through Store queries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from markindex_core.library import Library
from markindex_core.serve.status import read_status_file
from markindex_core.store.db import Store
from tests.unprivileged import AS_NOBODY, CHILD_ENV

T = TypeVar("T")


def wait_for(pred: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.02) -> T:
    """Poll `pred` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


class DaemonProcess:
    """`markindex daemon ROOT --no-mcp` in a subprocess, logs captured from stderr."""

    def __init__(
        self,
        root: Path,
        db: Path,
        *extra: str,
        prefix: list[str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.root, self.db = root, db
        # Tests that delete the index folder keep the log elsewhere (`log_dir`).
        self.log_path = (log_dir or db.parent) / f"daemon-{time.monotonic_ns()}.log"
        db.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        args = [sys.executable, "-m", "markindex_core", "daemon", str(root), "--db", str(db)]
        self.proc = subprocess.Popen(
            [*(prefix or []), *args, "--no-mcp", *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=CHILD_ENV if prefix else None,
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def status(self) -> dict[str, Any]:
        return read_status_file(self.db) or {}

    def wait_writing(self, timeout: float = 30.0) -> dict[str, Any]:
        """Until this daemon writes and its first full reconcile is done."""

        def ready() -> dict[str, Any] | None:
            assert self.proc.poll() is None, f"daemon exited early:\n{self.log}"
            st = self.status()
            ok = st.get("pid") == self.proc.pid and st.get("writing") and st.get("reconciles")
            return st if ok else None

        return wait_for(ready, timeout)

    def wait_settled(self, since: float, timeout: float = 30.0) -> dict[str, Any]:
        """Until a reconcile that started after `since` finished with nothing queued."""

        def settled() -> dict[str, Any] | None:
            assert self.proc.poll() is None, f"daemon exited early:\n{self.log}"
            st = self.status()
            ok = (
                not st.get("busy")
                and st.get("queue") == 0
                and (st.get("last_reconcile_started_at") or 0) > since
            )
            return st if ok else None

        return wait_for(settled, timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
        return rc


@contextmanager
def running_daemon(root: Path, db: Path, *extra: str) -> Iterator[DaemonProcess]:
    d = DaemonProcess(root, db, *extra)
    try:
        d.wait_writing()
        yield d
    finally:
        rc = d.stop()
        assert rc == 0, f"daemon exit code {rc}:\n{d.log}"


def make_lib(parent: Path, files: dict[str, str]) -> Path:
    """A library folder `parent/lib` holding `files` (relative path -> text)."""
    root = parent / "lib"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def keep_watchdog_reading(root: Path, renames: int) -> None:
    """Rename `root/f/x.txt` (not Markdown) back and forth: nothing to index, but watchdog reads
    each event, far slower than they are made (2000 renames: about a second), so the events
    right after these are read in one go, well after they happened."""
    path = root / "f" / "x.txt"
    for i in range(renames):
        path = path.rename(path.with_name(f"x{i % 2}.txt"))


def find(db: Path, root: Path, query: str) -> set[str]:
    """Paths of documents a fresh read connection finds for `query`."""
    lib = Library(root, db)
    try:
        return {h.doc_path for h in lib.search(query, limit=50).hits}
    finally:
        lib.close()


def doc_paths(db: Path) -> set[str]:
    store = Store(db, readonly=True)
    try:
        return set(store.document_paths())
    finally:
        store.close()


def index_snapshot(store: Store, queries: list[str]) -> dict[str, Any]:
    """Everything a reader can observe, without row ids and clocks, for exact comparison."""
    docs: dict[str, Any] = {}
    for path in store.document_paths():
        d = store.document(path)
        assert d is not None
        doc_id = d["id"]
        nodes = [
            {k: v for k, v in n.items() if k not in ("rowid", "doc_id")}
            for n in store.nodes(doc_id)
        ]
        passages = list(
            store.conn.execute(
                "SELECT n.ordinal, p.start_line, p.end_line FROM passages p"
                " JOIN nodes n ON n.id = p.node_rowid WHERE p.doc_id=? ORDER BY 1, 2",
                (doc_id,),
            )
        )
        docs[path] = {
            "doc": {k: v for k, v in d.items() if k not in ("id", "mtime_ns", "indexed_at")},
            "nodes": nodes,
            "passages": passages,
            "links": store.links_from(doc_id),
            "backlinks": store.links_to(path),
            "lines": store.read_lines(doc_id, 1, d["line_count"]),
        }
    searches = {}
    for q in queries:
        from markindex_core.search.searcher import Searcher

        res = Searcher(store).search(q, limit=20)
        searches[q] = [
            (h.doc_path, h.node_id, h.passage_start, h.passage_end, round(h.score, 3))
            for h in res.hits
        ]
    counts = {
        t: store.scalar(f"SELECT count(*) FROM {t}")
        for t in ("node_fts", "passage_fts", "nodes", "passages", "links", "line_blocks")
    }
    return {
        "docs": docs,
        "skipped": store.skipped(),
        "stats": store.stats(),
        "counts": counts,
        "broken_links": store.broken_links(),
        "searches": searches,
    }


def fresh_build(root: Path, db: Path, ignore: list[str] | None = None) -> Path:
    if db.exists():
        for suffix in ("", "-wal", "-shm", ".lock"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    lib = Library(root, db)
    lib.index(ignore=ignore, workers=1)
    lib.close()
    return db


def diff_snapshots(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Human-readable differences (empty when equal)."""
    out: list[str] = []
    da, db_ = a["docs"], b["docs"]
    for p in sorted(set(da) - set(db_)):
        out.append(f"only in live index: {p}")
    for p in sorted(set(db_) - set(da)):
        out.append(f"only in fresh build: {p}")
    for p in sorted(set(da) & set(db_)):
        for key in da[p]:
            if da[p][key] != db_[p][key]:
                out.append(f"{p}: {key} differs")
    for key in ("skipped", "stats", "counts", "broken_links", "searches"):
        if a[key] != b[key]:
            out.append(f"{key} differs: {a[key]!r:.300} vs {b[key]!r:.300}")
    return out


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def nobody_daemon(root: Path, shared_tmp: Path) -> tuple[DaemonProcess, Path]:
    """A daemon run as `nobody` (root reads everything), its index in a folder everyone may
    write under `shared_tmp`; returns it and the index path."""
    db = shared_tmp / "idx" / "index.db"
    db.parent.mkdir()
    for p in (root, db.parent):
        os.chmod(p, 0o777)
    return DaemonProcess(root, db, prefix=AS_NOBODY, log_dir=shared_tmp), db
