"""The live index: a full reconcile at start, then watchdog events reconciled in coalesced batches.

Who owns which thread and connection:

* The event loop thread owns the daemon's life: the session (observer, writer lock, writer store)
  is started, checked and torn down only there, by the supervised tasks `session` and `guard`.
  MCP (when served) shares the loop; tool calls run on the server's own threads, each with its
  own read connection from `Library` (never the writer's).
* One writer thread (`markindex-writer`) owns the writer `Store` and `Indexer`: they are opened,
  used and closed only on it, so tool calls never wait for indexing.
* watchdog's observer threads only mark paths dirty through the `Coalescer` (thread-safe).
* `status` is shared: every thread updates it through `_set` under `_status_lock`, and readers
  (the status file, the terminal app) get a copy. The status file beside the index is written by
  the holder of the writer lock, or by this daemon when nobody holds it (recovering, stopped);
  every daemon also keeps its own record in its user's runtime folder (`status.runtime_dir`), so
  one waiting for the lock or unable to write the index folder is still seen alive.
* Shutdown never blocks the loop: stopping the observer and letting an in-flight reconcile
  commit run on a `markindex-shutdown` thread, bounded by `DAEMON_SHUTDOWN_S`; `wait_stopped`
  joins it.

Every task the daemon starts is supervised: an unexpected exception is logged, shown in status
and the task restarts with back-off. A session that loses what it opened (the library folder,
the index file or the lock file deleted or replaced) is torn down and started again: index folder
re-created, lock re-taken, store re-opened, observer restarted, full reconcile. A library folder
gone for longer than `DAEMON_ROOT_WAIT_S` ends the daemon with `DaemonStopped`.
While another process holds the writer lock the daemon only reads, and retries the lock every
`DAEMON_LOCK_POLL_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import ctypes
import errno
import gc
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from markindex_core.config import (
    DAEMON_CHECK_EVERY_S,
    DAEMON_CHECK_IDLE_S,
    DAEMON_CHECKPOINT_BUSY_MS,
    DAEMON_ERRORS_KEPT,
    DAEMON_FULL_SCAN_PATHS,
    DAEMON_GUARD_S,
    DAEMON_HEARTBEAT_S,
    DAEMON_LINKED_POLL_FILES,
    DAEMON_LOCK_POLL_S,
    DAEMON_MAX_WAIT_MS,
    DAEMON_OBSERVER_RETRY_S,
    DAEMON_POLL_INTERVAL_S,
    DAEMON_QUIET_MS,
    DAEMON_RETRY_S,
    DAEMON_ROOT_WAIT_S,
    DAEMON_SETTLED_QUIET_MS,
    DAEMON_SHUTDOWN_S,
    DAEMON_SWEEP_S,
    DAEMON_TIDY_DEFER_WRITES,
    DAEMON_TIDY_IDLE_S,
    DAEMON_WAIT_WARN_S,
    STATUS_UNREADABLE_SHOWN,
)
from markindex_core.errors import MarkindexError
from markindex_core.index.indexer import (
    AfterWrite,
    Indexer,
    IndexReport,
    rebuild_from_folder,
)
from markindex_core.index.scan import FileStat, below_any
from markindex_core.library import Library
from markindex_core.serve.mounts import mounts_in, remote_file_system
from markindex_core.serve.publish import NO_PROBLEM, StatusFile
from markindex_core.serve.status import (
    DaemonWatch,
    iso_time,
    read_status,
    remove_daemon_record,
    stale_warning,
    write_daemon_record,
)
from markindex_core.serve.watch import (
    LIMIT_HINT,
    Batch,
    Coalescer,
    LibraryEvents,
    OverflowAlarm,
    WatchHandle,
    minimal_paths,
    start_watching,
)
from markindex_core.store import runs
from markindex_core.store.db import Store
from markindex_core.store.files import DAMAGE_ERRORS, damage_detail, disk_full, rebuild_path
from markindex_core.store.integrity import check_index
from markindex_core.store.lock import WriterLock, writer_lock_state
from markindex_core.store.rebuild import discard_leftover

__all__ = ["Daemon", "DaemonStopped", "read_status", "run_daemon"]

log = logging.getLogger("markindex.daemon")

SHUTDOWN_GRACE_S = 1.0  # after a signal, how long the MCP transport gets to wind down


class DaemonStopped(MarkindexError):
    """The daemon ended because it cannot go on (e.g. its library folder is gone)."""

    code = "DAEMON_STOPPED"


class _Stopping(Exception):
    """Raised inside the indexer's progress callback to end a long run (shutdown, restart)."""


class _Lost(Exception):
    """The session lost something it opened (library folder, index file, lock): start again."""


FileId = tuple[int, int]


