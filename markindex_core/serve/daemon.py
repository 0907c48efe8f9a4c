"""The live index: a full reconcile at start, then watchdog events reconciled in coalesced batches.

Threads: watchdog's observer marks paths dirty; the event loop coalesces them (and serves MCP in
the same loop); one writer thread owns the writer connection and runs `Indexer.run(paths=…)`, so
tool calls never wait for indexing. While another process holds the writer lock the daemon only
reads, and retries the lock every `DAEMON_LOCK_POLL_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import forkserver
from typing import Any

from markindex_core.config import (
    DAEMON_ERRORS_KEPT,
    DAEMON_FULL_SCAN_PATHS,
    DAEMON_HEARTBEAT_S,
    DAEMON_LOCK_POLL_S,
    DAEMON_MAX_WAIT_MS,
    DAEMON_QUIET_MS,
    DAEMON_RACY_S,
    DAEMON_RETRY_S,
    DAEMON_SETTLED_QUIET_MS,
    DAEMON_TIDY_IDLE_S,
)
from markindex_core.index.indexer import Indexer, IndexReport
from markindex_core.index.scan import path_problem
from markindex_core.library import Library
from markindex_core.serve.status import read_status, write_status_file, writer_lock_state
from markindex_core.serve.watch import (
    Batch,
    Coalescer,
    LibraryEvents,
    OverflowAlarm,
    WatchHandle,
    minimal_paths,
    start_watching,
)
from markindex_core.store.db import Store
from markindex_core.store.lock import WriterLock

__all__ = ["Daemon", "read_status", "run_daemon"]

log = logging.getLogger("markindex.daemon")

SHUTDOWN_GRACE_S = 1.0  # after a signal, how long the MCP transport gets to wind down


class _Stopping(Exception):
    """Raised inside the indexer's progress callback to end a long run at shutdown."""