def _file_id(path: Path) -> FileId | None:
    """(st_dev, st_ino) of `path`, or None when it does not exist (any more)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@dataclass
class _Identity:
    """What the running session opened, to notice it being deleted or replaced underneath."""

    root: FileId | None = None
    db: FileId | None = None
    lock: FileId | None = None
    rebuilt: FileId | None = None  # this daemon's rebuild of a damaged index, before its swap
    mounts: frozenset[str] | None = None  # mount points in the library folder (Linux)


@dataclass(frozen=True)
class Problem:
    """Why writing fails right now, what to do about it, and whether to reopen the writer."""

    reason: str
    hint: str
    reopen: bool = True
    damaged: bool = False  # the index is damaged: build it again from the folder


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def diagnose(exc: BaseException, db_path: Path) -> Problem:
    """Turn a failed write into one clear reason and a hint (disk full and read-only are common)."""
    for e in _chain(exc):
        if isinstance(e, DAMAGE_ERRORS):
            return Problem(
                f"the index {db_path} is damaged ({damage_detail(e)})",
                "building it again from the library folder; searches use the old one meanwhile",
                damaged=True,
            )
        if isinstance(e, OSError) and e.errno == errno.EFBIG:
            return Problem(  # freeing space does not lift it
                f"cannot write the index: {disk_full(db_path, e.errno).message}",
                "raise the limit (`ulimit -f unlimited` in the shell or service that starts the"
                " daemon), or pass --db FILE; writing resumes by itself",
                reopen=False,
            )
        if isinstance(e, apsw.BusyError):  # the writer lock keeps markindex writers out
            return Problem(
                f"cannot write the index: another program holds a write transaction open on"
                f" {db_path} (an sqlite3 shell after BEGIN, a database browser?)",
                "end that transaction or close the program; writing resumes by itself",
                reopen=False,
            )
        if isinstance(e, apsw.FullError) or (isinstance(e, OSError) and e.errno in _FULL_ERRNOS):
            return Problem(
                f"cannot write the index: the disk holding {db_path.parent} is full",
                "free some space there, or pass --db FILE on another disk; "
                "writing resumes by itself",
                reopen=False,
            )
        if isinstance(e, apsw.ReadOnlyError) or (
            isinstance(e, OSError) and e.errno in _READ_ONLY_ERRNOS
        ):
            return Problem(
                f"cannot write the index: {db_path} or its folder is read-only",
                "make the index file and its folder writable for this user (chmod u+w), "
                "or pass --db FILE; writing resumes by itself",
            )
    if isinstance(exc, MarkindexError):
        return Problem(exc.message, exc.hint or "retrying with back-off")
    return Problem(
        f"cannot write the index: {type(exc).__name__}: {exc}",
        "see the log; retrying with back-off",
    )


class _LiveStore(Store):
    """The daemon's writer store: a checkpoint after a save never waits for readers.

    A full (truncating) checkpoint waits, up to the busy timeout, until no reader uses the WAL;
    with an agent searching continuously that wait landed on the next save's latency. After a
    save the daemon copies what it can (passive); it truncates the WAL when idle (`truncate`).

    It also remembers which files its connections opened (`owns`): a full rebuild (`--no-setext`,
    a format change) builds a new file and renames it over the index (see `store/rebuild.py`).
    The guard then finds another file at the index's path, and must know it is this daemon's own
    and not a replacement by someone else. The new file is noted when its connection is made,
    before the rename, so no check can fall between the two.
    """

    _owned: frozenset[FileId] = frozenset()

    @property
    def conn(self) -> apsw.Connection:
        return self._conn

    @conn.setter
    def conn(self, conn: apsw.Connection) -> None:
        self._conn = conn
        opened = _file_id(Path(conn.filename))
        if opened is None:
            return
        if Path(conn.filename) == rebuild_path(self.path):
            self._owned = self._owned | {opened}  # the rebuild: the index's file once renamed
        else:
            self._owned = frozenset({opened})  # read from any thread: replaced, never changed

    def owns(self, file: FileId | None) -> bool:
        """`file` is the one this store writes, or the rebuild it is swapping in."""
        return file is not None and file in self._owned

    def checkpoint(self, mode: str = "passive", *, busy_ms: int | None = None) -> None:
        super().checkpoint(mode, busy_ms=busy_ms)

    def truncate(self) -> None:
        super().checkpoint("truncate", busy_ms=DAEMON_CHECKPOINT_BUSY_MS)


class _LiveIndexer(Indexer):
    """The daemon's indexer: the merge of the search index's segments is made a step at a time.

    An FTS `optimize` rewrites the whole search index at once: ~1.5 s on the evaluation corpus,
    ten times that on a library ten times larger, and every save waited behind it. The daemon
    merges in bounded steps (`Indexer.merge_step`) when writes pause (`Daemon._tidy_when_idle`),
    and past `DAEMON_TIDY_DEFER_WRITES` pending writes one step follows each write, so a long
    burst of saves keeps merging without any save waiting for more than a step.
    """

    def tidy(self, *, writes: int = 0, force: bool = False) -> bool:
        pending = int(self.store.get_meta("fts_pending_writes") or 0) + writes
        if writes:
            self.store.set_meta({"fts_pending_writes": str(pending)})
        if writes and pending >= DAEMON_TIDY_DEFER_WRITES:
            return self.merge_step()
        return False


REMOTE_HINT = (
    "the library is on a network or FUSE file system ({where}): inotify sees no change made by"
    " another machine there, so it is watched by polling every {s:.0f} s"
)


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
        sweep_s: float | None = None,
        after_write: AfterWrite | None = None,
    ) -> None:
        self.lib = lib
        # e.g. model summaries (`--summary-model`): none unless asked for, so by default the
        # daemon never makes a network request.
        self.after_write = after_write
        # None: the patterns the index remembers (see `scan.remembered_ignore`), resolved by
        # the indexer; `ignore_in_use` keeps them for a rebuild that cannot read the old index.
        self.ignore = None if ignore is None else list(ignore)
        self.ignore_in_use: list[str] | None = self.ignore
        self.setext = setext
        self.poll = poll
        self.quiet_s = (quiet_ms if quiet_ms is not None else DAEMON_QUIET_MS) / 1000
        self.max_wait_s = (max_wait_ms if max_wait_ms is not None else DAEMON_MAX_WAIT_MS) / 1000
        self.sweep_s = sweep_s if sweep_s is not None else DAEMON_SWEEP_S
        self.lock = WriterLock(lib.db_path)
        self.fatal: DaemonStopped | None = None
        # Why the last step of a stop (the close, the final status) failed: the program that ran
        # the daemon exits non-zero with it (see `stop_error`).
        self.stop_failure: str | None = None
        self._left_to_writer: list[Future[None]] = []  # the stop's last steps, writer still busy
        self.ended = asyncio.Event()  # set (on the loop) when the daemon gives up: see `fatal`
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="markindex-writer")
        self._store: _LiveStore | None = None  # writer thread only
        self._indexer: _LiveIndexer | None = None  # writer thread only
        self._coalescer: Coalescer | None = None
        self._watch: WatchHandle | None = None
        self._events: LibraryEvents | None = None  # the running watch's handler
        self._observer_died_at: float | None = None  # monotonic; the last unexplained stop
        self._poll_notice = ""  # why the daemon fell back to polling, when it did
        self._alarm: OverflowAlarm | None = None
        self._session: asyncio.Task[None] | None = None
        self._identity = _Identity()
        self._problem: Problem | None = None
        self._stopping = threading.Event()  # the daemon stops: end any run at the next file
        self._abort = threading.Event()  # the session restarts: end the running reconcile
        self._reopen = threading.Event()  # reopen the writer store before the next reconcile
        self._damaged = threading.Event()  # build the index again before the next reconcile
        self._events_lost = threading.Event()  # inotify's queue overflowed: say so, reconcile all
        self._confirm_after = False  # reconcile all once more when this one ends (see `_begin`)
        self._linked: dict[str, FileStat] = {}  # files with several names (writer thread only)
        self._linked_poll: Future[None] | None = None  # a `_poll_linked` submitted to it
        self._unreadable: set[str] = set()  # paths a reconcile could not read (writer thread)
        self._warned: set[tuple[str, str]] = set()  # run warnings logged (see `_say_warnings`)
        self._linked_cursor = 0  # where the next `_poll_linked` of many such files begins
        self._writer_watch = DaemonWatch(lib.db_path)  # the writer's state, while read-only
        self._read_only_since: float | None = None  # wall clock; waiting for the writer lock
        self._full_at = time.monotonic()  # the last full reconcile ended (see `_sweep_when_idle`)
        self._stopper: threading.Thread | None = None
        self._busy_at_stop = False  # a reconcile was under way when the stop began
        self._unread_at_stop = 0  # file events the watcher had not handed on when it stopped
        self._tidied_for: float | None = None
        self._catching_up: asyncio.Future[None] | None = None  # a slice of summaries, if any
        self._tidying: asyncio.Task[None] | None = None  # the idle merge of FTS segments
        self._checking: threading.Thread | None = None  # a whole-index check, if running
        self._checked_at: float | None = None  # monotonic time of the last one started
        self._published_at = 0.0
        self._record_failed = False  # the runtime record could not be written (said once)
        self._status_file = StatusFile(lib.db_path)  # the file beside the index, and its failure
        self._status_lock = threading.Lock()
        self._status: dict[str, Any] = {
            "pid": os.getpid(),
            "root": str(lib.root),
            "state": "starting",
            "reason": None,
            "catching_up": False,  # reconciling everything after events were lost: not a stop
            "unreadable": [],  # folders it cannot read: the index keeps what it held there
            "unreadable_count": 0,
            "hint": None,
            "writing": False,
            "started_at": time.time(),
            "heartbeat_at": time.time(),
            "observer": None,
            "notice": "",
            "queue": 0,  # changes waiting: dirty paths, and `events_waiting`
            "events_waiting": 0,  # file events the watcher has still to hand on (a burst)
            "events_waiting_since": None,  # since when there have been some, without a break
            "busy": False,
            "progress": None,
            "progress_at": None,  # when the reconcile under way last got a file further
            "last_event_at": None,
            "last_reconcile_at": None,
            "last_reconcile_started_at": None,
            "last_reconcile_seconds": None,
            "last_check_at": None,  # the last whole-index check (see `_check_when_idle`)
            "last_check_ok": None,
            "reconciles": 0,
            "recoveries": 0,
            "last_batch": None,
            "error_count": 0,
            "errors": [],
            **NO_PROBLEM,  # status_file_error, status_file_hint: see `publish`
        }

    # ----- status (any thread) ----------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        """A consistent copy of the live status (safe to read from any thread)."""
        with self._status_lock:
            return copy.deepcopy(self._status)

    def freshness_warning(self) -> str | None:
        """Why the index may not show the folder as it is now, for tool envelopes (see
        `status.stale_warning`); None while it keeps up. Judged on the whole status, as
        `markindex status` judges it: a chosen few keys left out the unreadable folders."""
        mine = self.status
        if mine["state"] == "read-only":
            return self._waiting_warning()
        return stale_warning(mine)

    def _waiting_warning(self) -> str | None:
        """Read-only, the index is as live as its writer keeps it: a writing daemon's own
        trouble (frozen, cannot write, ended) is this daemon's too, and a writer that is no
        daemon (`markindex index`) holding the lock for long (a big run, or a hung one) is said."""
        writer, warning, pid = self._writer_watch.read()
        if warning:
            return warning
        since = self._read_only_since
        if (writer is not None and writer["writing"]) or since is None:
            return None  # another daemon keeps the index live
        waited = time.time() - since
        if waited < DAEMON_WAIT_WARN_S:
            return None
        holder = f"pid {pid}" if pid else "another process"
        return (
            f"the live index is waiting for the writer lock, held by {holder} for {waited:.0f} s"
            f" (an index run, or a hung one); answers may miss changes made since"
            f" {iso_time(since)}"
        )

    def _set(self, **values: Any) -> None:
        with self._status_lock:
            self._status.update(values)

    def _get(self, key: str) -> Any:
        with self._status_lock:
            return self._status.get(key)

    def _error(self, path: str, error: str, *, level: int = logging.WARNING) -> None:
        with self._status_lock:
            errors: list[dict[str, Any]] = self._status["errors"]
            errors.append({"at": round(time.time(), 3), "path": path, "error": error})
            del errors[:-DAEMON_ERRORS_KEPT]
            self._status["error_count"] += 1
        log.log(level, "%s%s", f"{path}: " if path else "", error)

    # ----- lifecycle (event loop) -------------------------------------------------------------
    async def run(self) -> None:
        """Watch and reconcile until cancelled, or raise `DaemonStopped` when it cannot go on.

        Safe to pass as an MCP background coroutine or a Textual worker.
        """
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            remove_daemon_record(self.lib.db_path)  # and those of daemons of this index now gone
        self._coalescer = Coalescer(
            loop,
            quiet_s=self.quiet_s,
            max_wait_s=self.max_wait_s,
            settled_quiet_s=DAEMON_SETTLED_QUIET_MS / 1000,
        )
        guard = asyncio.create_task(self._supervised("guard", self._guard), name="markindex-guard")
        try:
            await self._sessions()
        except DaemonStopped:
            raise
        except Exception as exc:  # a bug: end loudly rather than serve a stale index
            log.debug("the live index failed", exc_info=True)
            self.fatal = DaemonStopped(
                f"the live index failed ({type(exc).__name__}: {exc})",
                "see the log; restart `markindex daemon`",
            )
            raise self.fatal from exc
        finally:
            guard.cancel()
            self._shutdown()
            if self.fatal is not None:
                self.ended.set()

    async def _supervised(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` for as long as the daemon runs; log, record and restart it when it fails."""
        delay = DAEMON_RETRY_S[0]
        while True:
            try:
                await job()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("%s task failed", name, exc_info=True)
                self._error("", f"{name} task failed ({type(exc).__name__}: {exc}); restarting")
                self._publish()
                await asyncio.sleep(delay)
                delay = min(delay * 2, DAEMON_RETRY_S[1])

    async def _sessions(self) -> None:
        """Run sessions one after the other: a lost or failed session is torn down and restarted."""
        delay = DAEMON_RETRY_S[0]
        while True:
            self._session = asyncio.create_task(self._one_session(), name="markindex-session")
            try:
                await asyncio.wait({self._session})
            except asyncio.CancelledError:
                self._session.cancel()
                raise
            exc = None if self._session.cancelled() else self._session.exception()
            await self._end_session()
            if isinstance(exc, DaemonStopped):
                self.fatal = exc
                raise exc
            if isinstance(exc, _Lost):
                self._recovering(str(exc))
            elif exc is not None:
                log.debug("session failed", exc_info=exc)
                self._session_failed(diagnose(exc, self.lib.db_path), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, DAEMON_RETRY_S[1])
                continue
            delay = DAEMON_RETRY_S[0]

    async def _one_session(self) -> None:
        await self._wait_for_root()
        retargeted = self._root_retargeted()
        if retargeted:
            raise DaemonStopped(retargeted, "restart `markindex daemon` to index that folder")
        self._require_own_index()
        self._identity = _Identity(root=_file_id(self.lib.root), mounts=mounts_in(self.lib.root))
        self._start_watching()
        await self._become_writer()
        await self._write_loop()

    def _require_own_index(self) -> None:
        """Never reconcile this library into another library's index: that removes all of its
        documents. Every entry (`daemon`, `mcp --watch`, the terminal app's watcher) and an
        index put in place while running are refused as `index` refuses them."""
        try:
            self.lib.require_own_index()
        except MarkindexError as exc:
            raise DaemonStopped(exc.message, exc.hint) from None

    def _session_failed(self, problem: Problem, delay: float) -> None:
        """A session could not start (a full disk, a read-only index): say why in status and once
        in the log per distinct problem, then retry with back-off."""
        if problem.damaged:
            self._damaged.set()
        if problem != self._problem:
            self._problem = problem
            self._error("", f"{problem.reason} ({problem.hint})")
        with self._status_lock:
            self._status["recoveries"] += 1
        self._set(
            state="retrying",
            catching_up=False,
            reason=problem.reason,
            hint=f"{problem.hint} (next try in {delay:.0f} s)",
            busy=False,
        )
        self._publish()

    def _recovering(self, reason: str, hint: str = "recovering by itself") -> None:
        """Say in status (and once in the log) what went wrong and that it is being repaired."""
        with self._status_lock:
            self._status.update(state="recovering", reason=reason, hint=hint, busy=False)
            self._status["recoveries"] += 1
        self._error("", f"{reason}: {hint}")
        self._publish()

    async def _wait_for_root(self) -> None:
        """A vanished library folder may be coming back (moved and back, re-cloned): wait a bit."""
        root = self.lib.root
        if root.is_dir():
            return
        self._recovering(f"the library folder {root} is gone", "waiting for it to come back")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DAEMON_ROOT_WAIT_S
        while not root.is_dir():
            if loop.time() > deadline:
                raise DaemonStopped(
                    f"the library folder {root} is gone",
                    "restart `markindex daemon` once it is back",
                )
            await asyncio.sleep(DAEMON_GUARD_S / 2)

    def _start_watching(self) -> None:
        assert self._coalescer is not None
        handler = LibraryEvents(self.lib.root, self._coalescer, index_dir=self.lib.db_path.parent)
        self._alarm = OverflowAlarm(self._on_overflow)
        self._alarm.install()
        remote = None if self.poll else remote_file_system(self.lib.root)
        if remote:
            self._poll_notice = REMOTE_HINT.format(where=remote, s=DAEMON_POLL_INTERVAL_S)
            log.warning(self._poll_notice)
        # Watch first, then reconcile: an edit during the first scan is then never lost.
        self._watch = start_watching(self.lib.root, handler, poll=self.poll or bool(remote))
        self._events = handler
        notice = self._watch.notice or (self._poll_notice if self._watch.kind == "polling" else "")
        self._set(observer=self._watch.kind, notice=notice)
        log.info("watching %s (%s)", self.lib.root, self._watch.kind)

    async def _become_writer(self) -> None:
        assert self._coalescer is not None
        self.lib.ensure_db_dir()
        announced = False
        holder: int | None = None
        while not self.lock.try_acquire():
            _, pid = writer_lock_state(self.lib.db_path)
            if not announced or pid != holder:
                holder = pid
                who = f"pid {pid}" if pid else "another process"
                if not announced:
                    log.info("%s writes the index: serving read-only", who)
                self._set(
                    state="read-only",
                    reason=f"waiting for the writer lock held by {who}",
                    hint="serving reads meanwhile; takes over writing when the lock frees",
                    busy=False,
                    progress=None,
                )
                self._publish()
                if not announced:
                    self._read_only_since = time.time()
                announced = True
            self._coalescer.discard()  # the takeover reconciles everything anyway
            await asyncio.sleep(DAEMON_LOCK_POLL_S)
        if announced:
            log.info("writer lock acquired: taking over indexing")
            self._set(state="starting", reason=None, hint=None)
        self._read_only_since = None
        self._identity.lock = _file_id(self.lock.path)
        self._set(writing=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._open_writer)
        self._identity.db = _file_id(self.lib.db_path)
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
            # Start writing first: the status file can be written while the reconcile runs.
            pending = loop.run_in_executor(self._writer, self._reconcile, batch)
            self._begin(batch)
            try:
                report = await pending
            except (asyncio.CancelledError, _Stopping, _Lost):
                self._coalescer.put_back(batch)
                raise
            except Exception as exc:  # the loop must outlive any single failure
                self._failed(batch, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, DAEMON_RETRY_S[1])
                continue
            delay = DAEMON_RETRY_S[0]
            self._end(batch, report)

    def _failed(self, batch: Batch, exc: Exception, delay: float) -> None:
        """A reconcile failed: keep its paths, say why in status (log it once), retry later."""
        assert self._coalescer is not None
        problem = diagnose(exc, self.lib.db_path)
        if problem.reopen:
            self._reopen.set()
        if problem.damaged:
            self._damaged.set()
        if problem != self._problem:
            self._problem = problem
            log.debug("reconcile failed", exc_info=exc)
            self._error("", f"{problem.reason} ({problem.hint})")
        self._coalescer.put_back(batch)
        self._set(
            state="retrying",
            catching_up=False,
            reason=problem.reason,
            hint=f"{problem.hint} (next try in {delay:.0f} s)",
            busy=False,
            progress=None,
        )
        self._publish()

    async def _guard(self) -> None:
        """Every `DAEMON_GUARD_S`: is the session still whole? Publish the heartbeat; tidy when idle."""
        while True:
            await asyncio.sleep(DAEMON_GUARD_S)
            reason = self._lost_reason()
            if reason and self._session is not None and not self._session.done():
                self._recovering(reason, "restarting the live index")
                self._session.cancel()
            elif self._rewatch_needed() and self._session is not None:
                self._session.cancel()  # the next session watches it, and reconciles all
            if self._backlog_changed() or (
                time.monotonic() - self._published_at >= DAEMON_HEARTBEAT_S
            ):
                self._publish()
            self._poll_linked_soon()
            self._sweep_when_idle()
            self._tidy_when_idle()
            await self._catch_up_when_idle()
            self._check_when_idle()

    def _note_backlog(self) -> int:
        """Put the watcher's backlog in status (`events_waiting`, see `WatchHandle.backlog`, and
        since when it has had some, as far as these looks can tell: one every guard tick at
        least). Read before the coalescer's queue: an event passing from one to the other
        meanwhile is then counted twice rather than missed."""
        watch = self._watch
        waiting = watch.backlog() if watch is not None else 0
        with self._status_lock:
            was = self._status["events_waiting_since"]
            since = (was or round(time.time(), 3)) if waiting else None
            self._status.update(events_waiting=waiting, events_waiting_since=since)
        return waiting

    def _backlog_changed(self) -> bool:
        """The watcher's backlog began or drained since status last said: a burst is read far
        slower than it is made, and until then status said "watching", nothing queued."""
        was = bool(self._get("events_waiting"))
        return bool(self._note_backlog()) != was

    def _poll_linked_soon(self) -> None:
        """Run `_poll_linked` on the writer thread (a stat may block, the event loop must not),
        unless one is still waiting there behind a reconcile."""
        if not self._linked or (self._linked_poll is not None and not self._linked_poll.done()):
            return
        try:
            self._linked_poll = self._writer.submit(self._poll_linked)
        except RuntimeError:  # shutting down
            pass

    def _poll_linked(self) -> None:
        """A file with several names can be written through one outside the library, and inotify
        reports that to watches of that other folder only: the library's name would stay stale
        for good, without a word. Such files (rare; found by each reconcile's stat) are compared
        with their last seen stat every guard tick, and a change is handled as an event
        (writer thread, like `_note_linked`)."""
        if not self._linked or self._coalescer is None:
            return
        names = list(self._linked)
        if len(names) > DAEMON_LINKED_POLL_FILES:
            # Many (a library hard-linked into snapshots, `cp -al`): a slice per tick, in turn,
            # so the cost per tick stays bounded (all 20 000 each tick took half a core).
            start = self._linked_cursor % len(names)
            names = (names[start:] + names[:start])[:DAEMON_LINKED_POLL_FILES]
            self._linked_cursor = start + DAEMON_LINKED_POLL_FILES
        for rel in names:
            seen = self._linked[rel]
            try:
                st = os.stat(self.lib.root / rel, follow_symlinks=False)
            except OSError:
                del self._linked[rel]  # gone or unreadable: the reconcile it starts finds out
                self._coalescer.add(rel)
                continue
            if (st.st_size, st.st_mtime_ns) != (seen.size, seen.mtime_ns):
                self._linked[rel] = FileStat(st.st_size, st.st_mtime_ns, st.st_nlink)
                self._coalescer.add(rel)

    def _sweep_when_idle(self) -> None:
        """Every `sweep_s` without a full reconcile, and while nothing else is to do, compare
        every file with the index (a stat each): a safety net for a change no file event told
        of, such as a write through a shared mmap. What it finds is said (see `_end`)."""
        c = self._coalescer
        if not self.sweep_s or c is None or not self.lock.held or c.pending:
            return
        if self._get("busy") or time.monotonic() - self._full_at < self.sweep_s:
            return
        self._full_at = time.monotonic()  # once per period, also when it fails
        c.request_sweep()

    def _note_unreadable(self, report: IndexReport) -> None:
        """Keep the paths the daemon cannot read current (writer thread): while there are any,
        answers warn that the index may be out of date there (see `status.stale_warning`)."""
        if report.scope is None:
            unreadable = set(report.unreadable)
        else:
            scope = report.scope
            unreadable = {rel for rel in self._unreadable if not below_any(rel, scope)}
            unreadable.update(report.unreadable)
        self._unreadable = unreadable
        self._set(
            unreadable=sorted(unreadable)[:STATUS_UNREADABLE_SHOWN],
            unreadable_count=len(unreadable),
        )

    def _note_linked(self, report: IndexReport) -> None:
        """Keep the files with several names current: a run replaces what it looked at (writer
        thread)."""
        if report.scope is None:
            self._linked = dict(report.linked)
            return
        scope = report.scope
        kept = {rel: st for rel, st in self._linked.items() if not below_any(rel, scope)}
        kept.update(report.linked)
        self._linked = kept

    def _lost_reason(self) -> str | None:
        """Why the running session no longer holds what it opened, or None while all is well."""
        ident = self._identity
        if ident.root is not None and _file_id(self.lib.root) != ident.root:
            return f"the library folder {self.lib.root} was deleted, moved or replaced"
        retargeted = self._root_retargeted()
        if retargeted:
            return retargeted  # the next session ends the daemon with it
        if ident.mounts is not None and mounts_in(self.lib.root) != ident.mounts:
            return f"a file system was mounted or unmounted in the library folder {self.lib.root}"
        db = _file_id(self.lib.db_path)
        if ident.db is not None and db != ident.db:
            store = self._store
            own = (store is not None and store.owns(db)) or (db is not None and db == ident.rebuilt)
            if not own:
                return f"the index file {self.lib.db_path} was deleted or replaced"
            ident.db = db  # this daemon's own full rebuild, swapped in
        if ident.lock is not None and _file_id(self.lock.path) != ident.lock:
            return f"the writer lock file {self.lock.path} was deleted or replaced"
        if self._watch is not None and self._watch.limit_reached():
            # A folder created since start could not be watched: poll from now on, and say so.
            self.poll = True
            self._poll_notice = (
                LIMIT_HINT.format(s=DAEMON_POLL_INTERVAL_S) + " [a new folder could not be watched]"
            )
            log.warning(self._poll_notice)
            return "the inotify watch limit is reached: a folder is not watched"
        if self._watch is not None and not self._watch.healthy():
            return self._observer_stopped(self._watch)
        return None

    def _rewatch_needed(self) -> bool:
        """The watcher no longer watches what it should (see `LibraryEvents.rewatch`): a folder
        inotify could not watch was made readable, or two folders swapped places. Changes there
        would go unseen, or be taken for others: start the session again."""
        events = self._events
        if events is None or not events.rewatch:
            return False
        log.info("%s", events.rewatch)
        events.rewatch = ""
        return True

    def _root_retargeted(self) -> str | None:
        """The library path was given through a symlink (`docs -> releases/v1`) that now leads
        to another folder (`ln -sfn releases/v2 docs`): a fresh index of that path indexes the
        other folder, so this daemon, watching the first, would go stale without a word. Its
        index may even live in the first folder: the daemon stops, and says why."""
        given = self.lib.given_root
        try:
            now = Path(os.path.realpath(given, strict=True))
        except OSError:  # the link is being replaced, or gone: the next check sees
            return None
        if now == self.lib.root or not now.is_dir():
            return None
        return f"the library path {given} now leads to another folder, {now} (was {self.lib.root})"

    def _observer_stopped(self, watch: WatchHandle) -> str:
        """Why the observer ended, and how the next session watches.

        inotify ends its watch when the library folder itself is deleted or moved; after
        `rm -rf LIB && mkdir LIB` the new folder may even reuse the old inode, so only that
        event tells. The new session then watches the new folder with inotify again. An
        observer that stops for no known reason (e.g. a watch limit hit on a new folder) is
        restarted once; stopping again within `DAEMON_OBSERVER_RETRY_S`, the daemon polls from
        then on and says so in status (`notice`).
        """
        if self._events is not None and self._events.root_gone:
            return f"the library folder {self.lib.root} was deleted, moved or replaced"
        now = time.monotonic()
        last, self._observer_died_at = self._observer_died_at, now
        if watch.kind != "polling" and last is not None and now - last < DAEMON_OBSERVER_RETRY_S:
            self.poll = True
            self._poll_notice = (
                f"{watch.kind} watching stopped twice within {DAEMON_OBSERVER_RETRY_S:.0f} s; "
                f"watching by polling every {DAEMON_POLL_INTERVAL_S:.0f} s instead "
                "(restart the daemon to try again; check `sysctl fs.inotify.max_user_watches`)"
            )
            log.warning(self._poll_notice)
        return f"the file observer ({watch.kind}) stopped"

    async def _end_session(self) -> None:
        """Tear the session down without blocking the loop; the next one starts from scratch."""
        self._abort.set()
        self._identity = _Identity()
        if self._alarm is not None:
            self._alarm.remove()
            self._alarm = None
        loop = asyncio.get_running_loop()
        if self._watch is not None:
            # Cleared only once stopped: if this is cancelled, `_shutdown` stops it instead.
            await asyncio.to_thread(self._watch.stop)
            self._watch = None
            self._events = None
        try:
            await loop.run_in_executor(self._writer, self._close_writer)
        except (apsw.Error, OSError) as exc:  # e.g. its file was deleted: it is dropped anyway
            log.debug("closing the old index: %s", exc)
        self.lock.release()
        self._set(writing=False, busy=False, progress=None, observer=None, notice="")
        self._abort.clear()

    def _tidy_when_idle(self) -> None:
        """Once writes pause, fold the FTS segments small commits left behind (queries slow down
        by ~30% until then). Not awaited: the guard keeps its heartbeat meanwhile."""
        last = self._get("last_reconcile_at")
        if self._indexer is None or self._get("busy") or not last or last == self._tidied_for:
            return
        if time.time() - last < DAEMON_TIDY_IDLE_S:
            return
        if self._tidying is not None and not self._tidying.done():
            return
        self._tidied_for = last
        self._tidying = asyncio.get_running_loop().create_task(self._tidy())

    async def _tidy(self) -> None:
        """Merge step by step on the writer thread; a step is ~0.1 s, and the merge gives way
        as soon as there is something to index (the next pause resumes it)."""
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            queued = self._coalescer is not None and self._coalescer.pending
            if queued or self._get("busy"):
                self._tidied_for = None
                return
            if not await loop.run_in_executor(self._writer, self._tidy_step):
                return

    def _check_when_idle(self) -> None:
        """Read the whole index once writes pause after start, then once a day, on a thread of
        its own (see `store.integrity`): damage where no write reads would otherwise wait for a
        search to meet it. Damage found is repaired like damage a write meets. Not awaited: the
        guard keeps its heartbeat, and tool calls are answered meanwhile."""
        if self._checking is not None and self._checking.is_alive():
            return
        last = self._get("last_reconcile_at")
        if self._indexer is None or self._get("busy") or self._damaged.is_set() or not last:
            return
        if time.time() - last < DAEMON_CHECK_IDLE_S:
            return
        if (
            self._checked_at is not None
            and time.monotonic() - self._checked_at < DAEMON_CHECK_EVERY_S
        ):
            return
        self._checked_at = time.monotonic()
        # A daemon thread: stopping never waits for a check (2 s per 100 MB of index).
        self._checking = threading.Thread(target=self._check, name="markindex-check", daemon=True)
        self._checking.start()

    def _check(self) -> None:
        try:
            report = check_index(self.lib.db_path)
        except MarkindexError as exc:  # cannot even be opened: the next write says why
            log.info("whole-index check skipped: %s", exc.message)
            return
        except Exception as exc:  # a thread of its own: say it, never a traceback on stderr
            log.warning("whole-index check failed: %s: %s", type(exc).__name__, exc)
            return
        self._set(last_check_at=round(time.time(), 3), last_check_ok=report.ok)
        if report.ok:
            log.info("whole-index check: no damage (%.1f s)", report.seconds)
            return
        self.damage_found("; ".join(report.problems[:3]))

    def damage_found(self, detail: str) -> None:
        """The index is damaged (the whole-index check, or a read in this process met it): the
        next reconcile rebuilds it from the folder (any thread)."""
        if self._damaged.is_set():
            return
        self._error("", f"the index {self.lib.db_path} is damaged ({detail}): building it again")
        self._damaged.set()
        if self._coalescer is not None:
            self._coalescer.request_full()  # the next reconcile rebuilds it (see `_reconcile`)

    async def _catch_up_when_idle(self) -> None:
        """Summaries left over by a time-sliced run are asked for once writes pause, one slice
        at a time on the writer thread, so a file event waits at most one slice. Not awaited:
        the guard keeps its heartbeat meanwhile."""
        if not getattr(self.after_write, "pending", False) or self._indexer is None:
            return
        if self._catching_up is not None and not self._catching_up.done():
            return
        last = self._get("last_reconcile_at")
        if self._get("busy") or not last or time.time() - last < DAEMON_TIDY_IDLE_S:
            return
        loop = asyncio.get_running_loop()
        self._catching_up = loop.run_in_executor(self._writer, self._catch_up)

    def _catch_up(self) -> None:
        hook, store = self.after_write, self._store
        if hook is None or store is None:
            return
        try:
            hook(store, IndexReport(), self._progress)
        except _Stopping:
            pass
        except Exception as exc:  # the next reconcile reports a lasting problem
            log.debug("summaries could not be written: %s", exc)

    def _tidy_step(self) -> bool:
        """One merge step (writer thread); whether to go on. Optional housekeeping: a failure
        (e.g. a full disk) leaves the index as it was, merged up to the last whole step."""
        try:
            if self._indexer is not None and self._indexer.merge_step():
                return True
            if self._store is not None:
                self._store.truncate()
        except (apsw.Error, OSError) as exc:
            log.debug("could not merge the search index segments: %s", exc)
        return False

    def _shutdown(self) -> None:
        """Begin stopping without blocking the loop: the slow part runs on its own thread.

        Synchronous on purpose: under anyio (the MCP server) every `await` inside a cancelled
        scope is cancelled again, so an awaiting shutdown would stop halfway.
        """
        self._busy_at_stop = bool(self._get("busy"))
        self._set(state="stopping")
        self._stopping.set()
        if self._session is not None:
            self._session.cancel()
        if self._tidying is not None:
            self._tidying.cancel()
        watch, self._watch = self._watch, None
        if self._alarm is not None:
            self._alarm.remove()
            self._alarm = None
        self._stopper = threading.Thread(
            target=self._finish, args=(watch,), name="markindex-shutdown", daemon=False
        )
        self._stopper.start()

    def _finish(self, watch: WatchHandle | None) -> None:
        """Stop watching, let an in-flight reconcile commit (bounded), close, free the lock."""
        if watch is not None:
            self._unread_at_stop = watch.backlog()  # dropped by the stop: said by `_stopped`
            watch.stop()
        done = self._after_writer(self._last_close)
        if futures.wait([done], timeout=DAEMON_SHUTDOWN_S).not_done:
            # The writer is inside one long step. Freed now, the lock would let another writer
            # in before this one commits over it: it is freed when the writer is done.
            log.warning(
                "the writer is still busy after %g s: the index is closed and the writer lock"
                " freed when it is done",
                DAEMON_SHUTDOWN_S,
            )
            self._left_to_writer = [done, self._after_writer(self._stopped)]
            for step in self._left_to_writer:
                step.add_done_callback(self._say_failed)
            self._writer.shutdown(wait=False)
            return
        self._say_failed(done)  # before `_stopped`, so the final status holds it
        self._writer.shutdown(wait=False)
        self._stopped()

    def _say_failed(self, step: Future[None]) -> None:
        """Say a failed last step of the stop (the close, the final status) in one line of the
        log and in status. It was a traceback on stderr, or, once the writer was left to finish
        alone, nothing at all: nobody looked at its result."""
        message = _stop_failed(step)
        if message is None:
            return
        log.debug("the stop failed", exc_info=step.exception())
        self.stop_failure = self.stop_failure or message
        self._error("", message, level=logging.ERROR)

    def stop_error(self) -> DaemonStopped | None:
        """After `wait_stopped`: why this daemon did not stop cleanly (its last step failed, or
        is still running), None when it did. A program that ran it exits non-zero with it.

        A writer busy past DAEMON_SHUTDOWN_S is left the last steps (`_left_to_writer`) and the
        shutdown thread ends at once: judged by that thread alone, such a stop exited 0 while
        its close had still to run (and might fail)."""
        steps = self._left_to_writer
        failed = [m for step in steps if step.done() and (m := _stop_failed(step))]
        message = self.stop_failure or next(iter(failed), None)
        if message is None:
            if self.wait_stopped(timeout=0) and all(step.done() for step in steps):
                return None
            message = "the live index was still writing when the program ended"
        return DaemonStopped(
            message,
            "run `markindex status` to see what the index holds; `markindex index ROOT` brings"
            " it up to date",
        )

    def _after_writer(self, step: Callable[[], None]) -> Future[None]:
        """Run a last step of the stop on the writer thread, after what is queued there; when the
        writer no longer takes work, wait for it to end and run the step on this thread.

        `_finish` is not alone in stopping the writer: at interpreter exit Python stops every
        executor's thread before it joins this (non-daemon) one. A program that ended without
        `wait_stopped` (the terminal app with its watcher, a Pilot script) had the last close
        refused with a RuntimeError traceback, the index left open with its mark of a write
        under way, and a status file still saying `watching`. The step runs once the writer's
        last one has ended, so the store is never used by two threads at once.
        """
        try:
            return self._writer.submit(step)
        except RuntimeError:  # shut down (see above)
            pass
        self._writer.shutdown(wait=True)  # unbounded: Python's exit waits for it as long
        done: Future[None] = Future()
        try:
            step()
        except Exception as exc:  # said by the waiter, as a step run by the writer would be
            done.set_exception(exc)
        else:
            done.set_result(None)
        return done

    def _left_behind(self) -> tuple[str | None, str | None]:
        """Why the index is not up to date as the daemon stops, and what to do; (None, None)
        when it is."""
        fatal = self.fatal
        c = self._coalescer
        paths, rules, full = c.unreconciled() if c is not None else (0, False, False)
        # A full pass asked for after the first one is mostly a safety net (a watcher restarted,
        # a second look after lost events), not known changes; the first one unfinished, or one
        # for events the kernel dropped, is.
        needed = not self._get("reconciles") or self._events_lost.is_set()
        whole = rules or (full and needed)
        if fatal is not None:
            return fatal.message, fatal.hint
        unread = self._unread_at_stop
        if whole or paths or unread:
            left = (
                "a reconcile of the whole library unfinished"
                if whole
                else f"{paths} changed path{'s' if paths > 1 else ''} not yet indexed"
                if paths
                else f"about {unread} file event{'s' if unread > 1 else ''} not yet read"
            )
            return (
                f"it was asked to stop with {left}",
                f"run `{self.lib.command()}`, or start the daemon again, to bring it up to date",
            )
        return None, None

    def _last_close(self) -> None:
        """Close the writer as the daemon stops (writer thread); when the index is up to date,
        first clear the mark the daemon kept while it wrote (see `_ready_writer`)."""
        indexer, store = self._indexer, self._store
        current = (
            not self._busy_at_stop
            and self._get("reconciles")
            and not self._damaged.is_set()
            and self._left_behind() == (None, None)
        )
        if current and store is not None and indexer is not None and indexer.standing:
            try:
                store.set_meta({}, drop=[runs.UNFINISHED_RUN])
            except (apsw.Error, OSError) as exc:  # the mark stays: said until a whole run ends
                log.warning("could not note that the index is up to date: %s", exc)
        self._close_writer()

    def _stopped(self) -> None:
        """The last step of a stop, once the writer is closed: say how the index was left (a
        change seen but not indexed makes it a stop that status reports), free the lock."""
        fatal = self.fatal
        reason, hint = self._left_behind()
        self._set(
            state=f"stopped: {reason}" if reason else "stopped",
            reason=reason,
            hint=hint,
            writing=False,
            busy=False,
        )
        self._publish()
        self.lock.release()
        if not self._status_file.problem["status_file_error"]:
            with contextlib.suppress(OSError):
                remove_daemon_record(self.lib.db_path)
        # else the record says how it stopped: the status file still says it runs, and readers
        # would take a clean stop for a kill (the next daemon of this index removes the record).
        if reason and fatal is None:
            log.warning("%s (%s)", reason, hint)
        log.info("stopped")

    def wait_stopped(self, timeout: float = DAEMON_SHUTDOWN_S + 5) -> bool:
        """Wait (off the loop) until shutdown finished; False if it is still going."""
        if self._stopper is None:
            return True
        self._stopper.join(timeout)
        return not self._stopper.is_alive()

    # ----- writer thread ----------------------------------------------------------------------
    def _open_writer(self) -> None:
        if self._damaged.is_set():  # never opened again: the next reconcile rebuilds it
            return
        discard_leftover(self.lib.db_path)
        self._store = _LiveStore(self.lib.db_path)
        self._indexer = _LiveIndexer(
            self.lib.root,
            self._store,
            ignore=self.ignore,
            setext=self.setext,
            after_write=self.after_write,
            interrupt=self._interrupt,
        )
        self.ignore_in_use = self._indexer.ignore

    def _close_writer(self) -> None:
        store, self._store, self._indexer = self._store, None, None
        if store is not None:
            store.close()  # first forget it: a failed close must not leave it in use

    def _ready_writer(self) -> tuple[Indexer, Store]:
        """The writer, reopened first when the last failure asked for it (e.g. made writable).

        The index is marked as this daemon's to keep current (`runs.live_mark`) before anything
        is written: killed, the daemon leaves the mark, and status and every answer say the index
        may be behind until a run of the whole library ends. (That another writer took the lock
        since says nothing: an `index --rebuild` or an `index` stopped during its scan takes it,
        writes no mark of its own into this file, and ends without catching up.)"""
        if self._reopen.is_set() or self._store is None:
            self._close_writer()
            self._open_writer()
            self._reopen.clear()
        assert self._indexer is not None and self._store is not None
        if self._indexer.standing is None:
            standing = runs.live_mark(os.getpid())
            self._store.set_meta(standing)
            self._indexer.standing = standing
        return self._indexer, self._store

    def _reconcile(self, batch: Batch) -> IndexReport:
        """Bring the dirty paths (or everything) in line with the disk, by stat and content hash
        (writer thread)."""
        try:
            report = self._reconcile_batch(batch)
        except apsw.IOError as exc:
            # SQLite's I/O errors carry no errno (a file size limit is a bare 'disk I/O error');
            # the connection keeps it, for `diagnose` to say why.
            err = self._store.conn.system_errno if self._store is not None else 0
            if err:
                raise OSError(err, os.strerror(err)) from exc
            raise
        self._note_linked(report)
        self._note_unreadable(report)
        return report

    def _reconcile_batch(self, batch: Batch) -> IndexReport:
        if self._identity.root is not None and _file_id(self.lib.root) != self._identity.root:
            # Never reconcile against a missing folder: that would empty the index.
            raise _Lost(f"the library folder {self.lib.root} is gone or was replaced")
        if self._damaged.is_set():
            return self._rebuild_damaged()
        indexer, store = self._ready_writer()
        # Cheap (nested .gitignore files load lazily) and needed for folders that moved in.
        indexer.reload_rules()
        paths = minimal_paths(batch.paths)
        full = batch.full or batch.rules_changed or len(paths) > DAEMON_FULL_SCAN_PATHS
        # inotify names only the link written through: another name of the same file in the
        # library changed too, with no event of its own. A full reconcile compares every file's
        # stat, and a shared inode's new size or mtime shows under each name.
        named = self._named_files(batch.paths)
        full = full or any(st.st_nlink > 1 for st in named.values())
        t0 = time.perf_counter()
        # Before a full reconcile too: it compares stats, and these may hide a change. Every
        # named path, not only the shortest: a dirty folder must not hide its dirty files.
        self._rehash_named(store, named)
        if full:
            self._forget_skips(store, None)
            report = indexer.run(self._progress)
            _release_memory(report)
            return report
        self._forget_skips(store, paths)
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

    def _rebuild_damaged(self) -> IndexReport:
        """Build the index again from the folder beside the damaged file, then swap it in whole
        (see `rebuild.build_afresh`): readers keep the old one until then. The damaged file is
        only read for its summary cache and the setext choice."""
        self._close_writer()

        def adopt(fresh: Path) -> None:  # before the swap: the guard knows it as its own
            self._identity.rebuilt = _file_id(fresh)

        try:
            report = rebuild_from_folder(
                self.lib.root,
                self.lib.db_path,
                reason="the index was damaged",
                ignore=self.ignore_in_use
                if self.ignore_in_use is not None
                else self.lib.remembered_ignore(),
                setext=self.setext if self.setext is not None else self.lib.remembered_setext(),
                after_write=self.after_write,
                progress=self._progress,
                on_fresh=adopt,
                interrupt=self._interrupt,
            )
        except BaseException:
            self._identity.rebuilt = None
            raise
        self._identity.db = self._identity.rebuilt
        self._damaged.clear()
        self._reopen.set()
        self._ready_writer()  # the new file holds no mark of this daemon yet
        _release_memory(report)
        return report

    def _progress(self, done: int, total: int, path: str) -> None:
        """Called per file by the indexer; also where a shutdown or restart ends a long run."""
        self._interrupt()
        self._set(progress={"done": done, "total": total}, progress_at=time.time())

    def _interrupt(self) -> None:
        """End the run under way when the daemon stops or restarts its session: called per file,
        and while parse workers work (a big file's parse is not waited for)."""
        if self._stopping.is_set() or self._abort.is_set():
            raise _Stopping

    def _named_files(self, paths: Iterable[str]) -> dict[str, os.stat_result]:
        """The regular files among the paths events named, with their stat (one stat each)."""
        named = {}
        for rel in sorted(paths):
            try:
                st = os.stat(self.lib.root / rel, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                named[rel] = st
        return named

    def _rehash_named(self, store: Store, named: dict[str, os.stat_result]) -> None:
        """Make the indexer hash the files an event named, even when their stat looks unchanged.

        A file rewritten within the file system's timestamp granularity of its last indexing
        keeps its size and mtime (the "racy clean" problem git solves the same way), and so does
        an edit that restores them (`cp -p`, `rsync -t`, `touch -r`). The event says it changed:
        forget the stored stat and let the content hash decide. Only named files are read: the
        cost is per event, never per library. (A name the indexer never stores has no state.)
        """
        states = store.doc_states(named)
        with store.conn:  # one transaction for all the touches
            for rel, st in named.items():
                old = states.get(rel)
                if old is not None and (old.size, old.mtime_ns) == (st.st_size, st.st_mtime_ns):
                    store.touch(rel, st.st_size, 0)

    def _forget_skips(self, store: Store, paths: list[str] | None) -> None:
        """Retry skipped files on a full reconcile (`paths` None) and whenever an event points at
        them: a chmod changes neither size nor mtime, so a remembered "permission denied" would
        otherwise stand for good."""
        retry = list(store.skipped_states(paths))  # those at or below `paths`
        if retry:
            store.delete_documents(retry)

    def _on_overflow(self) -> None:
        """watchdog's thread: the kernel dropped file events. Reconcile everything; the full
        reconcile that follows says why it runs (see `_begin`)."""
        assert self._coalescer is not None
        self._events_lost.set()
        self._coalescer.request_full()

    # ----- status (event loop) ----------------------------------------------------------------
    def _begin(self, batch: Batch) -> None:
        assert self._coalescer is not None
        self._set(
            state="reconciling",
            busy=True,
            last_reconcile_started_at=time.time(),
            progress_at=time.time(),
            last_event_at=self._coalescer.last_event_at or None,
        )
        if batch.full and self._events_lost.is_set():
            # Until this reconcile ends the index misses changes no event told of: in the log,
            # status and every tool envelope (a reason while reconciling makes it warn).
            self._events_lost.clear()
            # watchdog re-adds every watch after an overflow while this pass runs: a folder
            # changed after this pass scanned it and before its watch was back tells nothing.
            # A second full pass, once this one ends, finds such a change (its cost: a stat of
            # every file, 43 ms on the corpus).
            self._confirm_after = True
            reason = "file events were lost (the inotify event queue overflowed)"
            hint = "reconciling everything to find what changed"
            self._error("", f"{reason}: {hint}")
            self._set(reason=reason, hint=hint, catching_up=True)
        self._publish()

    def _end(self, batch: Batch, report: IndexReport) -> None:
        now = time.time()
        if batch.full or batch.rules_changed:
            self._full_at = time.monotonic()
        if batch.sweep and not batch.paths and not batch.rules_changed and report.changed:
            # No event named these: the watcher missed them (they are indexed now).
            missed = [*report.added, *report.updated, *report.removed]
            self._error(
                missed[0],
                f"the periodic check found {len(missed)} changed files no file event told of"
                f" (e.g. {missed[0]}); they are indexed now",
            )
        if self._confirm_after and self._coalescer is not None:
            self._confirm_after = False
            log.info("reconciling everything once more: watches were rebuilt meanwhile")
            self._coalescer.request_full()
        if self._problem is not None:
            log.info("writing the index again")
            self._problem = None
        with self._status_lock:
            started = self._status["last_reconcile_started_at"] or now
            self._status.update(
                state="watching",
                reason=None,
                hint=None,
                catching_up=False,
                busy=False,
                progress=None,
                last_reconcile_at=now,
                last_reconcile_seconds=round(now - started, 4),
            )
            self._status["reconciles"] += 1
            self._status["last_batch"] = {
                "paths": len(batch.paths),
                "full": bool(batch.full or batch.rules_changed),
                "added": len(report.added),
                "updated": len(report.updated),
                "removed": len(report.removed),
                "skipped": len(report.skipped),
            }
        for path, err in report.errors:
            self._error(path, err)
        self._say_warnings(report)
        if report.changed or report.errors:
            log.info(
                "reconciled %s: +%d ~%d -%d, %d skipped, %d errors in %.0f ms",
                "everything" if batch.full or batch.rules_changed else f"{len(batch.paths)} paths",
                len(report.added),
                len(report.updated),
                len(report.removed),
                len(report.skipped),
                len(report.errors),
                (now - started) * 1000,
            )
        if report.full_rebuild:
            log.info("rebuilt the whole index (%s)", report.full_rebuild)
        for path, reason in report.skipped:
            log.debug("skipped %s: %s", path, reason)
        self._publish()

    def _say_warnings(self, report: IndexReport) -> None:
        """Log each warning of a run once while it lasts (an ignore file's line left out, a
        heading that looks like a converter's page break): `markindex index` prints them on
        every run, the daemon said none, so a mistyped ignore rule let files in unsaid."""
        seen = set(report.warnings)
        for path, warning in sorted(seen - self._warned):
            log.warning("%s%s", f"{path}: " if path else "", warning)
        # A run of a few paths repeats what it looked at; a whole run says what still holds.
        self._warned = seen if report.scope is None else self._warned | seen

    def _may_publish(self) -> bool:
        """The lock holder owns the status file; with no writer at all, so does this daemon."""
        if self.lock.held:
            return True
        return not writer_lock_state(self.lib.db_path)[0] and self.lib.db_path.parent.is_dir()

    def _publish(self) -> None:
        """Write this daemon's record, and the status file beside the index when it owns it."""
        self._published_at = time.monotonic()
        beat = round(time.time(), 3)  # before the backlog is read: it is at least that recent
        waiting = self._note_backlog()
        with self._status_lock:
            self._status["heartbeat_at"] = beat
            if self._coalescer is not None:
                self._status["queue"] = waiting + self._coalescer.pending
                if self._coalescer.last_event_at:
                    self._status["last_event_at"] = self._coalescer.last_event_at
            data = copy.deepcopy(self._status)
        # A status file that can't be written is said in the status and the record (read instead
        # by readers of this user), so the daemon is not taken for hung or gone (`publish`).
        problem = (
            self._status_file.write(data) if self._may_publish() else self._status_file.not_ours()
        )
        data.update(problem)
        self._set(**problem)
        try:
            write_daemon_record(self.lib.db_path, data)
        except OSError as exc:
            if not self._record_failed:
                log.warning("cannot write this daemon's status record: %s", exc)
            self._record_failed = True
        else:
            self._record_failed = False


def _stop_failed(step: Future[None]) -> str | None:
    """What a last step of the stop that ended in an exception says (None when it did not)."""
    exc = step.exception()
    if exc is None:
        return None
    return f"the live index did not stop cleanly ({type(exc).__name__}: {exc})"


def _release_memory(report: IndexReport) -> None:
    """After a big reconcile (many documents, or one that took long: a big file), hand the freed
    heap back to the OS (a daemon lives long: one 50 MB document left it 190 MB larger)."""
    big = len(report.added) + len(report.updated) >= 50 or report.seconds >= 1.0
    if not big or not sys.platform.startswith("linux"):
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
    sweep_s: float | None = None,
    serve_mcp: bool = True,
    after_write: AfterWrite | None = None,
) -> None:
    """Run the live index until SIGTERM/SIGINT/SIGHUP (or, when serving MCP, until stdin closes).

    With `serve_mcp`, MCP over stdio runs in the same event loop as the watcher; indexing runs
    in the writer thread, so tool calls are answered while it works. Raises `DaemonStopped`
    when the daemon had to give up (the caller prints it and exits non-zero).
    """
    daemon = Daemon(
        lib,
        ignore=ignore,
        setext=setext,
        poll=poll,
        quiet_ms=quiet_ms,
        sweep_s=sweep_s,
        after_write=after_write,
    )
    lib.live_warning = daemon.freshness_warning  # tool envelopes say when answers may be stale
    lib.on_damage = daemon.damage_found  # a tool call that meets damage has it rebuilt

    async def live() -> None:
        # The MCP server logs a failed background job and serves on; the daemon's own
        # ending is reported by `_until_signal` instead.
        with contextlib.suppress(DaemonStopped):
            await daemon.run()

    if serve_mcp:
        from markindex_core.serve.mcp_server import run_stdio

        main: Callable[[], Awaitable[None]] = lambda: run_stdio(lib, background=[live])  # noqa: E731
    else:
        main = live
    asyncio.run(_until_signal(main, daemon))
    daemon.wait_stopped()
    failed = daemon.fatal or daemon.stop_error()
    if failed is not None:
        raise failed


def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> list[int]:
    """Set `stop` on SIGTERM, SIGINT and SIGHUP (its terminal closed); returns the signals
    handled. Each stops the daemon cleanly: the reconcile under way commits, and status says
    `stopped` (killed outright, it would say the daemon ended without stopping). A loop that
    cannot handle signals (outside the main thread, or a platform without them) is told so in the
    log: the daemon then stops only when its caller or `ended` says so."""
    installed: list[int] = []
    hangup = [signal.SIGHUP] if hasattr(signal, "SIGHUP") else []
    for sig in (signal.SIGTERM, signal.SIGINT, *hangup):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError) as exc:  # logged, not hidden
            log.info("%s will not stop the daemon (this thread or platform): %s", sig.name, exc)
        else:
            installed.append(sig)
    return installed


async def _until_signal(main: Callable[[], Awaitable[None]], daemon: Daemon) -> None:
    """Run `main`, cancelling it cleanly on SIGTERM or SIGINT, or when the daemon gave up."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main())
    stop = asyncio.Event()
    installed = _stop_on_signals(loop, stop)
    waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(daemon.ended.wait())}
    try:
        await asyncio.wait({task, *waiters}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        for waiter in waiters:
            waiter.cancel()
    if task.done():
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        return
    if stop.is_set():
        log.info("signal received: stopping")
    task.cancel()
    await asyncio.wait({task}, timeout=SHUTDOWN_GRACE_S)
    if not task.done():
        _abandon_stdin(daemon)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()


def _abandon_stdin(daemon: Daemon) -> None:
    """The MCP transport reads stdin in a thread no cancellation can wake: once the index is
    closed and the lock released, leave without waiting for it."""
    daemon.wait_stopped()
    if daemon.fatal is not None:
        log.error("%s (%s)", daemon.fatal.message, daemon.fatal.hint)
    else:
        log.info("stopped (stdin reader abandoned)")
    sys.stderr.flush()
    os._exit(1 if daemon.fatal is not None else 0)