class Daemon:
    """Keeps one library's index equal to its folder while the process runs."""

    def __init__(
        self,
        lib: Library,
        *,
        ignore: list[str] | None = None,
        setext: bool | None = None,
        poll: bool = False,
        quiet_ms: int | None = None,
        max_wait_ms: int | None = None,
    ) -> None:
        self.lib = lib
        self.ignore = list(ignore or [])
        self.setext = setext
        self.poll = poll
        self.quiet_s = (quiet_ms if quiet_ms is not None else DAEMON_QUIET_MS) / 1000
        self.max_wait_s = (max_wait_ms if max_wait_ms is not None else DAEMON_MAX_WAIT_MS) / 1000
        self.lock = WriterLock(lib.db_path)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="markindex-writer")
        self._store: Store | None = None
        self._indexer: Indexer | None = None
        self._coalescer: Coalescer | None = None
        self._watch: WatchHandle | None = None
        self._alarm: OverflowAlarm | None = None
        self._stopping = threading.Event()
        self._tidied_for: float | None = None
        self.status: dict[str, Any] = {
            "pid": os.getpid(),
            "root": str(lib.root),
            "state": "starting",
            "writing": False,
            "started_at": time.time(),
            "heartbeat_at": time.time(),
            "observer": None,
            "notice": "",
            "queue": 0,
            "busy": False,
            "progress": None,
            "last_event_at": None,
            "last_reconcile_at": None,
            "last_reconcile_started_at": None,
            "last_reconcile_seconds": None,
            "reconciles": 0,
            "last_batch": None,
            "error_count": 0,
            "errors": [],
        }

    # ----- lifecycle --------------------------------------------------------------------------
    async def run(self) -> None:
        """Watch and reconcile until cancelled. Safe to pass as an MCP background coroutine."""
        loop = asyncio.get_running_loop()
        self._coalescer = Coalescer(
            loop,
            quiet_s=self.quiet_s,
            max_wait_s=self.max_wait_s,
            settled_quiet_s=DAEMON_SETTLED_QUIET_MS / 1000,
        )
        beat = asyncio.create_task(self._heartbeat(), name="markindex-heartbeat")
        try:
            self._start_watching()
            await self._become_writer()
            await self._write_loop()
        finally:
            beat.cancel()
            self._shutdown()

    def _start_watching(self) -> None:
        assert self._coalescer is not None
        exclude = [] if self.lib.db_path.parent == self.lib.root else [self.lib.db_path.parent]
        handler = LibraryEvents(self.lib.root, self._coalescer, exclude_dirs=exclude)
        self._alarm = OverflowAlarm(self._coalescer.request_full)
        self._alarm.install()
        # Watch first, then reconcile: an edit during the first scan is then never lost.
        self._watch = start_watching(self.lib.root, handler, poll=self.poll)
        self.status["observer"] = self._watch.kind
        self.status["notice"] = self._watch.notice
        log.info("watching %s (%s)", self.lib.root, self._watch.kind)

    async def _become_writer(self) -> None:
        assert self._coalescer is not None
        self.lib.ensure_db_dir()
        announced = False
        while not self.lock.try_acquire():
            if not announced:
                _, pid = writer_lock_state(self.lib.db_path)
                holder = f" (pid {pid})" if pid else ""
                log.info("another process%s writes the index: serving read-only", holder)
                self.status["state"] = "read-only"
                announced = True
            self._coalescer.discard()  # the takeover reconciles everything anyway
            await asyncio.sleep(DAEMON_LOCK_POLL_S)
        if announced:
            log.info("writer lock acquired: taking over indexing")
        self.status["writing"] = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._open_writer)
        self._coalescer.discard()
        self._coalescer.request_full()

    async def _write_loop(self) -> None:
        assert self._coalescer is not None
        loop = asyncio.get_running_loop()
        delay = DAEMON_RETRY_S[0]
        while True:
            batch = await self._coalescer.next_batch()
            if not batch:
                continue
            self._begin(batch)
            try:
                report = await loop.run_in_executor(self._writer, self._reconcile, batch)
            except (asyncio.CancelledError, _Stopping):
                raise
            except Exception as exc:  # the loop must outlive any single failure
                log.exception("reconcile failed; retrying in %.0f s", delay)
                self._error("", f"reconcile failed: {type(exc).__name__}: {exc}")
                self._end(batch, None)
                self._coalescer.put_back(batch)
                await asyncio.sleep(delay)
                delay = min(delay * 2, DAEMON_RETRY_S[1])
                continue
            delay = DAEMON_RETRY_S[0]
            self._end(batch, report)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(DAEMON_HEARTBEAT_S)
            if self._watch is not None and not self._watch.healthy():
                self._restart_watching()
            self._publish()
            await self._tidy_when_idle()

    async def _tidy_when_idle(self) -> None:
        """Once writes pause, fold the FTS segments small commits left behind (queries slow down)."""
        last = self.status["last_reconcile_at"]
        if self._indexer is None or self.status["busy"] or not last or last == self._tidied_for:
            return
        if time.time() - last < DAEMON_TIDY_IDLE_S:
            return
        self._tidied_for = last
        await asyncio.get_running_loop().run_in_executor(self._writer, self._tidy)

    def _tidy(self) -> None:
        if self._indexer is not None and self._store is not None and self._indexer.tidy(force=True):
            log.debug("merged the search index segments")

    def _restart_watching(self) -> None:
        """An observer thread died (e.g. a watch limit hit on a new folder): poll instead, rescan."""
        assert self._watch is not None and self._coalescer is not None
        log.warning("the file observer stopped; restarting it with polling and rescanning")
        self._watch.stop()
        if self._alarm is not None:
            self._alarm.remove()
        self.poll = True
        self._start_watching()
        self._coalescer.request_full()

    def _shutdown(self) -> None:
        """Stop watching, let an in-flight reconcile commit, close, free the lock.

        Synchronous on purpose: under anyio (the MCP server) every `await` inside a cancelled
        scope is cancelled again, so an awaiting shutdown would stop halfway.
        """
        self.status["state"] = "stopping"
        self._stopping.set()
        if self._watch is not None:
            self._watch.stop()
        if self._alarm is not None:
            self._alarm.remove()
        done = self._writer.submit(self._close_writer)
        try:
            done.result(timeout=60)
        except Exception:
            log.exception("closing the index failed")
        self._writer.shutdown(wait=False)
        was_writing = self.lock.held
        self.status.update(state="stopped", writing=False, busy=False)
        if was_writing:
            self._publish()
        self.lock.release()
        log.info("stopped")

    # ----- writer thread ----------------------------------------------------------------------
    def _open_writer(self) -> None:
        self._store = Store(self.lib.db_path)
        self._indexer = Indexer(self.lib.root, self._store, ignore=self.ignore, setext=self.setext)
        # This process has threads (watchdog, MCP, the loop): a forked parse worker could inherit
        # a lock some other thread held and hang. Workers come from a clean fork server instead,
        # started now with the parser loaded so a burst does not pay for it.
        self._indexer.start_method = "forkserver"
        multiprocessing.set_forkserver_preload(["markindex_core.index.indexer"])
        try:
            forkserver.ensure_running()
        except (OSError, ValueError) as exc:  # ValueError: no real stderr fd (e.g. inside a TUI)
            log.warning("cannot start the parse worker server (%s): parsing in-process", exc)
            self._indexer.workers = 1

    def _close_writer(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _reconcile(self, batch: Batch) -> IndexReport:
        """Bring the dirty paths (or everything) in line with the disk, by stat and content hash."""
        indexer, store = self._indexer, self._store
        assert indexer is not None and store is not None
        # Cheap (nested .gitignore files load lazily) and needed for folders that moved in.
        indexer.reload_rules()
        paths = minimal_paths(batch.paths)
        if batch.full or batch.rules_changed or len(paths) > DAEMON_FULL_SCAN_PATHS:
            report = indexer.run(self._progress)
            _release_memory(report)
            return report
        t0 = time.perf_counter()
        self._unstick_racy(store, paths)
        t1 = time.perf_counter()
        report = indexer.run(self._progress, paths=paths)
        log.debug(
            "reconcile of %d paths: racy check %.1f ms, index %.1f ms",
            len(paths),
            (t1 - t0) * 1000,
            (time.perf_counter() - t1) * 1000,
        )
        _release_memory(report)
        return report

    def _progress(self, done: int, total: int, path: str) -> None:
        """Called per file by the indexer; also the place where a shutdown interrupts a long run."""
        if self._stopping.is_set():
            raise _Stopping
        self.status["progress"] = {"done": done, "total": total}

    def _unstick_racy(self, store: Store, paths: list[str]) -> None:
        """Make the indexer hash files whose stat looks unchanged but may not be.

        A file rewritten within the file system's timestamp granularity of its last indexing keeps
        its size and mtime; the event says it changed, so forget the stored stat and let the hash
        decide (the "racy clean" problem git solves the same way).
        """
        with store.conn:  # one transaction for all the touches
            for rel in paths:
                if path_problem(rel):  # never stored (skipped by the indexer): nothing to unstick
                    continue
                try:
                    st = os.stat(self.lib.root / rel, follow_symlinks=False)
                except OSError:
                    continue
                doc = store.document(rel)
                if doc is None or doc["size"] != st.st_size or doc["mtime_ns"] != st.st_mtime_ns:
                    continue
                if st.st_mtime_ns >= (float(doc["indexed_at"]) - DAEMON_RACY_S) * 1e9:
                    store.touch(rel, st.st_size, 0)

    # ----- status -----------------------------------------------------------------------------
    def _begin(self, batch: Batch) -> None:
        assert self._coalescer is not None
        self.status.update(
            state="reconciling",
            busy=True,
            last_reconcile_started_at=time.time(),
            last_event_at=self._coalescer.last_event_at or None,
        )
        self._publish()

    def _end(self, batch: Batch, report: IndexReport | None) -> None:
        now = time.time()
        self.status["progress"] = None
        started = self.status["last_reconcile_started_at"] or now
        self.status.update(
            state="watching",
            busy=False,
            last_reconcile_at=now,
            last_reconcile_seconds=round(now - started, 4),
        )
        if report is not None:
            self.status["reconciles"] += 1
            self.status["last_batch"] = {
                "paths": len(batch.paths),
                "full": bool(batch.full or batch.rules_changed),
                "added": len(report.added),
                "updated": len(report.updated),
                "removed": len(report.removed),
                "skipped": len(report.skipped),
            }
            for path, err in report.errors:
                self._error(path, err)
            if report.changed or report.errors:
                log.info(
                    "reconciled %s: +%d ~%d -%d, %d skipped, %d errors in %.0f ms",
                    "everything"
                    if batch.full or batch.rules_changed
                    else f"{len(batch.paths)} paths",
                    len(report.added),
                    len(report.updated),
                    len(report.removed),
                    len(report.skipped),
                    len(report.errors),
                    (now - started) * 1000,
                )
            for path, reason in report.skipped:
                log.debug("skipped %s: %s", path, reason)
        self._publish()

    def _error(self, path: str, error: str) -> None:
        errors: list[dict[str, Any]] = self.status["errors"]
        errors.append({"at": round(time.time(), 3), "path": path, "error": error})
        del errors[:-DAEMON_ERRORS_KEPT]
        self.status["error_count"] += 1
        log.warning("%s%s", f"{path}: " if path else "", error)

    def _publish(self) -> None:
        """Write the status file (only the writing daemon owns it)."""
        if not self.lock.held:
            return
        self.status["heartbeat_at"] = round(time.time(), 3)
        if self._coalescer is not None:
            self.status["queue"] = self._coalescer.pending
            if self._coalescer.last_event_at:
                self.status["last_event_at"] = self._coalescer.last_event_at
        try:
            write_status_file(self.lib.db_path, self.status)
        except OSError as exc:
            log.warning("cannot write the status file: %s", exc)


def _release_memory(report: IndexReport) -> None:
    """After a big reconcile, hand the parser's freed heap back to the OS (a daemon lives long)."""
    if len(report.added) + len(report.updated) < 50 or not sys.platform.startswith("linux"):
        return
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


# ----- entry point ----------------------------------------------------------------------------
def run_daemon(
    lib: Library,
    *,
    ignore: list[str] | None = None,
    setext: bool | None = None,
    poll: bool = False,
    quiet_ms: int | None = None,
    serve_mcp: bool = True,
) -> None:
    """Run the live index until SIGTERM/SIGINT (or, when serving MCP, until stdin closes).

    With `serve_mcp`, MCP over stdio runs in the same event loop as the watcher; indexing runs
    in the writer thread, so tool calls are answered while it works.
    """
    daemon = Daemon(lib, ignore=ignore, setext=setext, poll=poll, quiet_ms=quiet_ms)
    if serve_mcp:
        from markindex_core.serve.mcp_server import run_stdio

        main: Callable[[], Awaitable[None]] = lambda: run_stdio(lib, background=[daemon.run])  # noqa: E731
    else:
        main = daemon.run
    asyncio.run(_until_signal(main))


async def _until_signal(main: Callable[[], Awaitable[None]]) -> None:
    """Run `main`, cancelling it cleanly on SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # Loops without signal support (not the main thread, other platforms) just skip this.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    stopper.cancel()
    if task.done():
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        return
    log.info("signal received: stopping")
    task.cancel()
    await asyncio.wait({task}, timeout=SHUTDOWN_GRACE_S)
    if not task.done():
        # The MCP transport reads stdin in a thread that no cancellation can wake; the index is
        # closed and the lock released by now (the daemon's cleanup is synchronous), so leave.
        log.info("stopped (stdin reader abandoned)")
        sys.stderr.flush()
        os._exit(0)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()
